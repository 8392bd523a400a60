"""Play randomized back-office sessions against the real service and keep every log.

:func:`run_sessions` serves the app with uvicorn on a free loopback port (in a thread),
plays ``n`` sessions over HTTP with httpx, and writes to ``out_dir``:

- ``traces.otlp.jsonl``: the service's spans, OTLP/JSON, one export request per line;
- ``ocel.json`` and ``ocel.sqlite``: the OCEL 2.0 log of the run (see :mod:`.ocel`);
- ``sessions.jsonl``: the client's side, one JSON object per request with the keys
  ``session``, ``seq`` (order within the session), ``time`` (ISO 8601, UTC), ``actor``,
  ``role``, ``operation`` (the endpoint's name, or ``unknown``), ``method``, ``route``
  (the template, e.g. ``/loans/{loan_id}/approve``), ``path``, ``request`` (the JSON body,
  a string when the body was not JSON, or null), ``status`` and ``response`` (the JSON
  answer);
- ``client.har``: the same requests and answers as a HAR 1.2 archive, one page per
  session (see :mod:`.har`);
- ``events.xes``: the OCEL log flattened to XES, one trace per session (see :mod:`.xes`);
- ``backoffice.db``: the service's own SQLite database.

Sessions follow a business case each (onboarding, a loan approved, rejected, withdrawn or
escalated to a manager, permission mistakes, life-cycle mistakes, malformed requests,
audits, retried requests), with the exceptions real operators produce. Given the seed the
requests and answers are the same on every run; only times and trace ids differ.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from simgym.real.backoffice.app import create_app
from simgym.real.backoffice.har import HarWriter
from simgym.real.backoffice.ocel import build_ocel, write_ocel_json, write_ocel_sqlite
from simgym.real.backoffice.store import (
    REQUIRED_DOCUMENTS,
    SANCTIONED_COUNTRIES,
    Bank,
)
from simgym.real.backoffice.telemetry import tracer_provider
from simgym.real.backoffice.xes import write_xes

ACTORS = {
    "operator": ("alice", "bob", "carol"),
    "reviewer": ("rita", "raj"),
    "manager": ("maya", "marc"),
    "auditor": ("aaron",),
}
FIRST = (
    "Anna",
    "Ben",
    "Chloe",
    "David",
    "Elif",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Luca",
    "Mara",
    "Nils",
    "Olga",
    "Pavel",
)
LAST = (
    "Adler",
    "Berg",
    "Costa",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Horvat",
    "Ivanova",
    "Jansen",
    "Kowalski",
    "Lindqvist",
)
COUNTRIES = ("DE", "FR", "NL", "ES", "IT", "AT", "PL", "SE")
SCENARIOS = {  # name -> weight
    "onboarding": 2,
    "loan_approved": 3,
    "loan_rejected": 2,
    "loan_withdrawn": 1,
    "loan_escalated": 2,
    "permission_errors": 1,
    "invalid_transitions": 1,
    "bad_requests": 1,
    "audit_review": 1,
    "retried_requests": 1,
    "loan_disbursed": 3,
    "self_approval": 1,
}


class _Server:
    """uvicorn in a thread, on a loopback socket bound to a free port."""

    def __init__(self, app) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # accepted connections inherit it: answers sent in two writes are not held back
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self.sock]},
            daemon=True,
            name="backoffice-uvicorn",
        )

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the back-office server did not start")
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


class Session:
    """One working session: requests share an X-Session id and are logged in order (and
    kept in ``har`` when given)."""

    def __init__(
        self,
        client: httpx.Client,
        sid: str,
        rng: random.Random,
        log,
        har: HarWriter | None = None,
    ) -> None:
        self.client, self.sid, self.rng, self.log = client, sid, rng, log
        self.har = har
        self.seq = 0

    def who(self, role: str) -> tuple[str, str]:
        return self.rng.choice(ACTORS[role]), role

    def call(
        self,
        as_: tuple[str, str] | None,
        operation: str,
        method: str,
        route: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict | None = None,
        **params: str,
    ) -> tuple[int, Any]:
        path = route.format(**params)
        sent: dict[str, str] = {"X-Session": self.sid, **(headers or {})}
        actor, role = as_ if as_ else ("", "")
        if as_:
            sent.update({"X-Actor": actor, "X-Role": role})
        content = (
            raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        )
        if content is not None:
            sent["Content-Type"] = "application/json"
        stamp = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        response = self.client.request(method, path, content=content, headers=sent)
        if self.har is not None:
            self.har.add(response, stamp, self.sid)
        try:
            answer = response.json()
        except ValueError:
            answer = response.text
        if raw is not None:
            try:
                request = json.loads(raw)
            except ValueError:
                request = raw[:1000].decode("utf-8", errors="replace")
        else:
            request = body
        self.seq += 1
        self.log(
            {
                "session": self.sid,
                "seq": self.seq,
                "time": stamp,
                "actor": actor,
                "role": role,
                "operation": operation,
                "method": method,
                "route": route,
                "path": path,
                "request": request,
                "status": response.status_code,
                "response": answer,
            }
        )
        return response.status_code, answer

    # ---- building blocks -------------------------------------------------------------
    def new_customer(self, *, sanctioned: bool = False, documents: list[str] | None = None):
        rng = self.rng
        first, last = rng.choice(FIRST), rng.choice(LAST)
        if documents is None:
            documents = rng.choices(
                [
                    list(REQUIRED_DOCUMENTS),
                    ["id_card"],
                    [],
                    ["passport", "id_card", "proof_of_address"],
                ],
                weights=[6, 2, 1, 1],
            )[0]
        body = {
            "name": f"{first} {last}",
            "email": f"{first}.{last}{rng.randint(1, 99)}@example.com".lower(),
            "date_of_birth": f"{rng.randint(1950, 2000)}-{rng.randint(1, 12):02d}-"
            f"{rng.randint(1, 28):02d}",
            "country": rng.choice(SANCTIONED_COUNTRIES if sanctioned else COUNTRIES),
            "documents": documents,
        }
        operator = self.who("operator")
        if rng.random() < 0.15:  # a typo first: the form is sent again, corrected
            broken = dict(body)
            if rng.random() < 0.5:
                broken.pop("email")
            else:
                broken["date_of_birth"] = "31/02/1990"
            self.call(operator, "create_customer", "POST", "/customers", broken)
        status, answer = self.call(operator, "create_customer", "POST", "/customers", body)
        if status == 201 and rng.random() < 0.12:
            # the same person entered again by a colleague, with another e-mail: refused
            again = {**body, "email": f"{first}.{last}.{rng.randint(100, 999)}@example.org"}
            self.call(self.who("operator"), "create_customer", "POST", "/customers", again)
        return answer["id"] if status == 201 else None

    def onboard(self, *, sanctioned: bool = False, documents: list[str] | None = None):
        """A customer through KYC (documents chased when missing) and an account."""
        rng = self.rng
        cid = self.new_customer(sanctioned=sanctioned, documents=documents)
        if cid is None:
            return None, None
        operator = self.who("operator")
        if rng.random() < 0.1:  # impatient: the account before KYC
            self.call(
                operator,
                "open_account",
                "POST",
                "/accounts",
                {"customer_id": cid, "account_type": "checking"},
            )
        _, check = self.call(operator, "run_kyc", "POST", "/kyc/{customer_id}", customer_id=cid)
        if check.get("reason") == "missing_documents" and rng.random() < 0.85:
            self.call(
                operator,
                "add_documents",
                "POST",
                "/customers/{customer_id}/documents",
                {"documents": check["missing_documents"]},
                customer_id=cid,
            )
            _, check = self.call(
                self.who(rng.choice(["operator", "reviewer"])),
                "run_kyc",
                "POST",
                "/kyc/{customer_id}",
                customer_id=cid,
            )
        if check.get("result") != "passed":
            return cid, None
        opening = {
            "customer_id": cid,
            "account_type": rng.choice(["checking", "savings"]),
            "currency": rng.choice(["EUR", "EUR", "USD", "GBP"]),
        }
        if rng.random() < 0.5:
            opening["opening_deposit"] = rng.choice([100, 500, 2_500])
        status, account = self.call(operator, "open_account", "POST", "/accounts", opening)
        return cid, account["id"] if status == 201 else None

    def new_loan(
        self, cid: str, aid: str | None, amount: int | None = None, *, role: str = "operator"
    ):
        rng = self.rng
        operator = self.who(role)
        body = {
            "customer_id": cid,
            "amount": amount or rng.choice([5_000, 12_000, 25_000, 40_000, 48_000]),
            "term_months": rng.choice([12, 24, 36, 60, 120]),
            "purpose": rng.choice(["home", "car", "education", "business", "personal"]),
        }
        if aid:
            body["account_id"] = aid
        if rng.random() < 0.15:  # out of range, then fixed
            self.call(
                operator,
                "create_loan",
                "POST",
                "/loans",
                {**body, "amount": rng.choice([0, -500, 900_000, "10k"])},
            )
        status, loan = self.call(operator, "create_loan", "POST", "/loans", body)
        return (loan["id"], operator) if status == 201 else (None, operator)

    def move(self, as_, action: str, lid: str, body: Any = None) -> tuple[int, Any]:
        return self.call(
            as_, f"{action}_loan", "POST", f"/loans/{{loan_id}}/{action}", body, loan_id=lid
        )

    def to_review(self, lid: str, operator) -> bool:
        status, _ = self.move(operator, "submit", lid)
        if status != 200:
            return False
        if self.rng.random() < 0.2:  # the operator tries to pick it up: not their job
            self.move(operator, "review", lid)
        status, _ = self.move(self.who("reviewer"), "review", lid)
        return status == 200

    def look(self, lid: str) -> None:
        self.call(
            self.who(self.rng.choice(list(ACTORS))),
            "get_loan",
            "GET",
            "/loans/{loan_id}",
            loan_id=lid,
        )


# ---- scenarios -------------------------------------------------------------------------
def _onboarding(s: Session) -> None:
    cid, aid = s.onboard(sanctioned=s.rng.random() < 0.15)
    if cid:
        s.call(
            s.who("operator"), "get_customer", "GET", "/customers/{customer_id}", customer_id=cid
        )
    if aid:
        s.call(s.who("manager"), "get_account", "GET", "/accounts/{account_id}", account_id=aid)


def _loan_decided(s: Session, approve: bool) -> None:
    cid, aid = s.onboard(sanctioned=s.rng.random() < 0.1)
    if cid is None:
        return
    lid, operator = s.new_loan(cid, aid)
    if lid is None:
        return
    if not s.to_review(lid, operator):  # KYC never passed: submit refused
        s.move(operator, "withdraw", lid)
        return
    if approve:
        s.move(s.who(s.rng.choice(["reviewer", "manager"])), "approve", lid)
    else:
        decider = s.who(s.rng.choice(["reviewer", "manager"]))
        if s.rng.random() < 0.3:  # the reason is mandatory
            s.move(decider, "reject", lid, {})
        s.move(
            decider,
            "reject",
            lid,
            {
                "reason": s.rng.choice(
                    ["insufficient income", "high debt ratio", "incomplete employment history"]
                )
            },
        )
    s.look(lid)


def _loan_withdrawn(s: Session) -> None:
    cid, aid = s.onboard(documents=list(REQUIRED_DOCUMENTS))
    lid, operator = s.new_loan(cid, aid) if cid else (None, None)
    if lid is None:
        return
    if s.rng.random() < 0.5:
        s.move(operator, "submit", lid)
    s.move(operator, "withdraw", lid, {"reason": "customer changed their mind"})
    s.move(operator, "submit", lid)  # too late: withdrawn is final


def _loan_escalated(s: Session) -> None:
    cid, aid = s.onboard(documents=list(REQUIRED_DOCUMENTS))
    amount = s.rng.choice([60_000, 120_000, 250_000])
    lid, operator = s.new_loan(cid, aid, amount) if cid else (None, None)
    if lid is None or not s.to_review(lid, operator):
        return
    s.move(s.who("reviewer"), "approve", lid)  # above the reviewer's limit: 403
    manager = s.who("manager")
    if s.rng.random() < 0.7:
        status, _ = s.move(manager, "approve", lid)  # above the manager's too: 403
        if status == 403:
            s.move(manager, "reject", lid, {"reason": "above every approval limit"})
    else:
        s.move(manager, "reject", lid, {"reason": "exposure too high"})
    s.look(lid)


def _permission_errors(s: Session) -> None:
    cid, aid = s.onboard(documents=list(REQUIRED_DOCUMENTS))
    auditor = s.who("auditor")
    s.call(
        auditor,
        "create_customer",
        "POST",
        "/customers",
        {
            "name": "Audit Probe",
            "email": "probe@example.com",
            "date_of_birth": "1970-01-01",
            "country": "DE",
        },
    )
    s.call(s.who("operator"), "get_audit", "GET", "/audit")
    s.call(
        ("intern", "trainee"),
        "get_customer",
        "GET",
        "/customers/{customer_id}",
        customer_id=cid or "cust-0",
    )
    if cid:
        lid, operator = s.new_loan(cid, aid)
        if lid:
            s.move(s.who("reviewer"), "submit", lid)  # reviewers do not submit
            s.move(operator, "submit", lid)
            s.move(operator, "review", lid)
            s.move(auditor, "approve", lid)


def _invalid_transitions(s: Session) -> None:
    cid, aid = s.onboard(documents=list(REQUIRED_DOCUMENTS))
    lid, operator = s.new_loan(cid, aid) if cid else (None, None)
    if lid is None:
        return
    s.move(s.who("manager"), "approve", lid)  # still a draft
    s.move(operator, "submit", lid)
    s.move(operator, "submit", lid)  # double click
    s.move(s.who("reviewer"), "review", lid)
    s.move(s.who("manager"), "approve", lid)
    s.move(operator, "withdraw", lid)  # approved is final
    s.move(s.who("reviewer"), "reject", lid, {"reason": "second thoughts"})
    s.move(operator, "submit", "loan-999999")  # no such loan


def _bad_requests(s: Session) -> None:
    operator = s.who("operator")
    s.call(operator, "create_customer", "POST", "/customers", raw=b'{"name": "Broken", ')
    s.call(operator, "create_loan", "POST", "/loans", raw=b"[1, 2, 3]")
    s.call(operator, "unknown", "GET", "/customers")  # listing customers is not offered
    s.call(operator, "unknown", "POST", "/loans/loan-1/escalate")
    s.call(operator, "unknown", "GET", "/nowhere")
    s.call(
        operator,
        "create_customer",
        "POST",
        "/customers",
        raw=json.dumps({"name": "x" * 70_000}).encode(),
    )
    s.call(None, "create_loan", "POST", "/loans", {"customer_id": "cust-1"})
    s.call(operator, "list_loans", "GET", "/loans?status=lost")
    s.call(s.who("auditor"), "get_audit", "GET", "/audit?limit=0")
    s.call(operator, "get_loan", "GET", "/loans/{loan_id}", loan_id="loan-424242")
    _onboarding(s)


def _audit_review(s: Session) -> None:
    auditor = s.who(s.rng.choice(["auditor", "manager"]))
    since = 0
    for _ in range(s.rng.randint(1, 3)):
        status, page = s.call(auditor, "get_audit", "GET", f"/audit?since={since}&limit=50")
        if status != 200 or not page["entries"]:
            break
        since = page["next"]
    s.call(auditor, "list_loans", "GET", "/loans?status=under_review")


def _retried_requests(s: Session) -> None:
    cid, aid = s.onboard(documents=list(REQUIRED_DOCUMENTS))
    if cid is None:
        return
    operator = s.who("operator")
    key = {"Idempotency-Key": f"{s.sid}-loan"}
    body = {"customer_id": cid, "amount": 15_000, "term_months": 36, "purpose": "car"}
    _, first = s.call(operator, "create_loan", "POST", "/loans", body, headers=key)
    _, again = s.call(operator, "create_loan", "POST", "/loans", body, headers=key)  # timeout
    lid = first.get("id")
    if lid and again.get("id") == lid and s.to_review(lid, operator):
        s.move(s.who("reviewer"), "approve", lid)
        s.move(s.who("reviewer"), "approve", lid)  # retried after a lost answer: 409


def _loan_disbursed(s: Session) -> None:
    """An approved loan paid out, with the mistakes a payout desk makes: the approver
    paying it themselves, another customer's account, a mistyped amount, paying twice."""
    rng = s.rng
    cid, aid = s.onboard(documents=list(REQUIRED_DOCUMENTS))
    if cid is None or aid is None:
        return
    lid, operator = s.new_loan(cid, aid)
    if lid is None or not s.to_review(lid, operator):
        return
    approver = s.who(rng.choice(["reviewer", "manager", "manager"]))
    status, loan = s.move(approver, "approve", lid)
    if status != 200:
        return
    amount = loan["amount"]
    if approver[1] == "manager" and rng.random() < 0.5:  # the approver pays it: refused
        s.move(approver, "disburse", lid, {"account_id": aid, "amount": amount})
    if rng.random() < 0.3:  # another customer's account
        _, other = s.onboard(documents=list(REQUIRED_DOCUMENTS))
        if other:
            s.move(operator, "disburse", lid, {"account_id": other, "amount": amount})
    if rng.random() < 0.3:  # a mistyped amount
        wrong = amount + rng.choice([-1_000, 100, 10_000])
        s.move(operator, "disburse", lid, {"account_id": aid, "amount": wrong})
    payer = s.who("operator")
    if rng.random() < 0.4:  # a manager who did not approve it may pay it out
        payer = (next(m for m in ACTORS["manager"] if m != approver[0]), "manager")
    s.move(payer, "disburse", lid, {"account_id": aid, "amount": amount})
    s.call(s.who("manager"), "get_account", "GET", "/accounts/{account_id}", account_id=aid)
    if rng.random() < 0.3:  # paid twice: a disbursed loan is final
        s.move(payer, "disburse", lid, {"account_id": aid, "amount": amount})


def _self_approval(s: Session) -> None:
    """A manager opens a loan and then tries to approve it: four eyes refuse it."""
    cid, aid = s.onboard(documents=list(REQUIRED_DOCUMENTS))
    if cid is None:
        return
    lid, manager = s.new_loan(cid, aid, role="manager")
    if lid is None or not s.to_review(lid, manager):
        return
    s.move(manager, "approve", lid)
    other = next(a for a in ACTORS["manager"] if a != manager[0])
    s.move((other, "manager"), "approve", lid)
    s.look(lid)


PLAYS = {
    "onboarding": _onboarding,
    "loan_approved": lambda s: _loan_decided(s, True),
    "loan_rejected": lambda s: _loan_decided(s, False),
    "loan_withdrawn": _loan_withdrawn,
    "loan_escalated": _loan_escalated,
    "permission_errors": _permission_errors,
    "invalid_transitions": _invalid_transitions,
    "bad_requests": _bad_requests,
    "audit_review": _audit_review,
    "retried_requests": _retried_requests,
    "loan_disbursed": _loan_disbursed,
    "self_approval": _self_approval,
}


def run_sessions(n: int, seed: int, out_dir: str | Path) -> dict[str, Any]:
    """Play ``n`` sessions with ``seed``; write the logs to ``out_dir``; return a summary
    (paths, requests, status counts, scenario counts)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        name: out / name
        for name in (
            "traces.otlp.jsonl",
            "ocel.json",
            "ocel.sqlite",
            "sessions.jsonl",
            "client.har",
            "events.xes",
            "backoffice.db",
        )
    }
    for path in paths.values():
        path.unlink(missing_ok=True)
    provider = tracer_provider(paths["traces.otlp.jsonl"])
    bank = Bank(str(paths["backoffice.db"]))
    app = create_app(bank, tracer=provider)
    rng = random.Random(seed)
    statuses: Counter[int] = Counter()
    played: Counter[str] = Counter()
    lines = 0
    try:
        with (
            _Server(app) as base_url,
            httpx.Client(
                base_url=base_url,
                timeout=30,
                # headers and body go out in two writes: without NODELAY each request
                # waits for a delayed ACK (about 40 ms)
                transport=httpx.HTTPTransport(
                    socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
                ),
            ) as client,
            open(paths["sessions.jsonl"], "w", encoding="utf-8") as log_file,
            HarWriter(paths["client.har"]) as har,
        ):

            def log(row: dict[str, Any]) -> None:
                nonlocal lines
                statuses[row["status"]] += 1
                lines += 1
                log_file.write(json.dumps(row, ensure_ascii=False) + "\n")

            names, weights = list(SCENARIOS), list(SCENARIOS.values())
            for i in range(n):
                scenario = rng.choices(names, weights=weights)[0]
                session = Session(
                    client, f"s{seed}-{i:04d}", random.Random(rng.getrandbits(64)), log, har
                )
                PLAYS[scenario](session)
                played[scenario] += 1
    finally:
        provider.shutdown()
    ocel = build_ocel(bank)
    bank.close()
    write_ocel_json(ocel, paths["ocel.json"])
    write_ocel_sqlite(ocel, paths["ocel.sqlite"])
    write_xes(ocel, paths["events.xes"])
    return {
        "paths": {k: str(v) for k, v in paths.items()},
        "requests": lines,
        "statuses": dict(sorted(statuses.items())),
        "scenarios": dict(played),
        "events": len(ocel["events"]),
        "objects": len(ocel["objects"]),
    }
