"""Log import at scale: records per second and peak memory of ``simgym logs import``.

    .venv/bin/python benchmarks/logs_import.py                    # 100k and 1M records
    .venv/bin/python benchmarks/logs_import.py --records 200000   # 20k and 200k, quicker
    .venv/bin/python benchmarks/logs_import.py --records 1000000 --small 0 --formats otlp

Writes synthetic but realistic logs of the demo back office
(:mod:`simgym.real.backoffice`: customers, KYC checks, accounts and loan applications
going draft -> submitted -> under_review -> approved / rejected / withdrawn, four roles,
refusals with 403, 409 and 422) to disk, streamed (a record at a time, never the whole
log in memory), in two formats: the flat JSONL form and OTLP JSON traces as the
Collector's file exporter writes them (one export request a line, 512 spans each, the
back office's own span attributes). Many sessions run at once and interleave; every
onboarding creates a customer, a KYC check, an account and a loan, so a million records
touch about 100k objects.

Each log is then imported the way ``simgym logs import`` does (``read_logs`` then
``build_world``) in a fresh Python process, so the peak RSS reported is that import's
alone (``getrusage(RUSAGE_SELF).ru_maxrss`` in the child, at its end; "base" is the same
process after its imports, before the first record). With ``--small`` (by default a tenth
of ``--records``) each format is imported at both sizes side by side: bounded memory means
the larger log's peak is not ten times the smaller one's. The expected counts (sessions,
operations) come from the generator and are printed beside the world's.

Times are from one run on one machine; nothing is asserted. On a shared machine the
child's CPU seconds ("cpu s", its start-up included) say more than its wall time. The
default (100k and 1M records, both formats) takes half an hour or more on 2 shared
cores (one 1M JSONL import: 456 s wall, 187 MiB peak); the
1M files are ~0.6 GB (JSONL) and ~1.9 GB (OTLP), plus ~1.1 GB of scratch SQLite per
import, under ``--dir`` or a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simgym.real.backoffice.store import (
    ACCOUNT_TYPES,
    CURRENCIES,
    KNOWN_DOCUMENTS,
    LOAN_PURPOSES,
    REQUIRED_DOCUMENTS,
    REVIEWER_APPROVAL_LIMIT,
    SANCTIONED_COUNTRIES,
)

START = datetime(2025, 3, 3, 8, 0, tzinfo=UTC).timestamp()
CONCURRENT = 64  # sessions open at once, their records interleaved
SPANS_PER_LINE = 512  # the SDK's BatchSpanProcessor default export batch
COUNTRIES = ("DE", "FR", "NL", "ES", "IT", "GB", "US", "CH", *SANCTIONED_COUNTRIES)
FIRST = ("Ada", "Ben", "Chloe", "Dmitri", "Eva", "Farid", "Greta", "Hugo", "Ines", "Jonas")
LAST = ("Meyer", "Novak", "Okafor", "Petit", "Quinn", "Rossi", "Silva", "Tanaka", "Ueda")
# median latency in ms per operation kind (log-normal around it)
LATENCY = {"GET": 4.0, "POST": 14.0, "kyc": 70.0, "error": 2.5}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _error(status: int, code: str, message: str, /, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


class BackOffice:
    """The traffic of the back office, one call at a time: :meth:`calls` yields dicts with
    session, time, actor, role, operation, method, route, path, request, status, response
    and duration_ms. Memory stays small: only the open sessions, the queues of loans
    waiting for a decision and rings of recent ids are kept."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.counters = {"cust": 0, "acct": 0, "kyc": 0, "loan": 0}
        self.review: deque[dict[str, Any]] = deque(maxlen=50_000)  # submitted loans
        self.manager: deque[dict[str, Any]] = deque(maxlen=50_000)  # above the reviewer limit
        self.recent_loans: deque[dict[str, Any]] = deque(maxlen=5_000)
        self.recent_customers: deque[dict[str, Any]] = deque(maxlen=5_000)
        self.sessions = 0
        self.operations: set[str] = set()
        self.clock = START
        self.staff = {
            role: [f"{role[:3]}-{i:03d}" for i in range(n)]
            for role, n in (("operator", 120), ("reviewer", 30), ("manager", 10), ("auditor", 5))
        }

    # ---- one call ---------------------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        self.counters[prefix] += 1
        return f"{prefix}-{self.counters[prefix]}"

    def _call(self, s: dict, method: str, route: str, path: str, request, status, response):
        kind = "error" if status >= 400 else ("kyc" if route.startswith("/kyc") else method)
        duration = LATENCY[kind] * self.rng.lognormvariate(0.0, 0.6)
        self.clock += self.rng.expovariate(1 / 0.02)  # ~50 calls a second, all sessions
        self.operations.add(f"{method} {route}")
        return {
            "session": s["id"],
            "time": self.clock,
            "actor": s["actor"],
            "role": s["role"],
            "method": method,
            "route": route,
            "path": path,
            "request": request,
            "status": status,
            "response": response,
            "duration_ms": round(duration, 3),
        }

    def _stamp(self) -> str:
        return _iso(self.clock)

    def _forbidden(self, s: dict, action: str) -> dict[str, Any]:
        return _error(403, "forbidden", f"role {s['role']} may not {action}", role=s["role"])

    # ---- sessions ---------------------------------------------------------------------
    def _onboarding(self, s: dict) -> Iterator[dict]:
        """An operator takes a customer from sign-up to a submitted loan application."""
        rng = self.rng
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        email = f"{name.lower().replace(' ', '.')}{rng.randrange(10**6)}@mail.test"
        country = COUNTRIES[0] if rng.random() < 0.3 else rng.choice(COUNTRIES)
        docs = sorted(rng.sample(KNOWN_DOCUMENTS, rng.randint(0, 3)))
        body = {
            "name": name,
            "email": email,
            "date_of_birth": f"{rng.randint(1950, 2000)}-{rng.randint(1, 12):02d}-"
            f"{rng.randint(1, 28):02d}",
            "country": country,
            "documents": docs,
        }
        if rng.random() < 0.04:  # a form sent without the email first
            bad = {k: v for k, v in body.items() if k != "email"}
            problem = [{"field": "email", "problem": "is required"}]
            yield self._call(
                s,
                "POST",
                "/customers",
                "/customers",
                bad,
                422,
                _error(422, "validation_failed", "the request has invalid fields", fields=problem),
            )
        cid = self._new_id("cust")
        customer = {
            "id": cid,
            **body,
            "kyc_status": "pending",
            "created_by": s["actor"],
            "created_at": self._stamp(),
            "account_ids": [],
        }
        self.recent_customers.append(customer)
        yield self._call(s, "POST", "/customers", "/customers", body, 201, dict(customer))
        if rng.random() < 0.7:
            customer["documents"] = sorted(set(docs) | set(REQUIRED_DOCUMENTS))
            yield self._call(
                s,
                "POST",
                "/customers/{customer_id}/documents",
                f"/customers/{cid}/documents",
                {"documents": list(REQUIRED_DOCUMENTS)},
                200,
                dict(customer),
            )
        yield self._call(
            s, "GET", "/customers/{customer_id}", f"/customers/{cid}", None, 200, dict(customer)
        )
        for _attempt in range(2):
            missing = [d for d in REQUIRED_DOCUMENTS if d not in customer["documents"]]
            if country in SANCTIONED_COUNTRIES:
                result, reason = "failed", "sanctioned_country"
            elif missing:
                result, reason = "failed", "missing_documents"
            else:
                result, reason = "passed", None
            kyc = {
                "id": self._new_id("kyc"),
                "customer_id": cid,
                "result": result,
                "reason": reason,
                "missing_documents": missing,
                "checked_by": s["actor"],
                "checked_at": self._stamp(),
            }
            customer["kyc_status"] = result
            yield self._call(s, "POST", "/kyc/{customer_id}", f"/kyc/{cid}", None, 201, kyc)
            if result == "passed" or reason == "sanctioned_country" or rng.random() < 0.5:
                break
            customer["documents"] = sorted(set(customer["documents"]) | set(REQUIRED_DOCUMENTS))
            yield self._call(
                s,
                "POST",
                "/customers/{customer_id}/documents",
                f"/customers/{cid}/documents",
                {"documents": missing},
                200,
                dict(customer),
            )
        if customer["kyc_status"] == "passed" and rng.random() < 0.03:
            yield self._call(
                s,
                "POST",
                "/kyc/{customer_id}",
                f"/kyc/{cid}",
                None,
                409,
                _error(
                    409,
                    "kyc_already_passed",
                    f"customer {cid} has already passed KYC",
                    object_type="customer",
                    object_id=cid,
                ),
            )
        account_id = None
        request = {
            "customer_id": cid,
            "account_type": rng.choice(ACCOUNT_TYPES),
            "currency": rng.choice(CURRENCIES),
        }
        if customer["kyc_status"] == "passed":
            account_id = self._new_id("acct")
            account = {
                "id": account_id,
                **request,
                "balance": 0,
                "status": "open",
                "created_by": s["actor"],
                "created_at": self._stamp(),
            }
            customer["account_ids"] = [account_id]
            yield self._call(s, "POST", "/accounts", "/accounts", request, 201, account)
            yield self._call(
                s, "GET", "/accounts/{account_id}", f"/accounts/{account_id}", None, 200, account
            )
        elif rng.random() < 0.5:
            yield self._call(
                s,
                "POST",
                "/accounts",
                "/accounts",
                request,
                409,
                _error(
                    409,
                    "kyc_required",
                    f"customer {cid} has not passed KYC",
                    object_type="customer",
                    object_id=cid,
                    kyc_status=customer["kyc_status"],
                ),
            )
        amount = rng.choice((5_000, 12_000, 25_000, 40_000, 80_000, 150_000))
        request = {
            "customer_id": cid,
            "account_id": account_id,
            "amount": amount,
            "term_months": rng.choice((12, 24, 36, 60, 120, 240)),
            "purpose": rng.choice(LOAN_PURPOSES),
        }
        if rng.random() < 0.05:  # an amount out of range first
            yield self._call(
                s,
                "POST",
                "/loans",
                "/loans",
                {**request, "amount": 999_999},
                422,
                _error(
                    422,
                    "validation_failed",
                    "the request has invalid fields",
                    fields=[{"field": "amount", "problem": "must be at most 500000"}],
                ),
            )
        stamp = self._stamp()
        loan = {
            "id": self._new_id("loan"),
            **request,
            "status": "draft",
            "decision_reason": None,
            "created_by": s["actor"],
            "created_at": stamp,
            "updated_at": stamp,
        }
        lid = loan["id"]
        yield self._call(s, "POST", "/loans", "/loans", request, 201, dict(loan))
        yield self._call(s, "GET", "/loans/{loan_id}", f"/loans/{lid}", None, 200, dict(loan))
        self.recent_loans.append(loan)
        route = "/loans/{loan_id}/submit"
        if customer["kyc_status"] != "passed":
            yield self._call(
                s,
                "POST",
                route,
                f"/loans/{lid}/submit",
                None,
                409,
                _error(
                    409,
                    "kyc_required",
                    f"customer {cid} has not passed KYC",
                    object_type="loan_application",
                    object_id=lid,
                    kyc_status=customer["kyc_status"],
                ),
            )
            return
        yield from self._move(s, loan, "submit", "submitted")
        if rng.random() < 0.05:
            yield from self._move(s, loan, "withdraw", "withdrawn")
        else:
            self.review.append(loan)

    def _move(self, s: dict, loan: dict, action: str, target: str, body=None) -> Iterator[dict]:
        loan["status"], loan["updated_at"] = target, self._stamp()
        if body:
            loan["decision_reason"] = body.get("reason")
        yield self._call(
            s,
            "POST",
            f"/loans/{{loan_id}}/{action}",
            f"/loans/{loan['id']}/{action}",
            body,
            200,
            dict(loan),
        )

    def _refuse(self, s: dict, loan: dict, action: str, allowed: list[str]) -> dict:
        lid = loan["id"]
        return self._call(
            s,
            "POST",
            f"/loans/{{loan_id}}/{action}",
            f"/loans/{lid}/{action}",
            None,
            409,
            _error(
                409,
                "invalid_transition",
                f"cannot {action} a loan application in status {loan['status']}",
                object_type="loan_application",
                object_id=lid,
                status=loan["status"],
                action=action,
                allowed_from=allowed,
            ),
        )

    def _reviewing(self, s: dict) -> Iterator[dict]:
        """A reviewer works through submitted applications."""
        rng = self.rng
        for _ in range(rng.randint(2, 6)):
            if not self.review:
                return
            loan = self.review.popleft()
            lid = loan["id"]
            yield self._call(s, "GET", "/loans/{loan_id}", f"/loans/{lid}", None, 200, dict(loan))
            yield from self._move(s, loan, "review", "under_review")
            if rng.random() < 0.2:
                yield from self._move(
                    s, loan, "reject", "rejected", {"reason": "income does not cover the rate"}
                )
            elif loan["amount"] > REVIEWER_APPROVAL_LIMIT:
                yield self._call(
                    s,
                    "POST",
                    "/loans/{loan_id}/approve",
                    f"/loans/{lid}/approve",
                    None,
                    403,
                    _error(
                        403,
                        "approval_limit_exceeded",
                        f"loans above {REVIEWER_APPROVAL_LIMIT} need a manager",
                        object_type="loan_application",
                        object_id=lid,
                        amount=loan["amount"],
                        limit=REVIEWER_APPROVAL_LIMIT,
                    ),
                )
                self.manager.append(loan)
            else:
                yield from self._move(s, loan, "approve", "approved")
                if rng.random() < 0.05:  # a double click
                    yield self._refuse(s, loan, "approve", ["under_review"])

    def _deciding(self, s: dict) -> Iterator[dict]:
        """A manager decides the large loans."""
        for _ in range(self.rng.randint(1, 4)):
            if not self.manager:
                return
            loan = self.manager.popleft()
            lid = loan["id"]
            yield self._call(s, "GET", "/loans/{loan_id}", f"/loans/{lid}", None, 200, dict(loan))
            if self.rng.random() < 0.3:
                yield from self._move(s, loan, "reject", "rejected", {"reason": "too much risk"})
            else:
                yield from self._move(s, loan, "approve", "approved")

    def _servicing(self, s: dict) -> Iterator[dict]:
        """Look-ups of existing records (any role); an operator now and then tries what
        only a reviewer may do."""
        rng = self.rng
        for _ in range(rng.randint(2, 8)):
            roll = rng.random()
            if roll < 0.4 and self.recent_loans:
                loan = rng.choice(self.recent_loans)
                path = f"/loans/{loan['id']}"
                yield self._call(s, "GET", "/loans/{loan_id}", path, None, 200, dict(loan))
                if s["role"] == "operator" and rng.random() < 0.05:
                    yield self._call(
                        s,
                        "POST",
                        "/loans/{loan_id}/approve",
                        f"{path}/approve",
                        None,
                        403,
                        self._forbidden(s, "approve_loan"),
                    )
            elif roll < 0.75 and self.recent_customers:
                customer = rng.choice(self.recent_customers)
                path = f"/customers/{customer['id']}"
                yield self._call(
                    s, "GET", "/customers/{customer_id}", path, None, 200, dict(customer)
                )
            elif roll < 0.95:
                status = rng.choice(("submitted", "under_review", "approved"))
                some = [dict(loan) for loan in list(self.recent_loans)[-3:]]
                yield self._call(
                    s,
                    "GET",
                    "/loans",
                    f"/loans?status={status}",
                    None,
                    200,
                    {"loans": some, "count": len(some)},
                )
            else:
                yield self._call(
                    s,
                    "GET",
                    "/customers/{customer_id}",
                    "/customers/cust-0",
                    None,
                    404,
                    _error(
                        404,
                        "not_found",
                        "no customer cust-0",
                        object_type="customer",
                        object_id="cust-0",
                    ),
                )

    def _session(self) -> Iterator[dict]:
        self.sessions += 1
        roll = self.rng.random()
        if roll < 0.20:
            role, work = self.rng.choice(("operator", "operator", "manager")), self._onboarding
        elif roll < 0.30:
            role, work = "reviewer", self._reviewing
        elif roll < 0.33:
            role, work = "manager", self._deciding
        else:
            role = self.rng.choice(("operator", "reviewer", "auditor"))
            work = self._servicing
        s = {"id": f"sess-{self.sessions:07d}", "actor": self.rng.choice(self.staff[role])}
        s["role"] = role
        return work(s)

    def calls(self, n: int) -> Iterator[dict]:
        """The first ``n`` calls, sessions interleaved (a session cut off at ``n`` ends)."""
        open_sessions = [self._session() for _ in range(CONCURRENT)]
        made = 0
        while made < n:
            i = self.rng.randrange(CONCURRENT)
            call = next(open_sessions[i], None)
            if call is None:
                open_sessions[i] = self._session()
                continue
            made += 1
            yield call

    def stats(self, calls: int) -> dict[str, int]:
        """Sessions and operations among the calls made (a session that was opened but had
        not called yet when the log ended is not counted)."""
        return {
            "records": calls,
            "objects": sum(self.counters.values()),
            "operations": len(self.operations),
            "counters": dict(self.counters),  # objects created, per id prefix
        }


# ---- the two formats --------------------------------------------------------------------
def flat_line(call: dict) -> str:
    row = {**call, "time": _iso(call["time"])}
    return json.dumps(row, separators=(",", ":")) + "\n"


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def span(call: dict, rng: random.Random) -> dict[str, Any]:
    """The SERVER span the back office's tracing middleware records for one call."""
    start = int(call["time"] * 1e9)
    request = "" if call["request"] is None else json.dumps(call["request"])
    response = json.dumps(call["response"])
    path, _, query = call["path"].partition("?")
    attributes = [
        _attr("http.request.method", call["method"]),
        _attr("url.path", path),
        _attr("url.scheme", "http"),
        _attr("http.response.status_code", call["status"]),
        _attr("network.protocol.version", "1.1"),
        _attr("server.address", "backoffice.internal"),
        _attr("server.port", 8000),
        _attr("http.request.body.size", len(request)),
        _attr("http.route", call["route"]),
    ]
    if query:
        attributes.append(_attr("url.query", query))
    attributes += [
        _attr("backoffice.session", call["session"]),
        _attr("backoffice.actor", call["actor"]),
        _attr("backoffice.role", call["role"]),
        _attr("session.id", call["session"]),
        _attr("enduser.id", call["actor"]),
        _attr("enduser.role", call["role"]),
        _attr("backoffice.request.body", request),
        _attr("backoffice.request.body.truncated", False),
        _attr("backoffice.response.body", response),
        _attr("backoffice.response.body.truncated", False),
        _attr("http.response.body.size", len(response)),
    ]
    if call["status"] >= 400:
        attributes.append(_attr("backoffice.error.code", call["response"]["error"]["code"]))
    return {
        "traceId": f"{rng.getrandbits(128):032x}",
        "spanId": f"{rng.getrandbits(64):016x}",
        "flags": 1,
        "name": f"{call['method']} {call['route']}",
        "kind": 2,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + int(call["duration_ms"] * 1e6)),
        "attributes": attributes,
        "status": {},
    }


def otlp_line(spans: list[dict[str, Any]]) -> str:
    """One ExportTraceServiceRequest, as the Collector's file exporter writes a batch."""
    resource = [
        _attr("service.name", "simgym-backoffice"),
        _attr("service.version", "1.0.0"),
        _attr("service.namespace", "simgym"),
        _attr("telemetry.sdk.language", "python"),
        _attr("telemetry.sdk.name", "opentelemetry"),
    ]
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": resource},
                "scopeSpans": [{"scope": {"name": "simgym.real.backoffice"}, "spans": spans}],
            }
        ]
    }
    return json.dumps(request, separators=(",", ":")) + "\n"


def write_log(path: Path, fmt: str, records: int, seed: int = 0) -> dict[str, int]:
    """Write ``records`` calls of the back office to ``path`` in ``fmt`` ("jsonl" or
    "otlp"), streamed; returns what the generator made (records, sessions, objects,
    operations). The same seed and size give the same calls in both formats."""
    office = BackOffice(seed)
    rng = random.Random(seed + 1)
    sessions: set[str] = set()  # the benchmark's own bookkeeping, for the expected count
    batch: list[dict[str, Any]] = []
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        for call in office.calls(records):
            sessions.add(call["session"])
            written += 1
            if fmt == "jsonl":
                f.write(flat_line(call))
            else:
                batch.append(span(call, rng))
                if len(batch) >= SPANS_PER_LINE:
                    f.write(otlp_line(batch))
                    batch = []
        if batch:
            f.write(otlp_line(batch))
    return {**office.stats(written), "sessions": len(sessions), "bytes": path.stat().st_size}


# ---- one import, in a process of its own ------------------------------------------------
def import_once(log: Path, out: Path) -> dict[str, Any]:
    """Import ``log`` into a world at ``out`` as the CLI does; wall time and peak RSS of
    this process (run it in a fresh one)."""
    from simgym.logs import ImportReport, build_world, read_logs

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = ImportReport()
    start = time.perf_counter()
    manifest = build_world(read_logs([log], report), out, report=report)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,  # the process's, start-up included
        "base_kib": base,
        "peak_kib": usage.ru_maxrss,  # KiB on Linux
        "counts": manifest["counts"],
    }


def run_child(log: Path, out: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, __file__, "--child", str(log), str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the log")
    parser.add_argument(
        "--small", type=int, default=None, help="a second, smaller size (default a tenth; 0: none)"
    )
    parser.add_argument("--formats", default="jsonl,otlp", help="jsonl, otlp or both")
    parser.add_argument("--dir", type=Path, default=None, help="keep the logs and worlds here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(import_once(*args.child)))
        return

    from rich.console import Console
    from rich.table import Table

    small = args.records // 10 if args.small is None else args.small
    sizes = sorted({n for n in (small, args.records) if n > 0})
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    console = Console(width=max(Console().width, 130))
    work = Path(tempfile.mkdtemp(prefix="logbench-")) if args.dir is None else args.dir
    work.mkdir(parents=True, exist_ok=True)
    table = Table(title=f"simgym logs import, read_logs + build_world ({os.cpu_count()} CPUs)")
    headers = ("format", "records", "MB", "wall s", "cpu s", "rec/s", "peak MiB", "base MiB")
    headers += ("sessions (exp.)", "ops (exp.)", "objects", "entities")
    for column in headers:
        table.add_column(column, justify="left" if column == "format" else "right")
    try:
        for fmt in formats:
            for n in sizes:
                log = work / f"backoffice-{n}.{fmt}.jsonl"
                start = time.perf_counter()
                made = write_log(log, fmt, n, args.seed)
                console.print(
                    f"wrote {log.name}: {made['bytes'] / 1e6:.0f} MB, {made['sessions']} "
                    f"sessions, {made['objects']} objects in {time.perf_counter() - start:.0f} s"
                )
                got = run_child(log, work / f"world-{n}-{fmt}")
                counts = got["counts"]
                console.print(
                    f"imported in {got['wall_s']:.0f} s, peak {got['peak_kib'] / 1024:.0f} MiB"
                )
                table.add_row(
                    fmt,
                    f"{counts['records']:,}",
                    f"{made['bytes'] / 1e6:,.0f}",
                    f"{got['wall_s']:.1f}",
                    f"{got['cpu_s']:.1f}",
                    f"{counts['records'] / got['wall_s']:,.0f}",
                    f"{got['peak_kib'] / 1024:.0f}",
                    f"{got['base_kib'] / 1024:.0f}",
                    f"{counts['sessions']:,} ({made['sessions']:,})",
                    f"{counts['operations']} ({made['operations']})",
                    f"{made['objects']:,}",
                    f"{counts['entities']:,}",
                )
                if args.dir is None:
                    log.unlink()
                    shutil.rmtree(work / f"world-{n}-{fmt}", ignore_errors=True)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    console.print(table)


if __name__ == "__main__":
    main()
