"""The mcp generator: the bundled customer-records MCP server on a database seeded afresh
for each episode; programs search, read, update emails (valid, invalid, taken), open
tickets and ask about customers that do not exist.
"""

from __future__ import annotations

import random
from typing import Any

from simgym.core.types import Task
from simgym.data.factory.common import (
    FIRST_NAMES,
    LAST_NAMES,
    EpisodePlan,
    FactoryError,
    Program,
    _call,
    _email,
    _length,
    _weighted,
)
from simgym.data.factory.context import FactoryContext

TICKET_SUBJECTS = (
    "Card declined at a petrol station",
    "Wrong address on the last statement",
    "Cannot log in to online banking",
    "Question about an international transfer fee",
    "Request a higher card limit",
    "Duplicate charge from an online shop",
    "Close the savings account",
    "Update the phone number on file",
)


def records_state(seed: int) -> dict[str, list[dict[str, Any]]]:
    """The records server's initial data for ``seed``, in the layout the dev set's mcp
    scenarios give the simulator (accounts as the tools show them: balance in EUR)."""
    from simgym.real.mcp_servers.records import CURRENCY, seed_rows

    rows = seed_rows(seed)
    customers = [
        dict(zip(("id", "name", "email", "phone", "city", "tier", "joined"), r, strict=True))
        for r in rows["customers"]
    ]
    accounts = [
        {
            "id": r[0],
            "customer_id": r[1],
            "kind": r[2],
            "balance": r[3] / 100,
            "currency": CURRENCY,
            "status": r[4],
            "opened": r[5],
        }
        for r in rows["accounts"]
    ]
    tickets = [
        dict(zip(("id", "customer_id", "subject", "status", "priority", "created"), r, strict=True))
        for r in rows["tickets"]
    ]
    return {"customers": customers, "accounts": accounts, "tickets": tickets}


def plan_mcp(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    if context.mcp_scenario is None:
        raise FactoryError("the mcp generator needs the records server's tools (FactoryContext)")
    from simgym.real.mcp_servers.records import answer_order

    db_seed = rng.randrange(1, 1_000_000)
    state = answer_order(records_state(db_seed))  # fields in the order answers show them
    scenario = dict(context.mcp_scenario)
    scenario["output_format"] = rng.choices(("mcp", "json", "text"), (6, 3, 1))[0]
    scenario["state"] = state
    customer = rng.choice(state["customers"])
    instruction = rng.choice(
        (
            f"{customer['name']} called: how much money do they have, and is anything blocked?",
            f"{customer['name']} has a new email address, {_email(rng, customer['name'])}; "
            "update it.",
            f"Open a ticket for {customer['name']}: {rng.choice(TICKET_SUBJECTS).lower()}.",
            "Work through the support queue: check open tickets of a few customers.",
            f"Does a customer called {rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)} exist?",
            f"Which tickets does {customer['name']} have open?",
        )
    )
    length = _length(rng)
    program_seed = rng.getrandbits(64)

    def program(first: str) -> Program:
        return _mcp_program(random.Random(program_seed), state, customer["id"], length)

    task = Task(id=plan_id, instruction=instruction, domain="mcp", scenario=scenario)
    return EpisodePlan(plan_id, "mcp", 0, task, program, length, setup={"db_seed": db_seed})


def _mcp_program(
    rng: random.Random, state: dict[str, list[dict[str, Any]]], focus: str, length: int
) -> Program:
    customers = {c["id"]: dict(c) for c in state["customers"]}
    emails = {c["email"] for c in customers.values()}
    moves = {"search": 22.0, "get": 14.0, "accounts": 14.0, "tickets": 14.0, "create": 9.0,
             "update": 7.0, "bad_email": 4.0, "taken_email": 3.0, "unknown": 7.0,
             "no_match": 4.0}  # fmt: skip
    current = focus
    for step in range(length):
        kind = "search" if step == 0 else _weighted(rng, moves)
        if rng.random() < 0.3:
            current = rng.choice(sorted(customers))
        person = customers[current]
        if kind == "search":
            first, _, last = person["name"].partition(" ")
            query = rng.choice(
                (first, last, person["name"].lower(), person["email"].split("@")[0],
                 person["phone"][-7:], person["phone"].replace(" ", "")[-6:], first[:3].lower())
            )  # fmt: skip
            arguments: dict[str, Any] = {"query": query}
            if rng.random() < 0.25:
                arguments["limit"] = rng.randint(1, 5)
            yield _call("search_customers", **arguments)
        elif kind == "get":
            yield _call("get_customer", customer_id=current)
        elif kind == "accounts":
            yield _call("list_accounts", customer_id=current)
        elif kind == "tickets":
            arguments = {"customer_id": current}
            if rng.random() < 0.4:
                arguments["status"] = rng.choice(("open", "pending", "closed"))
            yield _call("list_tickets", **arguments)
        elif kind == "create":
            arguments = {"customer_id": current, "subject": rng.choice(TICKET_SUBJECTS)}
            if rng.random() < 0.6:
                arguments["priority"] = rng.choice(("low", "normal", "high"))
            yield _call("create_ticket", **arguments)
        elif kind == "update":
            email = _email(rng, person["name"])
            if email not in emails:
                emails.discard(person["email"])
                emails.add(email)
                person["email"] = email
            yield _call("update_email", customer_id=current, email=email)
        elif kind == "bad_email":
            bad = rng.choice(
                ("not-an-email", f"{person['name'].split()[0]}@", "ana@@example.com", "x@y")
            )
            yield _call("update_email", customer_id=current, email=bad)
        elif kind == "taken_email":
            other = rng.choice([c for c in customers.values() if c["id"] != current])
            yield _call("update_email", customer_id=current, email=other["email"])
        elif kind == "unknown":
            missing = f"C-{rng.randint(2000, 9999)}"
            tool = rng.choice(("get_customer", "list_accounts", "list_tickets", "create_ticket"))
            arguments = {"customer_id": missing}
            if tool == "create_ticket":
                arguments["subject"] = rng.choice(TICKET_SUBJECTS)
            yield _call(tool, **arguments)
        else:
            yield _call(
                "search_customers", query=rng.choice(("zzz", "Smith", "nobody", "+44 20", "Lisbon"))
            )
    return rng.choice(
        (
            "Done: the customer's records are up to date.",
            "I checked the accounts; see the results above.",
            "The ticket is open.",
            "No such customer.",
        )
    )
