"""Plays randomized working sessions of the claims office and writes every log.

A session is one staff member logged in for one piece of work, through the web portal or
through Claims Copilot: intake (agents file claims, sometimes issue or cancel a policy),
review (adjusters take filed claims into review and assess them), approval (people with
approval authority approve or reject assessed claims), payment (finance pays approved
claims) and closing. People make the mistakes people make, in proportions a real office
sees: a form sent without a field, a claim submitted twice, an incident date before the
cover began, an approval above one's authority, approving one's own assessment, paying a
claim one approved, typing the claimed amount instead of the approved one, acting on a
stale list, a stale login, trying an action one's role does not have.

Everything runs in one process against the ASGI app, on a simulated clock (working hours,
weekdays), so a seed always writes the same files.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from contextlib import nullcontext
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from simgym.real.claims.copilot import TOOLS, Copilot, split_arguments
from simgym.real.claims.store import (
    APPROVAL_LIMITS,
    LOSS_TYPES,
    PRODUCTS,
    STAFF,
    ClaimsOffice,
    SimClock,
    Staff,
    truth,
)

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # a Monday
FIRST = (
    "Anna",
    "Ben",
    "Clara",
    "David",
    "Elif",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jan",
    "Katrin",
    "Luca",
    "Mia",
    "Noah",
    "Olga",
    "Paul",
    "Rosa",
    "Samir",
    "Tara",
    "Viktor",
)
LAST = (
    "Becker",
    "Costa",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Horvath",
    "Ivanova",
    "Jansen",
    "Keller",
    "Lindqvist",
    "Moreau",
    "Nowak",
    "Okafor",
    "Petrov",
    "Quinn",
    "Richter",
    "Schmidt",
    "Vogel",
    "Zimmermann",
)
AMOUNT_RANGES = {
    "home": (400, 60_000),
    "motor": (300, 30_000),
    "travel": (80, 6_000),
    "liability": (800, 140_000),
}
COVERAGE = {
    "home": (150_000, 400_000),
    "motor": (25_000, 60_000),
    "travel": (5_000, 15_000),
    "liability": (100_000, 1_000_000),
}
CLIENT_IPS = {s.user_id: f"10.20.{3 + i // 4}.{20 + i}" for i, s in enumerate(STAFF)}
BROWSER = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0 Safari/537.36"
)


def iban(rng: random.Random) -> str:
    bban = "".join(rng.choice("0123456789") for _ in range(18))
    digits = "".join(str(int(c, 36)) for c in bban + "DE00")
    return f"DE{98 - int(digits) % 97:02d}{bban}"


class Channel:
    """How a session reaches the API: the web portal (plain HTTP) or the copilot."""

    def __init__(self, world: World, staff: Staff, copilot: bool, session_id: str) -> None:
        self.world = world
        self.staff = staff
        self.session_id = session_id
        self.client_id = "claims-copilot" if copilot else "web-portal"
        self.token = world.office.issue_token(staff.user_id, self.client_id)
        self.copilot = (
            Copilot(
                world.copilot_tracer,
                world.clock,
                world.send,
                random.Random(world.rng.random()),
                user_id=staff.user_id,
                token=self.token,
                session_id=session_id,
            )
            if copilot
            else None
        )

    def relogin(self) -> None:
        self.world.office.revoke_token(self.token)
        self.token = self.world.office.issue_token(self.staff.user_id, self.client_id)
        if self.copilot is not None:
            self.copilot.token = self.token

    def turn(self):
        return self.copilot.turn() if self.copilot is not None else nullcontext()

    def call(self, name: str, **arguments: Any) -> tuple[int, Any]:
        world = self.world
        if self.copilot is not None:
            status, body = self.copilot.call(name, arguments)
        else:
            world.clock.advance_s(3, 45)  # reading the screen, filling the form
            tool = TOOLS[name]
            path, query, payload = split_arguments(tool, arguments)
            headers = {
                "authorization": f"Bearer {self.token}",
                "x-session-id": self.session_id,
                "user-agent": BROWSER,
                "x-forwarded-for": CLIENT_IPS[self.staff.user_id],
            }
            status, text = world.send(
                tool.method, path, query, headers, payload if tool.method != "GET" else None
            )
            body = json.loads(text) if text else None
        world.calls += 1
        world.statuses[status] += 1
        if status >= 400 and isinstance(body, dict):
            world.codes[body.get("code", str(status))] += 1
        if status == 401:  # the login had expired: log in again and repeat
            self.relogin()
            return self.call(name, **arguments)
        return status, body


class World:
    def __init__(self, seed: int, out: Path) -> None:
        from fastapi.testclient import TestClient

        from simgym.real.claims.app import ServerTracing, create_app
        from simgym.real.claims.telemetry import OtlpJsonLines, make_provider

        self.seed = seed
        self.rng = random.Random(f"driver:{seed}")
        self.clock = SimClock(START, seed)
        self.office = ClaimsOffice(self.clock, seed)
        self.sink = OtlpJsonLines(out / "traces.jsonl")
        self.api_provider = make_provider(
            self.sink,
            service="claims-api",
            version="2.3.0",
            instance="claims-api-7d9f8c6b5-x2kqp",
            seed=f"api:{seed}",
        )
        self.copilot_provider = make_provider(
            self.sink,
            service="claims-copilot",
            version="0.9.4",
            instance="claims-copilot-5c7b9d-m4tzr",
            seed=f"copilot:{seed}",
        )
        self.copilot_tracer = self.copilot_provider.get_tracer("nwm.claims.copilot", "0.9.4")
        app = ServerTracing(
            create_app(self.office),
            self.api_provider.get_tracer("nwm.claims.api", "2.3.0"),
            self.clock,
        )
        self.client = TestClient(
            app,
            base_url="https://claims-api.northwind-mutual.example",
            raise_server_exceptions=True,
        )
        self.calls = 0
        self.statuses: Counter[int] = Counter()
        self.codes: Counter[str] = Counter()
        self.sessions_by_kind: Counter[str] = Counter()

    def send(
        self,
        method: str,
        path: str,
        query: dict[str, Any],
        headers: dict[str, str],
        body: dict[str, Any] | None,
    ) -> tuple[int, str]:
        url = path + (f"?{urlencode(query)}" if query else "")
        if body is None:
            response = self.client.request(method, url, headers=headers)
        else:
            response = self.client.request(
                method,
                url,
                headers={**headers, "content-type": "application/json"},
                content=json.dumps(body).encode("utf-8"),
            )
        return response.status_code, response.text

    def close(self) -> None:
        self.client.close()
        self.api_provider.shutdown()
        self.copilot_provider.shutdown()
        self.sink.close()

    # ---- the office before the log starts ----------------------------------------------

    def person(self) -> str:
        return f"{self.rng.choice(FIRST)} {self.rng.choice(LAST)}"

    def seed_policies(self, count: int) -> None:
        agents = [s.user_id for s in STAFF if "agent" in s.roles]
        today = self.clock.now().date()
        for _ in range(count):
            product = self.rng.choice(PRODUCTS)
            start = today - timedelta(days=self.rng.randint(20, 330))
            low, high = COVERAGE[product]
            issued = (
                int(
                    datetime.combine(
                        start - timedelta(days=self.rng.randint(1, 14)), datetime.min.time(), UTC
                    ).timestamp()
                )
                * 10**9
            )
            self.office.seed_policy(
                holder=self.person(),
                product=product,
                coverage_limit=float(round(self.rng.uniform(low, high), -3)),
                deductible=float(self.rng.choice((0, 150, 250, 500, 1000))),
                effective_from=start.isoformat(),
                effective_to=(start + timedelta(days=365)).isoformat(),
                issued_by=self.rng.choice(agents),
                issued_at_ns=issued + 9 * 3600 * 10**9,
            )

    # ---- the clock ---------------------------------------------------------------------

    def next_session_start(self) -> None:
        self.clock.advance_s(60, 1500)
        now = self.clock.now()
        if now.hour >= 17 or now.weekday() >= 5:
            day = now.date() + timedelta(days=1)
            while day.weekday() >= 5:
                day += timedelta(days=1)
            opening = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=8)
            self.clock._ns = int(opening.timestamp()) * 10**9
            self.clock.advance_s(0, 1800)

    def today(self) -> date:
        return self.clock.now().date()

    # ---- what is waiting ---------------------------------------------------------------

    def claims_in(self, *statuses: str) -> list[dict[str, Any]]:
        return [c for c in self.office.claims.values() if c["status"] in statuses]

    def assessed(self) -> list[dict[str, Any]]:
        return [c for c in self.claims_in("under_review") if c.get("assessment_ids")]


def _people(*roles: str) -> list[Staff]:
    return [s for s in STAFF if set(s.roles) & set(roles)]


def _limit(staff: Staff) -> float:
    return max(APPROVAL_LIMITS.get(r, 0.0) for r in staff.roles)


# ---- sessions --------------------------------------------------------------------------


def intake(w: World, ch: Channel) -> None:
    rng = w.rng
    if "agent" in ch.staff.roles and rng.random() < 0.25:
        product = rng.choice(PRODUCTS)
        low, high = COVERAGE[product]
        body = {
            "holder": w.person(),
            "product": product,
            "coverage_limit": float(round(rng.uniform(low, high), -3)),
            "deductible": float(rng.choice((0, 150, 250, 500))),
            "effective_from": (w.today() - timedelta(days=rng.randint(0, 3))).isoformat(),
        }
        body["effective_to"] = (
            date.fromisoformat(body["effective_from"]) + timedelta(days=365)
        ).isoformat()
        with ch.turn():
            if rng.random() < 0.12:  # the form sent without the holder's name
                ch.call("issue_policy", **{k: v for k, v in body.items() if k != "holder"})
            ch.call("issue_policy", **body)
    if "agent" in ch.staff.roles and rng.random() < 0.06:
        active = [p for p in w.office.policies.values() if p["status"] == "active"]
        if active:
            policy = rng.choice(active)
            with ch.turn():
                ch.call("get_policy", policy_id=policy["policy_id"])
                ch.call(
                    "cancel_policy",
                    policy_id=policy["policy_id"],
                    reason=rng.choice(
                        ("customer request", "non-payment of premium", "vehicle sold")
                    ),
                )
                if rng.random() < 0.3:  # clicked twice
                    ch.call(
                        "cancel_policy", policy_id=policy["policy_id"], reason="customer request"
                    )
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
        file_one(w, ch)
    if rng.random() < 0.1:  # an agent asks for something only adjusters do
        waiting = w.claims_in("filed", "under_review")
        if waiting and not {"adjuster", "senior_adjuster"} & set(ch.staff.roles):
            claim = rng.choice(waiting)
            with ch.turn():
                if claim["status"] == "filed":
                    ch.call("start_review", claim_number=claim["claim_number"])
                else:
                    ch.call(
                        "approve_claim",
                        claim_number=claim["claim_number"],
                        assessment_id=(claim.get("assessment_ids") or ["ASM-000000-1"])[-1],
                    )


def file_one(w: World, ch: Channel) -> None:
    rng = w.rng
    policies = list(w.office.policies.values())
    existing = list(w.office.claims.values())
    with ch.turn():
        if existing and rng.random() < 0.05:  # the customer phoned twice about one incident
            other = rng.choice(existing)
            ch.call(
                "file_claim",
                policy_id=other["policy_id"],
                claimant=other["claimant"],
                incident_date=other["incident_date"],
                loss_type=other["loss_type"],
                claimed_amount=other["claimed_amount"],
                description="Reported again by phone",
            )
            return
        policy = rng.choice(policies)
        if ch.copilot is not None or rng.random() < 0.5:
            ch.call("get_policy", policy_id=policy["policy_id"])
        start, end = (
            date.fromisoformat(policy["effective_from"]),
            date.fromisoformat(policy["effective_to"]),
        )
        latest = min(end, w.today())
        if rng.random() < 0.05 or latest < start:  # an incident from before the cover began
            incident = start - timedelta(days=rng.randint(1, 40))
        else:
            incident = latest - timedelta(days=rng.randint(0, min(45, (latest - start).days)))
        low, high = AMOUNT_RANGES[policy["product"]]
        amount = round(min(high, low * (high / low) ** (rng.random() ** 1.6)), 2)
        if policy["product"] in ("motor", "travel") and rng.random() < 0.1:
            # a total loss or a long hospital stay: more than the sum insured
            amount = round(policy["coverage_limit"] * rng.uniform(1.05, 1.4), 2)
        body = {
            "policy_id": policy["policy_id"],
            "claimant": policy["holder"],
            "incident_date": incident.isoformat(),
            "loss_type": rng.choice(LOSS_TYPES[policy["product"]]),
            "claimed_amount": amount,
            "description": rng.choice(
                (
                    "Reported by phone",
                    "Photos attached",
                    "Police report filed",
                    "Customer visited branch",
                    "Submitted via broker",
                )
            ),
        }
        roll = rng.random()
        if roll < 0.08:  # a form with a mistake, then the corrected form
            broken = dict(body)
            mistake = rng.choice(
                ("missing_date", "bad_date", "bad_amount", "wrong_loss", "missing_claimant")
            )
            if mistake == "missing_date":
                broken.pop("incident_date")
            elif mistake == "bad_date":
                broken["incident_date"] = incident.strftime("%d/%m/%Y")
            elif mistake == "bad_amount":
                broken["claimed_amount"] = rng.choice(
                    (-amount, 0, f"{amount:,.2f}".replace(",", " "))
                )
            elif mistake == "wrong_loss":
                other = [p for p in PRODUCTS if p != policy["product"]]
                broken["loss_type"] = LOSS_TYPES[rng.choice(other)][0]
                if broken["loss_type"] in LOSS_TYPES[policy["product"]]:
                    broken["loss_type"] = "earthquake"
            else:
                broken.pop("claimant")
            ch.call("file_claim", **broken)
        elif roll < 0.11:  # a mistyped policy id
            wrong = dict(body)
            wrong["policy_id"] = policy["policy_id"][:-4] + "".join(
                rng.choice("0123456789abcdef") for _ in range(4)
            )
            status, _ = ch.call("file_claim", **wrong)
            if status != 404:
                return
        status, answer = ch.call("file_claim", **body)
        if status == 201 and rng.random() < 0.08:  # the page hung; submitted again
            ch.call("file_claim", **body)


def review(w: World, ch: Channel) -> None:
    rng = w.rng
    with ch.turn():
        status, listing = ch.call("search_claims", status="filed", limit=10)
    items = listing["items"] if status == 200 else []
    for item in items[: rng.choice((1, 2, 2, 3))]:
        number = item["claim_number"]
        with ch.turn():
            if rng.random() < 0.05:  # assessing before taking the claim into review
                ch.call(
                    "record_assessment",
                    claim_number=number,
                    assessed_amount=item["claimed_amount"],
                    recommendation="approve",
                )
            ch.call("start_review", claim_number=number)
        claim = w.office.claims[number]
        policy = w.office.policies[claim["policy_id"]]
        recommendation = "approve" if rng.random() < 0.85 else "reject"
        amount = claim["claimed_amount"]
        if amount > policy["coverage_limit"]:
            pass  # assessed at the claimed amount first; the API says where the cover ends
        elif recommendation == "approve" and rng.random() < 0.55:
            amount = round(amount * rng.uniform(0.55, 0.98), 2)
        elif policy["deductible"] and rng.random() < 0.5:
            amount = max(round(amount - policy["deductible"], 2), 50.0)
        with ch.turn():
            if rng.random() < 0.03:  # the recommendation typed wrong
                ch.call(
                    "record_assessment",
                    claim_number=number,
                    assessed_amount=amount,
                    recommendation="approved",
                )
            status, assessment = ch.call(
                "record_assessment",
                claim_number=number,
                assessed_amount=amount,
                recommendation=recommendation,
                notes=rng.choice(
                    ("Site visit done", "Invoices checked", "Desk assessment", "Expert report")
                ),
            )
            if status == 422:  # over the cover: assess at the coverage limit
                status, assessment = ch.call(
                    "record_assessment",
                    claim_number=number,
                    assessed_amount=policy["coverage_limit"],
                    recommendation=recommendation,
                    notes="Capped at cover",
                )
            if status == 201 and rng.random() < 0.08:  # a revised valuation
                status, assessment = ch.call(
                    "record_assessment",
                    claim_number=number,
                    assessed_amount=round(amount * rng.uniform(0.85, 1.1), 2),
                    recommendation=recommendation,
                    notes="Revised after invoice",
                )
        if status != 201:
            continue
        if recommendation == "reject" and rng.random() < 0.7:
            with ch.turn():
                ch.call(
                    "reject_claim",
                    claim_number=number,
                    reason=rng.choice(("Not covered", "Pre-existing damage", "Late notification")),
                )
        elif recommendation == "approve" and rng.random() < 0.06:  # approving one's own assessment
            with ch.turn():
                ch.call(
                    "approve_claim", claim_number=number, assessment_id=assessment["assessment_id"]
                )


def approval(w: World, ch: Channel) -> None:
    rng = w.rng
    me, limit = ch.staff.user_id, _limit(ch.staff)
    with ch.turn():
        status, listing = ch.call("search_claims", status="under_review", limit=20)
    items = [c for c in (listing["items"] if status == 200 else []) if c["assessments"]]
    rng.shuffle(items)
    done = 0
    for item in items:
        if done >= rng.choice((2, 3, 4)):
            break
        number = item["claim_number"]
        current = [a for a in item["assessments"] if a["status"] == "current"]
        if not current:
            continue
        assessment = current[-1]
        own = me in (item["filed_by"], assessment["assessor"])
        over = assessment["assessed_amount"] > limit
        if own and rng.random() > 0.12:
            continue  # they know the four-eyes rule and leave it
        if over and not own and rng.random() > 0.3:
            continue  # they know their limit and leave it for someone senior
        done += 1
        with ch.turn():
            if ch.copilot is not None or rng.random() < 0.6:
                ch.call("get_claim", claim_number=number)
            if assessment["recommendation"] == "reject":
                ch.call(
                    "reject_claim",
                    claim_number=number,
                    reason=rng.choice(("Not covered", "Fraud indicators", "Exclusion applies")),
                )
                continue
            if rng.random() < 0.03:  # the form sent without choosing the assessment
                ch.call("approve_claim", claim_number=number)
            superseded = [a for a in item["assessments"] if a["status"] == "superseded"]
            if superseded and rng.random() < 0.5:  # picked the old valuation
                ch.call(
                    "approve_claim",
                    claim_number=number,
                    assessment_id=superseded[0]["assessment_id"],
                )
            ch.call("approve_claim", claim_number=number, assessment_id=assessment["assessment_id"])
    if rng.random() < 0.12:  # a stale list: the claim was already decided
        decided = w.claims_in("approved", "rejected", "paid", "filed")
        if decided:
            claim = rng.choice(decided)
            with ch.turn():
                ch.call(
                    "approve_claim",
                    claim_number=claim["claim_number"],
                    assessment_id=(
                        claim.get("assessment_ids") or [f"ASM-{claim['claim_number'][-6:]}-1"]
                    )[-1],
                )


def payment(w: World, ch: Channel) -> None:
    rng = w.rng
    me = ch.staff.user_id
    with ch.turn():
        status, listing = ch.call("search_claims", status="approved", limit=20)
    items = listing["items"] if status == 200 else []
    for item in items[: rng.choice((2, 3, 4))]:
        number = item["claim_number"]
        if item.get("approved_by") == me and rng.random() > 0.5:
            continue  # they remember they approved it
        payee = iban(rng)
        with ch.turn():
            ch.call("get_claim", claim_number=number)
            amount = item["approved_amount"]
            roll = rng.random()
            if roll < 0.09 and item["claimed_amount"] != amount:  # typed the claimed amount
                ch.call(
                    "issue_payout",
                    claim_number=number,
                    amount=item["claimed_amount"],
                    payee_iban=payee,
                )
            elif roll < 0.12:  # a typo in the amount
                ch.call(
                    "issue_payout",
                    claim_number=number,
                    amount=round(amount * 10, 2),
                    payee_iban=payee,
                )
            elif roll < 0.15:  # the IBAN left out
                ch.call("issue_payout", claim_number=number, amount=amount, payee_iban="")
            status, payout = ch.call(
                "issue_payout", claim_number=number, amount=amount, payee_iban=payee
            )
            if status == 201 and rng.random() < 0.2:
                ch.call("get_payout", payout_id=payout["payout_id"])
    if rng.random() < 0.12:  # paying a claim again, or one that was never approved
        stale = w.claims_in("paid", "rejected", "under_review")
        if stale:
            claim = rng.choice(stale)
            with ch.turn():
                ch.call(
                    "issue_payout",
                    claim_number=claim["claim_number"],
                    amount=claim.get("approved_amount") or claim["claimed_amount"],
                    payee_iban=iban(rng),
                )
    if rng.random() < 0.08:  # closing a paid claim is the adjuster's job
        paid = w.claims_in("paid")
        if paid and not {"adjuster", "senior_adjuster", "claims_manager"} & set(ch.staff.roles):
            with ch.turn():
                ch.call("close_claim", claim_number=rng.choice(paid)["claim_number"])


def closing(w: World, ch: Channel) -> None:
    rng = w.rng
    with ch.turn():
        _, paid = ch.call("search_claims", status="paid", limit=10)
        _, rejected = ch.call("search_claims", status="rejected", limit=10)
    items = paid.get("items", []) + rejected.get("items", [])
    rng.shuffle(items)
    for item in items[: rng.choice((2, 3, 4, 5))]:
        with ch.turn():
            ch.call("close_claim", claim_number=item["claim_number"])
    if rng.random() < 0.12:  # closing a claim still in review
        open_ = w.claims_in("under_review", "approved")
        if open_:
            with ch.turn():
                ch.call("close_claim", claim_number=rng.choice(open_)["claim_number"])
    if rng.random() < 0.03:  # an adjuster tries to release the money
        approved = w.claims_in("approved")
        if approved and "finance" not in ch.staff.roles:
            claim = rng.choice(approved)
            with ch.turn():
                ch.call(
                    "issue_payout",
                    claim_number=claim["claim_number"],
                    amount=claim["approved_amount"],
                    payee_iban=iban(rng),
                )


SESSIONS = {
    "intake": (intake, {"agent": 0.85, "adjuster": 0.1, "senior_adjuster": 0.05}),
    "review": (review, {"adjuster": 0.75, "senior_adjuster": 0.25}),
    "approval": (approval, {"adjuster": 0.35, "senior_adjuster": 0.4, "claims_manager": 0.25}),
    "payment": (payment, {"finance": 1.0}),
    "closing": (closing, {"adjuster": 0.6, "senior_adjuster": 0.2, "claims_manager": 0.2}),
}


def pick_session(w: World) -> tuple[str, Staff]:
    rng = w.rng
    weights = {
        "intake": 3.0,
        "review": min(4.0, 0.5 * len(w.claims_in("filed"))),
        "approval": min(4.0, 0.5 * len(w.assessed())),
        "payment": min(4.0, 0.6 * len(w.claims_in("approved"))),
        "closing": min(2.0, 0.25 * len(w.claims_in("paid", "rejected"))),
    }
    kind = rng.choices(list(weights), weights=list(weights.values()))[0]
    roles = SESSIONS[kind][1]
    role = rng.choices(list(roles), weights=list(roles.values()))[0]
    if kind == "payment" and rng.random() < 0.45:
        people = [s for s in STAFF if "finance" in s.roles and len(s.roles) > 1]
    elif kind == "approval" and role == "senior_adjuster":
        people = _people("senior_adjuster")
    else:
        people = [s for s in STAFF if role in s.roles and (len(s.roles) == 1 or kind != "payment")]
    return kind, rng.choice(people)


def run_sessions(sessions: int, seed: int, out: str | Path) -> dict[str, Any]:
    """Play ``sessions`` sessions; write traces.jsonl, claims.jsonocel, claims.xes, truth.json."""
    from simgym.real.claims.ocel import write_ocel
    from simgym.real.claims.xes import write_xes

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    world = World(seed, out)
    world.seed_policies(36)
    stale_tokens: dict[str, str] = {}
    copilot_sessions = 0
    try:
        for _ in range(sessions):
            world.next_session_start()
            kind, staff = pick_session(world)
            copilot = world.rng.random() < (0.45 if kind in ("intake", "review") else 0.4)
            copilot_sessions += copilot
            session_id = "s_" + "".join(world.rng.choice("0123456789abcdef") for _ in range(20))
            channel = Channel(world, staff, copilot, session_id)
            # now and then the browser still holds last session's expired token
            if staff.user_id in stale_tokens and not copilot and world.rng.random() < 0.08:
                world.office.revoke_token(channel.token)
                channel.token = stale_tokens[staff.user_id]
            world.sessions_by_kind[kind] += 1
            SESSIONS[kind][0](world, channel)
            world.office.revoke_token(channel.token)
            stale_tokens[staff.user_id] = channel.token
    finally:
        world.close()
    write_ocel(world.office, out / "claims.jsonocel")
    write_xes(world.office, out / "claims.xes")
    rules = truth()
    rules["run"] = {
        "seed": seed,
        "sessions": sessions,
        "copilot_sessions": copilot_sessions,
        "sessions_by_kind": dict(sorted(world.sessions_by_kind.items())),
        "http_calls": world.calls,
        "statuses": {str(k): v for k, v in sorted(world.statuses.items())},
        "refusals_by_code": dict(sorted(world.codes.items())),
        "journal_events": len(world.office.journal),
        "spans": world.sink.spans,
    }
    (out / "truth.json").write_text(json.dumps(rules, indent=1) + "\n", encoding="utf-8")
    summary = dict(rules["run"])
    summary["files"] = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
    return summary
