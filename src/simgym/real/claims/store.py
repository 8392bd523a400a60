"""Northwind Mutual's claims back office: records, rules and the journal of every attempt.

Everything is held in memory and driven by a simulated clock (:class:`SimClock`), so a run
replayed with the same seed produces the same ids, times and outcomes.

Records
    policy      UUID ids; a holder, a product, a coverage limit, a deductible, a period of
                cover and a status (``active`` -> ``cancelled``).
    claim       ``CLM-<year>-<6 digits>``; filed against a policy by an agent or an adjuster,
                life cycle ``filed -> under_review -> approved | rejected``,
                ``approved -> paid -> closed``, ``rejected -> closed``.
    assessment  ``ASM-<claim seq>-<n>``; an adjuster's valuation of a claim under review.
                The newest one is ``current``; recording another marks the earlier one
                ``superseded``; approving the claim marks it ``accepted``.
    payout      ``PAY-<8 hex>``; money sent by finance for an approved claim.

Checks, in this order (the first that fails answers): authentication (401), the caller's
roles may attempt the operation (403), the request's fields (400), the records it names
exist (404), duplicates (409), the life cycle (409), the policy covers the incident (422),
the coverage limit (422), the four-eyes rule (403), the caller's approval limit (403),
segregation of duties (403), the payout matches the approved amount (422).

Errors are RFC 9457 problem details (``application/problem+json``) with a ``code``
extension member; :data:`ERRORS` lists every code with its status.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

COMPANY_DOMAIN = "northwind-mutual.example"
PROBLEM_BASE = "https://api.northwind-mutual.example/problems/"
CURRENCY = "EUR"

ROLES = ("agent", "adjuster", "senior_adjuster", "claims_manager", "finance")
PRODUCTS = ("home", "motor", "travel", "liability")
LOSS_TYPES = {
    "home": ("water_damage", "fire", "storm", "burglary", "glass_breakage"),
    "motor": ("collision", "theft", "glass_breakage", "vandalism"),
    "travel": ("medical", "cancellation", "lost_baggage"),
    "liability": ("third_party_injury", "third_party_property"),
}

# operation -> roles that may attempt it (a caller holding any one of them may)
PERMISSIONS: dict[str, tuple[str, ...]] = {
    "issue_policy": ("agent",),
    "cancel_policy": ("agent", "claims_manager"),
    "get_policy": ROLES,
    "file_claim": ("agent", "adjuster", "senior_adjuster"),
    "get_claim": ROLES,
    "search_claims": ROLES,
    "start_review": ("adjuster", "senior_adjuster", "claims_manager"),
    "record_assessment": ("adjuster", "senior_adjuster"),
    "approve_claim": ("adjuster", "senior_adjuster", "claims_manager"),
    "reject_claim": ("adjuster", "senior_adjuster", "claims_manager"),
    "close_claim": ("adjuster", "senior_adjuster", "claims_manager"),
    "issue_payout": ("finance",),
    "get_payout": ROLES,
}

# approval authority per role, in euros; a caller with several roles has the highest
APPROVAL_LIMITS: dict[str, float] = {
    "adjuster": 5_000.00,
    "senior_adjuster": 25_000.00,
    "claims_manager": 100_000.00,
}

# claim action -> (statuses it may start from, status it leads to)
CLAIM_TRANSITIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "start_review": (("filed",), "under_review"),
    "approve_claim": (("under_review",), "approved"),
    "reject_claim": (("under_review",), "rejected"),
    "issue_payout": (("approved",), "paid"),
    "close_claim": (("paid", "rejected"), "closed"),
}
# operations that need the claim in a status but do not change it
CLAIM_REQUIRES: dict[str, tuple[str, ...]] = {"record_assessment": ("under_review",)}
CLAIM_STATUSES = ("filed", "under_review", "approved", "rejected", "paid", "closed")
POLICY_TRANSITIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "cancel_policy": (("active",), "cancelled"),
}
DUPLICATE_KEY = ("policy_id", "incident_date", "claimed_amount")
DUPLICATE_IGNORES_STATUSES = ("rejected",)
MAX_CLAIMED_AMOUNT = 1_000_000.00

# error code -> (HTTP status, title, rule kind)
ERRORS: dict[str, tuple[int, str, str]] = {
    "unauthenticated": (401, "Authentication required", "authentication"),
    "insufficient_role": (403, "Operation not permitted for your roles", "permission"),
    "validation_failed": (400, "Request validation failed", "validation"),
    "resource_not_found": (404, "Resource not found", "existence"),
    "duplicate_claim": (409, "Duplicate claim", "duplicate"),
    "invalid_state_transition": (409, "Invalid state transition", "life_cycle"),
    "policy_not_in_force": (422, "Policy not in force", "coverage_period"),
    "exceeds_coverage": (422, "Amount exceeds coverage", "coverage_limit"),
    "self_approval_forbidden": (403, "Four-eyes rule", "self_approval"),
    "approval_limit_exceeded": (403, "Approval limit exceeded", "approval_limit"),
    "segregation_of_duties": (403, "Segregation of duties", "segregation_of_duties"),
    "payout_amount_mismatch": (422, "Payout does not match approval", "match"),
}


def money(value: float) -> str:
    """``EUR 12,400.00``, as the refusal messages state amounts."""
    return f"{CURRENCY} {value:,.2f}"


def cents(value: float) -> int:
    return int(round(float(value) * 100))


class ApiError(Exception):
    """A refusal, carried as an RFC 9457 problem."""

    def __init__(self, code: str, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.status, self.title, self.kind = ERRORS[code]
        self.detail = detail
        self.extensions = extensions

    def problem(self, instance: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": PROBLEM_BASE + self.code.replace("_", "-"),
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if instance:
            body["instance"] = instance
        body["code"] = self.code
        body.update(self.extensions)
        return body


class SimClock:
    """Simulated wall clock in nanoseconds since the epoch; only moves when told to."""

    def __init__(self, start: datetime, seed: int) -> None:
        self._ns = int(start.timestamp()) * 1_000_000_000
        self.rng = random.Random(f"clock:{seed}")

    def now_ns(self) -> int:
        return self._ns

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._ns / 1e9, UTC)

    def iso(self) -> str:
        return iso(self._ns)

    def advance_ms(self, low: float, high: float | None = None) -> int:
        ms = low if high is None else self.rng.uniform(low, high)
        self._ns += int(ms * 1_000_000)
        return self._ns

    def advance_s(self, low: float, high: float | None = None) -> int:
        return self.advance_ms(low * 1000, None if high is None else high * 1000)


def iso(ns: int) -> str:
    moment = datetime.fromtimestamp(ns // 1_000_000_000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{(ns // 1_000_000) % 1000:03d}Z"


@dataclass(frozen=True)
class Staff:
    user_id: str
    name: str
    roles: tuple[str, ...]


@dataclass(frozen=True)
class Caller:
    """Who is asking, resolved from the bearer token, and from where."""

    user_id: str
    roles: tuple[str, ...]
    session_id: str = ""
    client_id: str = "web-portal"


@dataclass
class JournalEntry:
    """One attempt at a state-changing operation, accepted or refused."""

    event_id: str
    operation: str
    time_ns: int
    caller: Caller
    outcome: str  # accepted | refused
    objects: list[tuple[str, str, str]]  # (object type, object id, qualifier)
    attributes: dict[str, Any] = field(default_factory=dict)
    error_code: str | None = None
    error_detail: str | None = None
    status: int = 200


@dataclass
class Change:
    """An object attribute taking a value at a time (initial values included)."""

    object_type: str
    object_id: str
    name: str
    value: Any
    time_ns: int
    event_id: str | None


STAFF: tuple[Staff, ...] = tuple(
    Staff(f"{login}@{COMPANY_DOMAIN}", name, roles)
    for login, name, roles in (
        ("lena.hoffmann", "Lena Hoffmann", ("agent",)),
        ("tomas.novak", "Tomas Novak", ("agent",)),
        ("priya.raman", "Priya Raman", ("agent",)),
        ("jonas.weber", "Jonas Weber", ("adjuster",)),
        ("amelie.laurent", "Amelie Laurent", ("adjuster",)),
        ("kwame.mensah", "Kwame Mensah", ("adjuster",)),
        ("sofia.rossi", "Sofia Rossi", ("adjuster",)),
        ("henrik.dahl", "Henrik Dahl", ("senior_adjuster",)),
        ("marta.kowalska", "Marta Kowalska", ("senior_adjuster", "finance")),
        ("oliver.grant", "Oliver Grant", ("claims_manager", "finance")),
        ("yuki.tanaka", "Yuki Tanaka", ("finance",)),
        ("daniel.osei", "Daniel Osei", ("finance",)),
    )
)


class ClaimsOffice:
    """The store: policies, claims, assessments, payouts, and the rules over them."""

    def __init__(self, clock: SimClock, seed: int = 0) -> None:
        self.clock = clock
        self.rng = random.Random(f"store:{seed}")
        self.staff = {member.user_id: member for member in STAFF}
        self.tokens: dict[str, tuple[str, str]] = {}  # token -> (user id, client id)
        self.policies: dict[str, dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        self.assessments: dict[str, dict[str, Any]] = {}
        self.payouts: dict[str, dict[str, Any]] = {}
        self.journal: list[JournalEntry] = []
        self.changes: list[Change] = []
        self._claim_seq = 0
        self._assessment_seq: dict[str, int] = {}
        self._event_seq = 0

    # ---- identity ----------------------------------------------------------------------

    def issue_token(self, user_id: str, client_id: str) -> str:
        token = "nwm_" + "".join(
            self.rng.choice("abcdefghijkmnpqrstuvwxyz23456789") for _ in range(32)
        )
        self.tokens[token] = (user_id, client_id)
        return token

    def revoke_token(self, token: str) -> None:
        self.tokens.pop(token, None)

    def authenticate(self, authorization: str | None, session_id: str = "") -> Caller:
        if not authorization or not authorization.startswith("Bearer "):
            raise ApiError("unauthenticated", "A bearer token is required.")
        entry = self.tokens.get(authorization[len("Bearer ") :].strip())
        if entry is None:
            raise ApiError("unauthenticated", "The access token is invalid or has expired.")
        user_id, client_id = entry
        return Caller(user_id, self.staff[user_id].roles, session_id, client_id)

    # ---- bookkeeping -------------------------------------------------------------------

    def _next_event_id(self) -> str:
        self._event_seq += 1
        return f"evt-{self._event_seq:06d}"

    def _set(
        self,
        otype: str,
        record: dict[str, Any],
        oid: str,
        values: dict[str, Any],
        event_id: str | None,
    ) -> None:
        now = self.clock.now_ns()
        for name, value in values.items():
            if record.get(name) != value or name not in record:
                record[name] = value
                self.changes.append(Change(otype, oid, name, value, now, event_id))
        record["updated_at"] = iso(now)

    def _attempt(
        self,
        operation: str,
        caller: Caller,
        objects: list[tuple[str, str, str]],
        attributes: dict[str, Any],
        action,
    ) -> dict[str, Any]:
        """Run ``action`` (which may raise :class:`ApiError`) and journal the attempt."""
        event_id = self._next_event_id()
        entry = JournalEntry(
            event_id,
            operation,
            self.clock.now_ns(),
            caller,
            "accepted",
            list(objects),
            dict(attributes),
        )
        try:
            result = action(event_id, entry)
        except ApiError as error:
            entry.outcome = "refused"
            entry.error_code = error.code
            entry.error_detail = error.detail
            entry.status = error.status
            self.journal.append(entry)
            raise
        self.journal.append(entry)
        return result

    @staticmethod
    def _permit(operation: str, caller: Caller) -> None:
        allowed = PERMISSIONS[operation]
        if not set(caller.roles) & set(allowed):
            raise ApiError(
                "insufficient_role",
                f"Your roles ({', '.join(caller.roles)}) may not {operation.replace('_', ' ')}; "
                f"allowed roles: {', '.join(allowed)}.",
                allowed_roles=list(allowed),
            )

    @staticmethod
    def _invalid(problems: list[tuple[str, str]]) -> None:
        if problems:
            raise ApiError(
                "validation_failed",
                "; ".join(f"{name}: {reason}" for name, reason in problems) + ".",
                **{"invalid-params": [{"name": n, "reason": r} for n, r in problems]},
            )

    def _claim(self, claim_number: str) -> dict[str, Any]:
        claim = self.claims.get(claim_number)
        if claim is None:
            raise ApiError("resource_not_found", f"Claim {claim_number} does not exist.")
        return claim

    def _policy(self, policy_id: str) -> dict[str, Any]:
        policy = self.policies.get(policy_id)
        if policy is None:
            raise ApiError("resource_not_found", f"Policy {policy_id} does not exist.")
        return policy

    @staticmethod
    def _transition(claim: dict[str, Any], operation: str) -> str:
        sources, target = CLAIM_TRANSITIONS[operation]
        if claim["status"] not in sources:
            raise ApiError(
                "invalid_state_transition",
                f"Claim {claim['claim_number']} is {claim['status']}; "
                f"{operation.replace('_', ' ')} needs it to be {' or '.join(sources)}.",
                current_status=claim["status"],
            )
        return target

    # ---- validation helpers ------------------------------------------------------------

    @staticmethod
    def _amount(
        body: dict[str, Any],
        name: str,
        problems: list[tuple[str, str]],
        maximum: float = MAX_CLAIMED_AMOUNT,
    ) -> float | None:
        if name not in body or body[name] is None:
            problems.append((name, "is required"))
            return None
        value = body[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append((name, "must be a number"))
            return None
        if value <= 0 or value > maximum:
            problems.append((name, f"must be greater than 0 and at most {maximum:.2f}"))
            return None
        if cents(value) != round(value * 100, 6):
            problems.append((name, "must have at most two decimals"))
            return None
        return round(float(value), 2)

    @staticmethod
    def _text(
        body: dict[str, Any],
        name: str,
        problems: list[tuple[str, str]],
        choices: tuple[str, ...] | None = None,
        required: bool = True,
    ) -> str | None:
        value = body.get(name)
        if value is None or value == "":
            if required:
                problems.append((name, "is required"))
            return None
        if not isinstance(value, str):
            problems.append((name, "must be a string"))
            return None
        if choices is not None and value not in choices:
            problems.append((name, f"must be one of {', '.join(choices)}"))
            return None
        return value

    @staticmethod
    def _date(body: dict[str, Any], name: str, problems: list[tuple[str, str]]) -> date | None:
        value = body.get(name)
        if value is None or value == "":
            problems.append((name, "is required"))
            return None
        try:
            return date.fromisoformat(str(value))
        except ValueError:
            problems.append((name, "must be a date (YYYY-MM-DD)"))
            return None

    # ---- policies ----------------------------------------------------------------------

    def seed_policy(
        self,
        *,
        holder: str,
        product: str,
        coverage_limit: float,
        deductible: float,
        effective_from: str,
        effective_to: str,
        issued_by: str,
        issued_at_ns: int,
    ) -> str:
        """A policy that existed before the log starts (no journal entry)."""
        policy_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        record = {"policy_id": policy_id}
        self.policies[policy_id] = record
        values = {
            "holder": holder,
            "product": product,
            "coverage_limit": coverage_limit,
            "deductible": deductible,
            "effective_from": effective_from,
            "effective_to": effective_to,
            "status": "active",
            "issued_by": issued_by,
            "currency": CURRENCY,
        }
        record.update(values)
        record["issued_at"] = record["updated_at"] = iso(issued_at_ns)
        for name, value in values.items():
            self.changes.append(Change("policy", policy_id, name, value, issued_at_ns, None))
        return policy_id

    def issue_policy(self, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
        def action(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            self._permit("issue_policy", caller)
            problems: list[tuple[str, str]] = []
            holder = self._text(body, "holder", problems)
            product = self._text(body, "product", problems, PRODUCTS)
            limit = self._amount(body, "coverage_limit", problems, 5_000_000.00)
            deductible = body.get("deductible", 0)
            if (
                isinstance(deductible, bool)
                or not isinstance(deductible, int | float)
                or deductible < 0
            ):
                problems.append(("deductible", "must be a non-negative number"))
            start = self._date(body, "effective_from", problems)
            end = self._date(body, "effective_to", problems)
            if start and end and end <= start:
                problems.append(("effective_to", "must be after effective_from"))
            self._invalid(problems)
            policy_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            record: dict[str, Any] = {"policy_id": policy_id}
            self.policies[policy_id] = record
            self._set(
                "policy",
                record,
                policy_id,
                {
                    "holder": holder,
                    "product": product,
                    "coverage_limit": limit,
                    "deductible": round(float(deductible), 2),
                    "effective_from": start.isoformat(),
                    "effective_to": end.isoformat(),
                    "status": "active",
                    "issued_by": caller.user_id,
                    "currency": CURRENCY,
                },
                event_id,
            )
            record["issued_at"] = self.clock.iso()
            entry.objects.append(("policy", policy_id, "issued"))
            entry.attributes.update({"coverage_limit": limit, "product": product})
            entry.status = 201
            return dict(record)

        return self._attempt("issue_policy", caller, [], {}, action)

    def cancel_policy(self, caller: Caller, policy_id: str, body: dict[str, Any]) -> dict[str, Any]:
        objects = [("policy", policy_id, "cancelled")] if policy_id in self.policies else []

        def action(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            self._permit("cancel_policy", caller)
            problems: list[tuple[str, str]] = []
            reason = self._text(body, "reason", problems)
            self._invalid(problems)
            policy = self._policy(policy_id)
            sources, target = POLICY_TRANSITIONS["cancel_policy"]
            if policy["status"] not in sources:
                raise ApiError(
                    "invalid_state_transition",
                    f"Policy {policy_id} is {policy['status']}; "
                    "cancel policy needs it to be active.",
                    current_status=policy["status"],
                )
            today = self.clock.now().date().isoformat()
            self._set(
                "policy",
                policy,
                policy_id,
                {
                    "status": target,
                    "cancelled_by": caller.user_id,
                    "cancelled_on": today,
                    "effective_to": min(policy["effective_to"], today),
                },
                event_id,
            )
            entry.attributes["reason"] = reason
            return dict(policy)

        return self._attempt("cancel_policy", caller, objects, {}, action)

    def get_policy(self, caller: Caller, policy_id: str) -> dict[str, Any]:
        self._permit("get_policy", caller)
        return dict(self._policy(policy_id))

    # ---- claims ------------------------------------------------------------------------

    def file_claim(self, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
        policy_id = body.get("policy_id")
        objects = []
        if isinstance(policy_id, str) and policy_id in self.policies:
            objects.append(("policy", policy_id, "claimed under"))

        def action(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            self._permit("file_claim", caller)
            problems: list[tuple[str, str]] = []
            pid = self._text(body, "policy_id", problems)
            if pid is not None:
                try:
                    uuid.UUID(pid)
                except ValueError:
                    problems.append(("policy_id", "must be a UUID"))
                    pid = None
            claimant = self._text(body, "claimant", problems)
            incident = self._date(body, "incident_date", problems)
            if incident and incident > self.clock.now().date():
                problems.append(("incident_date", "must not be in the future"))
            loss_type = self._text(
                body,
                "loss_type",
                problems,
                tuple(sorted({t for ts in LOSS_TYPES.values() for t in ts})),
            )
            amount = self._amount(body, "claimed_amount", problems)
            self._text(body, "description", problems, required=False)
            self._invalid(problems)
            policy = self._policy(pid)
            if loss_type not in LOSS_TYPES[policy["product"]]:
                self._invalid(
                    [
                        (
                            "loss_type",
                            f"is not covered by a {policy['product']} policy; "
                            f"expected one of {', '.join(LOSS_TYPES[policy['product']])}",
                        )
                    ]
                )
            for other in self.claims.values():
                if (
                    other["policy_id"] == pid
                    and other["incident_date"] == incident.isoformat()
                    and cents(other["claimed_amount"]) == cents(amount)
                    and other["status"] not in DUPLICATE_IGNORES_STATUSES
                ):
                    entry.objects.append(("claim", other["claim_number"], "duplicate of"))
                    raise ApiError(
                        "duplicate_claim",
                        f"Claim {other['claim_number']} already covers policy {pid} with incident "
                        f"date {incident.isoformat()} and amount {money(amount)}.",
                        duplicate_of=other["claim_number"],
                    )
            if not (policy["effective_from"] <= incident.isoformat() <= policy["effective_to"]):
                raise ApiError(
                    "policy_not_in_force",
                    f"Policy {pid} was not in force on {incident.isoformat()} "
                    f"(cover {policy['effective_from']} to {policy['effective_to']}, "
                    f"status {policy['status']}).",
                )
            self._claim_seq += 1
            number = f"CLM-{self.clock.now().year}-{self._claim_seq:06d}"
            record: dict[str, Any] = {"claim_number": number}
            self.claims[number] = record
            self._set(
                "claim",
                record,
                number,
                {
                    "policy_id": pid,
                    "claimant": claimant,
                    "incident_date": incident.isoformat(),
                    "loss_type": loss_type,
                    "claimed_amount": amount,
                    "description": body.get("description") or "",
                    "status": "filed",
                    "filed_by": caller.user_id,
                },
                event_id,
            )
            record["filed_at"] = self.clock.iso()
            entry.objects.insert(0, ("claim", number, "filed"))
            entry.attributes["claimed_amount"] = amount
            entry.status = 201
            return self._claim_view(record)

        return self._attempt("file_claim", caller, objects, {}, action)

    def _claim_view(self, record: dict[str, Any]) -> dict[str, Any]:
        view = dict(record)
        view["assessments"] = [
            {
                key: self.assessments[a][key]
                for key in (
                    "assessment_id",
                    "assessor",
                    "assessed_amount",
                    "recommendation",
                    "status",
                )
            }
            for a in view.pop("assessment_ids", [])
        ]
        return view

    def get_claim(self, caller: Caller, claim_number: str) -> dict[str, Any]:
        self._permit("get_claim", caller)
        return self._claim_view(self._claim(claim_number))

    def search_claims(
        self, caller: Caller, status: str | None, policy_id: str | None, limit: int = 20
    ) -> dict[str, Any]:
        self._permit("search_claims", caller)
        if status is not None and status not in CLAIM_STATUSES:
            self._invalid([("status", f"must be one of {', '.join(CLAIM_STATUSES)}")])
        items = [
            self._claim_view(c)
            for c in self.claims.values()
            if (status is None or c["status"] == status)
            and (policy_id is None or c["policy_id"] == policy_id)
        ]
        return {"items": items[:limit], "total": len(items)}

    def _claim_action(
        self,
        operation: str,
        caller: Caller,
        claim_number: str,
        qualifier: str,
        body: dict[str, Any],
        run,
    ) -> dict[str, Any]:
        objects = [("claim", claim_number, qualifier)] if claim_number in self.claims else []

        def action(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            self._permit(operation, caller)
            return run(event_id, entry)

        return self._attempt(operation, caller, objects, {}, action)

    def start_review(
        self, caller: Caller, claim_number: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        def run(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            claim = self._claim(claim_number)
            target = self._transition(claim, "start_review")
            self._set(
                "claim",
                claim,
                claim_number,
                {"status": target, "handler": caller.user_id},
                event_id,
            )
            return self._claim_view(claim)

        return self._claim_action("start_review", caller, claim_number, "reviewed", body, run)

    def record_assessment(
        self, caller: Caller, claim_number: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        def run(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            problems: list[tuple[str, str]] = []
            amount = self._amount(body, "assessed_amount", problems)
            recommendation = self._text(body, "recommendation", problems, ("approve", "reject"))
            self._text(body, "notes", problems, required=False)
            self._invalid(problems)
            claim = self._claim(claim_number)
            if claim["status"] not in CLAIM_REQUIRES["record_assessment"]:
                raise ApiError(
                    "invalid_state_transition",
                    f"Claim {claim_number} is {claim['status']}; record assessment needs it to be "
                    "under_review.",
                    current_status=claim["status"],
                )
            policy = self.policies[claim["policy_id"]]
            if amount > policy["coverage_limit"]:
                raise ApiError(
                    "exceeds_coverage",
                    f"Assessed amount {money(amount)} exceeds the coverage limit "
                    f"{money(policy['coverage_limit'])} of policy {policy['policy_id']}.",
                    coverage_limit=policy["coverage_limit"],
                )
            seq = self._assessment_seq.get(claim_number, 0) + 1
            self._assessment_seq[claim_number] = seq
            assessment_id = f"ASM-{claim_number.rsplit('-', 1)[1]}-{seq}"
            for earlier in claim.get("assessment_ids", []):
                old = self.assessments[earlier]
                if old["status"] == "current":
                    self._set("assessment", old, earlier, {"status": "superseded"}, event_id)
                    entry.objects.append(("assessment", earlier, "supersedes"))
            record: dict[str, Any] = {"assessment_id": assessment_id}
            self.assessments[assessment_id] = record
            self._set(
                "assessment",
                record,
                assessment_id,
                {
                    "claim_number": claim_number,
                    "assessor": caller.user_id,
                    "assessed_amount": amount,
                    "recommendation": recommendation,
                    "notes": body.get("notes") or "",
                    "status": "current",
                },
                event_id,
            )
            record["recorded_at"] = self.clock.iso()
            claim.setdefault("assessment_ids", []).append(assessment_id)
            self._set("claim", claim, claim_number, {"assessor": caller.user_id}, event_id)
            entry.objects.append(("assessment", assessment_id, "recorded"))
            entry.attributes["assessed_amount"] = amount
            entry.status = 201
            return dict(record)

        return self._claim_action("record_assessment", caller, claim_number, "assessed", body, run)

    def approve_claim(
        self, caller: Caller, claim_number: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        assessment_id = body.get("assessment_id")

        def run(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            problems: list[tuple[str, str]] = []
            self._text(body, "assessment_id", problems)
            self._invalid(problems)
            claim = self._claim(claim_number)
            assessment = self.assessments.get(assessment_id)
            if assessment is None or assessment["claim_number"] != claim_number:
                raise ApiError(
                    "resource_not_found",
                    f"Assessment {assessment_id} does not exist for claim {claim_number}.",
                )
            entry.objects.append(("assessment", assessment_id, "approved"))
            target = self._transition(claim, "approve_claim")
            if assessment["status"] != "current":
                raise ApiError(
                    "invalid_state_transition",
                    f"Assessment {assessment_id} is {assessment['status']}; only the current "
                    "assessment can be approved.",
                    current_status=assessment["status"],
                )
            amount = assessment["assessed_amount"]
            entry.attributes["amount"] = amount
            if caller.user_id == claim["filed_by"]:
                raise ApiError(
                    "self_approval_forbidden",
                    f"{caller.user_id} filed claim {claim_number} and may not approve it.",
                    conflicting_field="filed_by",
                )
            if caller.user_id == assessment["assessor"]:
                raise ApiError(
                    "self_approval_forbidden",
                    f"{caller.user_id} recorded assessment {assessment_id} and may not approve it.",
                    conflicting_field="assessor",
                )
            limit = max(APPROVAL_LIMITS.get(role, 0.0) for role in caller.roles)
            if cents(amount) > cents(limit):
                role = max(caller.roles, key=lambda r: APPROVAL_LIMITS.get(r, 0.0))
                raise ApiError(
                    "approval_limit_exceeded",
                    f"Approving {money(amount)} exceeds your approval limit of {money(limit)} "
                    f"(role {role}).",
                    approval_limit=limit,
                    requested_amount=amount,
                )
            self._set(
                "claim",
                claim,
                claim_number,
                {
                    "status": target,
                    "approved_by": caller.user_id,
                    "approved_amount": amount,
                    "approved_assessment": assessment_id,
                },
                event_id,
            )
            self._set("assessment", assessment, assessment_id, {"status": "accepted"}, event_id)
            return self._claim_view(claim)

        return self._claim_action("approve_claim", caller, claim_number, "approved", body, run)

    def reject_claim(
        self, caller: Caller, claim_number: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        def run(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            problems: list[tuple[str, str]] = []
            reason = self._text(body, "reason", problems)
            self._invalid(problems)
            claim = self._claim(claim_number)
            target = self._transition(claim, "reject_claim")
            self._set(
                "claim",
                claim,
                claim_number,
                {
                    "status": target,
                    "rejected_by": caller.user_id,
                    "rejection_reason": reason,
                },
                event_id,
            )
            entry.attributes["reason"] = reason
            return self._claim_view(claim)

        return self._claim_action("reject_claim", caller, claim_number, "rejected", body, run)

    def close_claim(
        self, caller: Caller, claim_number: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        def run(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            claim = self._claim(claim_number)
            target = self._transition(claim, "close_claim")
            self._set(
                "claim",
                claim,
                claim_number,
                {"status": target, "closed_by": caller.user_id},
                event_id,
            )
            return self._claim_view(claim)

        return self._claim_action("close_claim", caller, claim_number, "closed", body, run)

    # ---- payouts -----------------------------------------------------------------------

    def issue_payout(self, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
        claim_number = body.get("claim_number")
        objects = []
        if isinstance(claim_number, str) and claim_number in self.claims:
            objects.append(("claim", claim_number, "settled"))

        def action(event_id: str, entry: JournalEntry) -> dict[str, Any]:
            self._permit("issue_payout", caller)
            problems: list[tuple[str, str]] = []
            self._text(body, "claim_number", problems)
            amount = self._amount(body, "amount", problems)
            iban = self._text(body, "payee_iban", problems)
            if iban is not None and not (
                15 <= len(iban.replace(" ", "")) <= 34
                and iban[:2].isalpha()
                and iban[2:4].isdigit()
            ):
                problems.append(("payee_iban", "must be an IBAN"))
            self._invalid(problems)
            claim = self._claim(claim_number)
            entry.attributes["amount"] = amount
            target = self._transition(claim, "issue_payout")
            if caller.user_id == claim.get("approved_by"):
                raise ApiError(
                    "segregation_of_duties",
                    f"{caller.user_id} approved claim {claim_number} and may not also pay it.",
                    conflicting_field="approved_by",
                )
            if cents(amount) != cents(claim["approved_amount"]):
                raise ApiError(
                    "payout_amount_mismatch",
                    f"Payout amount {money(amount)} does not match the approved amount "
                    f"{money(claim['approved_amount'])} of claim {claim_number}.",
                    approved_amount=claim["approved_amount"],
                )
            payout_id = "PAY-" + "".join(self.rng.choice("0123456789ABCDEF") for _ in range(8))
            record: dict[str, Any] = {"payout_id": payout_id}
            self.payouts[payout_id] = record
            self._set(
                "payout",
                record,
                payout_id,
                {
                    "claim_number": claim_number,
                    "amount": amount,
                    "currency": CURRENCY,
                    "payee_iban": iban,
                    "paid_by": caller.user_id,
                    "status": "issued",
                },
                event_id,
            )
            record["issued_at"] = self.clock.iso()
            self._set(
                "claim",
                claim,
                claim_number,
                {
                    "status": target,
                    "paid_by": caller.user_id,
                    "payout_id": payout_id,
                },
                event_id,
            )
            entry.objects.append(("payout", payout_id, "issued"))
            entry.status = 201
            return dict(record)

        return self._attempt("issue_payout", caller, objects, {}, action)

    def get_payout(self, caller: Caller, payout_id: str) -> dict[str, Any]:
        self._permit("get_payout", caller)
        payout = self.payouts.get(payout_id)
        if payout is None:
            raise ApiError("resource_not_found", f"Payout {payout_id} does not exist.")
        return dict(payout)


def truth() -> dict[str, Any]:
    """The rules as implemented, as plain data (written next to the logs as truth.json)."""
    kinds: dict[str, list[str]] = {}
    for code, (_, _, kind) in ERRORS.items():
        kinds.setdefault(kind, []).append(code)
    return {
        "system": "northwind-mutual-claims",
        "error_format": "RFC 9457 application/problem+json with a 'code' member",
        "errors": {
            code: {"status": s, "title": t, "kind": k} for code, (s, t, k) in ERRORS.items()
        },
        "rule_kinds": kinds,
        "check_order": [
            "authentication",
            "permission",
            "validation",
            "existence",
            "duplicate",
            "life_cycle",
            "coverage_period",
            "coverage_limit",
            "self_approval",
            "approval_limit",
            "segregation_of_duties",
            "match",
        ],
        "check_order_notes": [
            "file_claim: a loss_type the policy's product does not cover is a validation_failed "
            "found after the policy exists (so a wrong policy id answers 404 first)",
            "approve_claim: the claim must exist, then the assessment (404), then the claim must "
            "be under_review and the assessment current (409)",
        ],
        "roles": list(ROLES),
        "role_descriptions": {
            "agent": "insurance sales agent (a person): issues policies, files claims",
            "adjuster": "assesses claims; approves up to its limit",
            "senior_adjuster": "assesses claims; approves up to a higher limit",
            "claims_manager": "approves up to the highest limit; may cancel policies",
            "finance": "issues payouts",
        },
        "permissions": {op: list(roles) for op, roles in PERMISSIONS.items()},
        "approval_limits": {
            "currency": CURRENCY,
            "per_role": dict(APPROVAL_LIMITS),
            "combine": "a caller with several roles has the highest of their limits",
            "compares": "assessment.assessed_amount > limit",
            "roles_without_authority": [r for r in ROLES if r not in APPROVAL_LIMITS],
        },
        "self_approval": {
            "operation": "approve_claim",
            "actor_may_not_equal": ["claim.filed_by", "assessment.assessor"],
        },
        "segregation_of_duties": {
            "operation": "issue_payout",
            "actor_may_not_equal": ["claim.approved_by"],
        },
        "match": {
            "operation": "issue_payout",
            "equal": ["payout.amount", "claim.approved_amount"],
            "note": "claim.approved_amount is the approved assessment's assessed_amount",
        },
        "duplicate": {
            "operation": "file_claim",
            "key": list(DUPLICATE_KEY),
            "ignores_statuses": list(DUPLICATE_IGNORES_STATUSES),
        },
        "coverage": {
            "policy_not_in_force": "file_claim: incident_date outside "
            "[effective_from, effective_to] (cancelling a policy ends its cover on the day "
            "of cancellation)",
            "exceeds_coverage": "record_assessment: assessed_amount > policy.coverage_limit",
        },
        "state_machines": {
            "claim": {
                "statuses": list(CLAIM_STATUSES),
                "initial": "filed",
                "transitions": {
                    op: {"from": list(s), "to": t} for op, (s, t) in CLAIM_TRANSITIONS.items()
                },
                "requires": {op: list(s) for op, s in CLAIM_REQUIRES.items()},
            },
            "policy": {
                "statuses": ["active", "cancelled"],
                "initial": "active",
                "transitions": {
                    op: {"from": list(s), "to": t} for op, (s, t) in POLICY_TRANSITIONS.items()
                },
            },
            "assessment": {
                "statuses": ["current", "superseded", "accepted"],
                "initial": "current",
                "transitions": {
                    "record_assessment": {"from": ["current"], "to": "superseded"},
                    "approve_claim": {"from": ["current"], "to": "accepted"},
                },
            },
            "payout": {"statuses": ["issued"], "initial": "issued", "transitions": {}},
        },
        "validation": {
            "issue_policy": [
                "holder",
                "product",
                "coverage_limit",
                "effective_from",
                "effective_to",
            ],
            "file_claim": ["policy_id", "claimant", "incident_date", "loss_type", "claimed_amount"],
            "record_assessment": ["assessed_amount", "recommendation"],
            "approve_claim": ["assessment_id"],
            "reject_claim": ["reason"],
            "cancel_policy": ["reason"],
            "issue_payout": ["claim_number", "amount", "payee_iban"],
        },
        "id_formats": {
            "policy": "UUID version 4",
            "claim": "CLM-<year>-<6 digits>",
            "assessment": "ASM-<claim's 6 digits>-<n>",
            "payout": "PAY-<8 hex digits>",
            "user": "<first>.<last>@" + COMPANY_DOMAIN,
        },
        "staff": [{"user_id": s.user_id, "roles": list(s.roles)} for s in STAFF],
    }


def pre_window_time(clock: SimClock, days_before: int) -> int:
    return int((clock.now() - timedelta(days=days_before)).timestamp()) * 1_000_000_000
