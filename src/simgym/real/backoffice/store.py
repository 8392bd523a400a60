"""The bank's records and rules, on SQLite, with no web framework in sight.

Every operation checks, in this order: who is asking (401), whether the role may do it at
all (403), the fields (422), that the records exist (404), the life cycle (409) and the
limits that depend on the record (403). A refused or accepted state change is written to
the append-only audit log in the same transaction as the change itself.

Object ids are sequential per type (``cust-1``, ``acct-1``, ``kyc-1``, ``loan-1``), so a
run replayed with the same requests produces the same ids; only the times differ. Object
types are named as the API names its resources (``customer``, ``account``, ``kyc``,
``loan``), so the audit log, the OCEL export and the HTTP routes use one vocabulary.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

ROLES = ("operator", "reviewer", "manager", "auditor")

# operation -> roles allowed to attempt it
PERMISSIONS: dict[str, tuple[str, ...]] = {
    "create_customer": ("operator", "manager"),
    "add_documents": ("operator", "manager"),
    "run_kyc": ("operator", "reviewer", "manager"),
    "open_account": ("operator", "manager"),
    "create_loan": ("operator", "manager"),
    "submit_loan": ("operator", "manager"),
    "review_loan": ("reviewer",),
    "approve_loan": ("reviewer", "manager"),
    "reject_loan": ("reviewer", "manager"),
    "withdraw_loan": ("operator", "manager"),
    "disburse_loan": ("operator", "manager"),
    "get_customer": ROLES,
    "get_account": ROLES,
    "get_loan": ROLES,
    "list_loans": ROLES,
    "get_audit": ("auditor", "manager"),
}

# loan action -> (statuses it may start from, status it leads to)
TRANSITIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "submit": (("draft",), "submitted"),
    "review": (("submitted",), "under_review"),
    "approve": (("under_review",), "approved"),
    "reject": (("under_review",), "rejected"),
    "withdraw": (("draft", "submitted", "under_review"), "withdrawn"),
    "disburse": (("approved",), "disbursed"),
}
LOAN_STATUSES = (
    "draft",
    "submitted",
    "under_review",
    "approved",
    "rejected",
    "withdrawn",
    "disbursed",
)

# the largest loan each role may approve; the refusal states the bound
APPROVAL_LIMITS = {"reviewer": 50_000, "manager": 200_000}
REVIEWER_APPROVAL_LIMIT = APPROVAL_LIMITS["reviewer"]
LOAN_MIN, LOAN_MAX = 1_000, 500_000
TERM_MIN, TERM_MAX = 6, 360
REQUIRED_DOCUMENTS = ("id_card", "proof_of_address")
KNOWN_DOCUMENTS = (*REQUIRED_DOCUMENTS, "passport", "payslip", "bank_statement")
SANCTIONED_COUNTRIES = ("KP", "IR", "SY")
ACCOUNT_TYPES = ("checking", "savings")
CURRENCIES = ("EUR", "USD", "GBP", "CHF")
LOAN_PURPOSES = ("home", "car", "education", "business", "personal")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", re.IGNORECASE)
_COUNTRY = re.compile(r"^[A-Z]{2}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

SCHEMA = """
CREATE TABLE IF NOT EXISTS counter (kind TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS customer (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, date_of_birth TEXT NOT NULL,
    country TEXT NOT NULL, documents TEXT NOT NULL, kyc_status TEXT NOT NULL,
    created_by TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS account (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customer(id),
    account_type TEXT NOT NULL, currency TEXT NOT NULL, balance INTEGER NOT NULL,
    status TEXT NOT NULL, created_by TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kyc_check (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customer(id),
    result TEXT NOT NULL, reason TEXT, missing_documents TEXT NOT NULL,
    checked_by TEXT NOT NULL, checked_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS loan (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customer(id),
    account_id TEXT REFERENCES account(id), amount INTEGER NOT NULL,
    term_months INTEGER NOT NULL, purpose TEXT NOT NULL, status TEXT NOT NULL,
    decision_reason TEXT, created_by TEXT NOT NULL, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL);
-- one row per attribute value an object takes, with its time: OCEL's timed attributes
CREATE TABLE IF NOT EXISTS object_change (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, object_type TEXT NOT NULL,
    object_id TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS object_relation (
    source_id TEXT NOT NULL, target_id TEXT NOT NULL, qualifier TEXT NOT NULL,
    PRIMARY KEY (source_id, target_id, qualifier));
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, session TEXT,
    actor TEXT NOT NULL, role TEXT NOT NULL, operation TEXT NOT NULL,
    method TEXT, route TEXT, path TEXT,
    outcome TEXT NOT NULL, status INTEGER NOT NULL, object_type TEXT, object_id TEXT,
    objects TEXT NOT NULL, attributes TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY, operation TEXT NOT NULL, status INTEGER NOT NULL,
    body TEXT NOT NULL);
"""


class ApiError(Exception):
    """A refusal with an HTTP status and a stable JSON body."""

    def __init__(self, status: int, code: str, message: str, /, **details: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


@dataclass(frozen=True)
class Caller:
    """Who asks, in which working session, and through which HTTP call (method, route
    template, concrete path: the web layer fills them, the audit log keeps them)."""

    actor: str
    role: str
    session: str | None = None
    method: str | None = None
    route: str | None = None
    path: str | None = None


@dataclass
class _Fields:
    """Collects every problem of a request's fields before failing once, with all of them."""

    data: dict[str, Any]
    problems: list[dict[str, str]] = field(default_factory=list)

    def bad(self, name: str, problem: str) -> None:
        self.problems.append({"field": name, "problem": problem})

    def text(self, name: str, *, pattern: re.Pattern[str] | None = None, max_len: int = 200):
        value = self.data.get(name)
        if value is None:
            self.bad(name, "required")
        elif not isinstance(value, str) or not value.strip():
            self.bad(name, "must be a non-empty string")
        elif len(value) > max_len:
            self.bad(name, f"must be at most {max_len} characters")
        elif pattern is not None and not pattern.match(value):
            self.bad(name, "has an invalid format")
        else:
            return value.strip()
        return None

    def choice(self, name: str, options: tuple[str, ...], *, default: str | None = None):
        value = self.data.get(name, default)
        if value is None:
            self.bad(name, "required")
        elif value not in options:
            self.bad(name, f"must be one of {', '.join(options)}")
        else:
            return value
        return None

    def integer(self, name: str, low: int, high: int):
        value = self.data.get(name)
        if value is None:
            self.bad(name, "required")
        elif isinstance(value, bool) or not isinstance(value, int):
            self.bad(name, "must be an integer")
        elif not low <= value <= high:
            self.bad(name, f"must be between {low} and {high}")
        else:
            return value
        return None

    def documents(self, name: str, *, required: bool):
        value = self.data.get(name)
        if value is None:
            if required:
                self.bad(name, "required")
            return []
        if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
            self.bad(name, "must be a list of strings")
            return []
        unknown = [d for d in value if d not in KNOWN_DOCUMENTS]
        if unknown:
            self.bad(name, f"unknown document types: {', '.join(unknown)}")
            return []
        return value

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.allowed) if self.allowed else []
        for name in unknown:
            self.bad(name, "unknown field")
        if self.problems:
            raise ApiError(
                422, "validation_failed", "the request has invalid fields", fields=self.problems
            )

    allowed: frozenset[str] = frozenset()


def _fields(body: Any, *allowed: str) -> _Fields:
    if not isinstance(body, dict):
        raise ApiError(
            422,
            "validation_failed",
            "the request body must be a JSON object",
            fields=[{"field": "", "problem": "must be an object"}],
        )
    checker = _Fields(body)
    checker.allowed = frozenset(allowed)
    return checker


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Bank:
    """The bank on one SQLite database (a file, or ``":memory:"``).

    Safe to share between threads: one connection, one lock, one transaction per call.
    """

    def __init__(self, path: str = ":memory:") -> None:
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA foreign_keys = ON")
        if path != ":memory:":  # a commit per request: WAL keeps it from syncing each time
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.executescript(SCHEMA)
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- plumbing --------------------------------------------------------------------
    def _run(self, caller: Caller | None, operation: str, work, *args):
        """Check the caller, run ``work`` in one transaction, audit refusals by role or
        life cycle (403/409) too. Returns (status, body)."""
        who = self._authorize(caller, operation)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                status, body = work(who, *args)
            except ApiError as err:
                self._db.execute("ROLLBACK")
                if err.status in (403, 409):
                    self._db.execute("BEGIN IMMEDIATE")
                    kind, oid = err.details.get("object_type"), err.details.get("object_id")
                    # the refused object is related like an accepted event's: a process log
                    # then sees which status the refusal found it in
                    refused = [(oid, kind)] if oid and kind else []
                    self._audit(
                        who,
                        operation,
                        "refused",
                        err.status,
                        kind,
                        oid,
                        refused,
                        {"code": err.code},
                    )
                    self._db.execute("COMMIT")
                raise
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return status, body

    def _authorize(self, caller: Caller | None, operation: str) -> Caller:
        if caller is None or not caller.actor or not caller.role:
            raise ApiError(401, "unauthenticated", "X-Actor and X-Role headers are required")
        allowed = PERMISSIONS[operation]
        if caller.role not in allowed:
            # every refusal by role is audited, an unknown role's too: the caller is known
            code = "forbidden" if caller.role in ROLES else "unknown_role"
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                self._audit(caller, operation, "refused", 403, None, None, [], {"code": code})
                self._db.execute("COMMIT")
            if code == "unknown_role":
                raise ApiError(403, code, f"unknown role {caller.role!r}", roles=ROLES)
            raise ApiError(
                403,
                "forbidden",
                f"role {caller.role!r} may not {operation}",
                operation=operation,
                role=caller.role,
                allowed_roles=list(allowed),
            )
        return caller

    def _next_id(self, kind: str, prefix: str) -> str:
        self._db.execute(
            "INSERT INTO counter(kind, n) VALUES (?, 1) ON CONFLICT(kind) DO UPDATE SET n = n + 1",
            (kind,),
        )
        (n,) = self._db.execute("SELECT n FROM counter WHERE kind = ?", (kind,)).fetchone()
        return f"{prefix}-{n}"

    def _audit(
        self,
        caller: Caller,
        operation: str,
        outcome: str,
        status: int,
        object_type: str | None,
        object_id: str | None,
        objects: list[tuple[str, str]],
        attributes: dict[str, Any],
        time: str | None = None,
    ) -> None:
        self._db.execute(
            "INSERT INTO audit(time, session, actor, role, operation, method, route, path, "
            "outcome, status, object_type, object_id, objects, attributes) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                time or now(),
                caller.session,
                caller.actor,
                caller.role,
                operation,
                caller.method,
                caller.route,
                caller.path,
                outcome,
                status,
                object_type,
                object_id,
                json.dumps(objects),
                json.dumps(attributes),
            ),
        )

    def _changed(self, time: str, object_type: str, object_id: str, values: dict[str, Any]):
        self._db.executemany(
            "INSERT INTO object_change(time, object_type, object_id, field, value) "
            "VALUES (?,?,?,?,?)",
            [(time, object_type, object_id, k, json.dumps(v)) for k, v in values.items()],
        )

    def _relate(self, source: str, target: str, qualifier: str) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO object_relation VALUES (?,?,?)", (source, target, qualifier)
        )

    def _row(self, table: str, object_id: str, kind: str) -> sqlite3.Row:
        row = self._db.execute(f"SELECT * FROM {table} WHERE id = ?", (object_id,)).fetchone()
        if row is None:
            raise ApiError(
                404,
                "not_found",
                f"{kind} {object_id} does not exist",
                object_type=kind,
                object_id=object_id,
            )
        return row

    # ---- idempotent retries ----------------------------------------------------------
    def replay(self, key: str, operation: str) -> tuple[int, dict[str, Any]] | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM idempotency WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        if row["operation"] != operation:
            raise ApiError(
                409,
                "idempotency_key_reused",
                "this Idempotency-Key was used for another operation",
                first_operation=row["operation"],
            )
        return row["status"], json.loads(row["body"])

    def remember(self, key: str, operation: str, status: int, body: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO idempotency VALUES (?,?,?,?)",
                (key, operation, status, json.dumps(body)),
            )

    # ---- views -----------------------------------------------------------------------
    def _customer_view(self, row: sqlite3.Row) -> dict[str, Any]:
        out = dict(row)
        out["documents"] = json.loads(out["documents"])
        accounts = self._db.execute(
            "SELECT id FROM account WHERE customer_id = ? ORDER BY created_at, id", (row["id"],)
        )
        out["account_ids"] = [r["id"] for r in accounts]
        return out

    def _kyc_view(self, row: sqlite3.Row) -> dict[str, Any]:
        out = dict(row)
        out["missing_documents"] = json.loads(out["missing_documents"])
        return out

    # ---- customers -------------------------------------------------------------------
    def create_customer(self, caller: Caller, body: Any):
        return self._run(caller, "create_customer", self._create_customer, body)

    def _create_customer(self, who: Caller, body: Any):
        f = _fields(body, "name", "email", "date_of_birth", "country", "documents")
        name = f.text("name", max_len=120)
        email = f.text("email", pattern=_EMAIL)
        born = f.text("date_of_birth", pattern=_DATE)
        country = f.text("country", pattern=_COUNTRY)
        documents = f.documents("documents", required=False)
        if born and not f.problems:
            try:
                if datetime.strptime(born, "%Y-%m-%d").year > datetime.now(UTC).year - 18:
                    f.bad("date_of_birth", "the customer must be at least 18 years old")
            except ValueError:
                f.bad("date_of_birth", "is not a calendar date")
        f.done()
        twin = self._db.execute(
            "SELECT id FROM customer WHERE name = ? AND date_of_birth = ? AND country = ?",
            (name, born, country),
        ).fetchone()
        if twin is not None:
            # one person, one customer: the same name, birth date and country is the same
            # person, whatever e-mail address the form gives this time
            raise ApiError(
                409,
                "duplicate_customer",
                f"a customer named {name} born {born} in {country} already exists",
                existing_id=twin["id"],
            )
        t = now()
        cid = self._next_id("customer", "cust")
        docs = sorted(set(documents))
        self._db.execute(
            "INSERT INTO customer VALUES (?,?,?,?,?,?,?,?,?)",
            (cid, name, email, born, country, json.dumps(docs), "pending", who.actor, t),
        )
        self._changed(
            t,
            "customer",
            cid,
            {
                "name": name,
                "email": email,
                "country": country,
                "documents": docs,
                "kyc_status": "pending",
            },
        )
        self._audit(
            who,
            "create_customer",
            "ok",
            201,
            "customer",
            cid,
            [(cid, "customer")],
            {"country": country, "documents": len(docs)},
            t,
        )
        return 201, self._customer_view(self._row("customer", cid, "customer"))

    def get_customer(self, caller: Caller, customer_id: str):
        def work(_who):
            return 200, self._customer_view(self._row("customer", customer_id, "customer"))

        return self._run(caller, "get_customer", work)

    def add_documents(self, caller: Caller, customer_id: str, body: Any):
        def work(who):
            f = _fields(body, "documents")
            documents = f.documents("documents", required=True)
            if not f.problems and not documents:
                f.bad("documents", "must name at least one document")
            f.done()
            row = self._row("customer", customer_id, "customer")
            docs = sorted(set(json.loads(row["documents"])) | set(documents))
            t = now()
            self._db.execute(
                "UPDATE customer SET documents = ? WHERE id = ?", (json.dumps(docs), customer_id)
            )
            self._changed(t, "customer", customer_id, {"documents": docs})
            self._audit(
                who,
                "add_documents",
                "ok",
                200,
                "customer",
                customer_id,
                [(customer_id, "customer")],
                {"added": ",".join(sorted(documents))},
                t,
            )
            return 200, self._customer_view(self._row("customer", customer_id, "customer"))

        return self._run(caller, "add_documents", work)

    def run_kyc(self, caller: Caller, customer_id: str):
        def work(who):
            row = self._row("customer", customer_id, "customer")
            if row["kyc_status"] == "passed":
                raise ApiError(
                    409,
                    "kyc_already_passed",
                    f"customer {customer_id} has already passed KYC",
                    object_type="customer",
                    object_id=customer_id,
                )
            docs = set(json.loads(row["documents"]))
            missing = [d for d in REQUIRED_DOCUMENTS if d not in docs]
            if row["country"] in SANCTIONED_COUNTRIES:
                result, reason = "failed", "sanctioned_country"
            elif missing:
                result, reason = "failed", "missing_documents"
            else:
                result, reason = "passed", None
            t = now()
            kid = self._next_id("kyc_check", "kyc")
            self._db.execute(
                "INSERT INTO kyc_check VALUES (?,?,?,?,?,?,?)",
                (kid, customer_id, result, reason, json.dumps(missing), who.actor, t),
            )
            self._db.execute(
                "UPDATE customer SET kyc_status = ? WHERE id = ?", (result, customer_id)
            )
            self._changed(t, "kyc", kid, {"result": result, "reason": reason or ""})
            self._changed(t, "customer", customer_id, {"kyc_status": result})
            self._relate(kid, customer_id, "checks")
            self._audit(
                who,
                "run_kyc",
                "ok",
                201,
                "kyc",
                kid,
                [(kid, "check"), (customer_id, "subject")],
                {"result": result, "reason": reason or ""},
                t,
            )
            return 201, self._kyc_view(self._row("kyc_check", kid, "kyc"))

        return self._run(caller, "run_kyc", work)

    # ---- accounts --------------------------------------------------------------------
    def open_account(self, caller: Caller, body: Any):
        def work(who):
            f = _fields(body, "customer_id", "account_type", "currency", "opening_deposit")
            customer_id = f.text("customer_id", max_len=40)
            kind = f.choice("account_type", ACCOUNT_TYPES)
            currency = f.choice("currency", CURRENCIES, default="EUR")
            deposit = 0
            if f.data.get("opening_deposit") is not None:
                deposit = f.integer("opening_deposit", 0, 1_000_000)
            f.done()
            customer = self._row("customer", customer_id, "customer")
            if customer["kyc_status"] != "passed":
                raise ApiError(
                    409,
                    "kyc_required",
                    f"customer {customer_id} has not passed KYC",
                    object_type="customer",
                    object_id=customer_id,
                    kyc_status=customer["kyc_status"],
                )
            t = now()
            aid = self._next_id("account", "acct")
            self._db.execute(
                "INSERT INTO account VALUES (?,?,?,?,?,?,?,?)",
                (aid, customer_id, kind, currency, deposit, "open", who.actor, t),
            )
            self._changed(
                t,
                "account",
                aid,
                {"account_type": kind, "currency": currency, "status": "open", "balance": deposit},
            )
            self._relate(aid, customer_id, "owned_by")
            self._audit(
                who,
                "open_account",
                "ok",
                201,
                "account",
                aid,
                [(aid, "account"), (customer_id, "owner")],
                {"account_type": kind, "currency": currency, "opening_deposit": deposit},
                t,
            )
            return 201, dict(self._row("account", aid, "account"))

        return self._run(caller, "open_account", work)

    def get_account(self, caller: Caller, account_id: str):
        return self._run(
            caller,
            "get_account",
            lambda _who: (200, dict(self._row("account", account_id, "account"))),
        )

    # ---- loans -----------------------------------------------------------------------
    def create_loan(self, caller: Caller, body: Any):
        def work(who):
            f = _fields(body, "customer_id", "account_id", "amount", "term_months", "purpose")
            customer_id = f.text("customer_id", max_len=40)
            account_id = f.data.get("account_id")
            if account_id is not None and not isinstance(account_id, str):
                f.bad("account_id", "must be a string")
            amount = f.integer("amount", LOAN_MIN, LOAN_MAX)
            term = f.integer("term_months", TERM_MIN, TERM_MAX)
            purpose = f.choice("purpose", LOAN_PURPOSES)
            f.done()
            self._row("customer", customer_id, "customer")
            if account_id is not None:
                account = self._row("account", account_id, "account")
                if account["customer_id"] != customer_id:
                    raise ApiError(
                        422,
                        "validation_failed",
                        "the request has invalid fields",
                        fields=[{"field": "account_id", "problem": "belongs to another customer"}],
                    )
            t = now()
            lid = self._next_id("loan", "loan")
            self._db.execute(
                "INSERT INTO loan VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    lid,
                    customer_id,
                    account_id,
                    amount,
                    term,
                    purpose,
                    "draft",
                    None,
                    who.actor,
                    t,
                    t,
                ),
            )
            self._changed(
                t,
                "loan",
                lid,
                {"amount": amount, "term_months": term, "purpose": purpose, "status": "draft"},
            )
            self._relate(lid, customer_id, "applicant")
            objects = [(lid, "loan"), (customer_id, "applicant")]
            if account_id is not None:
                self._relate(lid, account_id, "disbursement_account")
                objects.append((account_id, "disbursement_account"))
            self._audit(
                who,
                "create_loan",
                "ok",
                201,
                "loan",
                lid,
                objects,
                {"amount": amount, "term_months": term, "purpose": purpose},
                t,
            )
            return 201, dict(self._row("loan", lid, "loan"))

        return self._run(caller, "create_loan", work)

    def get_loan(self, caller: Caller, loan_id: str):
        return self._run(
            caller,
            "get_loan",
            lambda _who: (200, dict(self._row("loan", loan_id, "loan"))),
        )

    def list_loans(self, caller: Caller, status: str | None, customer_id: str | None):
        def work(_who):
            if status is not None and status not in LOAN_STATUSES:
                raise ApiError(
                    422,
                    "validation_failed",
                    "the request has invalid fields",
                    fields=[
                        {"field": "status", "problem": f"must be one of {', '.join(LOAN_STATUSES)}"}
                    ],
                )
            sql, args = "SELECT * FROM loan WHERE 1=1", []
            if status is not None:
                sql, args = sql + " AND status = ?", [*args, status]
            if customer_id is not None:
                sql, args = sql + " AND customer_id = ?", [*args, customer_id]
            rows = self._db.execute(sql + " ORDER BY created_at, id", args).fetchall()
            return 200, {"loans": [dict(r) for r in rows], "count": len(rows)}

        return self._run(caller, "list_loans", work)

    def move_loan(self, caller: Caller, action: str, loan_id: str, body: Any = None):
        """submit / review / approve / reject / withdraw a loan application."""
        operation = f"{action}_loan"

        def work(who):
            reason = None
            if action == "disburse":
                return self._disburse(who, loan_id, body)
            if action == "reject" or (body not in (None, {}) and action != "submit"):
                f = _fields(body if body is not None else {}, "reason")
                if action == "reject":
                    reason = f.text("reason", max_len=500)
                elif "reason" in f.data:
                    reason = f.text("reason", max_len=500)
                f.done()
            loan = self._row("loan", loan_id, "loan")
            sources, target = TRANSITIONS[action]
            if loan["status"] not in sources:
                raise ApiError(
                    409,
                    "invalid_transition",
                    f"cannot {action} a loan application in status {loan['status']}",
                    object_type="loan",
                    object_id=loan_id,
                    status=loan["status"],
                    action=action,
                    allowed_from=list(sources),
                )
            if action == "submit":
                customer = self._row("customer", loan["customer_id"], "customer")
                if customer["kyc_status"] != "passed":
                    raise ApiError(
                        409,
                        "kyc_required",
                        f"customer {loan['customer_id']} has not passed KYC",
                        object_type="loan",
                        object_id=loan_id,
                        kyc_status=customer["kyc_status"],
                    )
            if action == "approve":
                limit = APPROVAL_LIMITS.get(who.role, 0)
                if loan["amount"] > limit:
                    raise ApiError(
                        403,
                        "approval_limit_exceeded",
                        f"amount {loan['amount']} exceeds the approval limit of {limit} "
                        f"for role {who.role}",
                        object_type="loan",
                        object_id=loan_id,
                        amount=loan["amount"],
                        limit=limit,
                    )
                if who.actor == loan["created_by"]:
                    raise ApiError(
                        403,
                        "four_eyes",
                        "the creator of a loan application may not approve it",
                        object_type="loan",
                        object_id=loan_id,
                    )
            t = now()
            self._db.execute(
                "UPDATE loan SET status = ?, decision_reason = COALESCE(?, decision_reason), "
                "updated_at = ? WHERE id = ?",
                (target, reason, t, loan_id),
            )
            self._changed(t, "loan", loan_id, {"status": target})
            attributes: dict[str, Any] = {"from_status": loan["status"], "to_status": target}
            if reason:
                attributes["reason"] = reason
            objects = [(loan_id, "loan"), (loan["customer_id"], "applicant")]
            self._audit(who, operation, "ok", 200, "loan", loan_id, objects, attributes, t)
            return 200, dict(self._row("loan", loan_id, "loan"))

        return self._run(caller, operation, work)

    def _disburse(self, who: Caller, loan_id: str, body: Any):
        """Pay an approved loan out to an account of its customer: the amount must match
        the approved one, and whoever approved it may not pay it (segregation of duties,
        read from the audit log, not from a field of the loan)."""
        f = _fields(body if body is not None else {}, "account_id", "amount")
        account_id = f.text("account_id", max_len=40)
        amount = f.integer("amount", LOAN_MIN, LOAN_MAX)
        f.done()
        loan = self._row("loan", loan_id, "loan")
        account = self._row("account", account_id, "account")
        sources, target = TRANSITIONS["disburse"]
        if loan["status"] not in sources:
            raise ApiError(
                409,
                "invalid_transition",
                f"cannot disburse a loan application in status {loan['status']}",
                object_type="loan",
                object_id=loan_id,
                status=loan["status"],
                action="disburse",
                allowed_from=list(sources),
            )
        approver = self._db.execute(
            "SELECT actor FROM audit WHERE operation = 'approve_loan' AND outcome = 'ok' "
            "AND object_id = ? ORDER BY seq DESC LIMIT 1",
            (loan_id,),
        ).fetchone()
        if approver is not None and approver["actor"] == who.actor:
            raise ApiError(
                403,
                "segregation_of_duties",
                "the approver of a loan may not also disburse it",
                object_type="loan",
                object_id=loan_id,
            )
        if account["customer_id"] != loan["customer_id"]:
            raise ApiError(
                409,
                "account_mismatch",
                f"account {account_id} does not belong to the loan's customer",
                object_type="loan",
                object_id=loan_id,
                account_customer=account["customer_id"],
                loan_customer=loan["customer_id"],
            )
        if amount != loan["amount"]:
            raise ApiError(
                422,
                "amount_mismatch",
                f"the amount {amount} does not match the approved amount {loan['amount']}",
                approved=loan["amount"],
                requested=amount,
            )
        t = now()
        self._db.execute(
            "UPDATE loan SET status = ?, updated_at = ? WHERE id = ?", (target, t, loan_id)
        )
        self._db.execute(
            "UPDATE account SET balance = balance + ? WHERE id = ?", (amount, account_id)
        )
        (balance,) = self._db.execute(
            "SELECT balance FROM account WHERE id = ?", (account_id,)
        ).fetchone()
        self._changed(t, "loan", loan_id, {"status": target})
        self._changed(t, "account", account_id, {"balance": balance})
        self._relate(loan_id, account_id, "paid_into")
        objects = [(loan_id, "loan"), (account_id, "paid_into"), (loan["customer_id"], "applicant")]
        attributes = {"from_status": loan["status"], "to_status": target, "amount": amount}
        self._audit(who, "disburse_loan", "ok", 200, "loan", loan_id, objects, attributes, t)
        return 200, dict(self._row("loan", loan_id, "loan"))

    # ---- audit -----------------------------------------------------------------------
    def get_audit(self, caller: Caller, since: int = 0, limit: int = 100):
        def work(_who):
            if limit < 1 or limit > 1000 or since < 0:
                raise ApiError(
                    422,
                    "validation_failed",
                    "the request has invalid fields",
                    fields=[{"field": "limit", "problem": "must be 1..1000"}],
                )
            rows = self._db.execute(
                "SELECT * FROM audit WHERE seq > ? ORDER BY seq LIMIT ?", (since, limit)
            )
            entries = [self._audit_view(r) for r in rows]
            return 200, {"entries": entries, "next": entries[-1]["seq"] if entries else since}

        return self._run(caller, "get_audit", work)

    @staticmethod
    def _audit_view(row: sqlite3.Row) -> dict[str, Any]:
        out = dict(row)
        out["objects"] = [{"object_id": o, "qualifier": q} for o, q in json.loads(row["objects"])]
        out["attributes"] = json.loads(row["attributes"])
        return out

    # ---- history, for the OCEL export ------------------------------------------------
    def history(self) -> dict[str, list[dict[str, Any]]]:
        """Everything the OCEL export needs: audit entries, attribute changes, relations,
        and the object ids of each type."""
        with self._lock:
            audit = [
                self._audit_view(r) for r in self._db.execute("SELECT * FROM audit ORDER BY seq")
            ]
            changes = [
                dict(r) for r in self._db.execute("SELECT * FROM object_change ORDER BY seq")
            ]
            relations = [
                dict(r)
                for r in self._db.execute(
                    "SELECT * FROM object_relation ORDER BY source_id, target_id, qualifier"
                )
            ]
        for change in changes:
            change["value"] = json.loads(change["value"])
        return {"audit": audit, "changes": changes, "relations": relations}
