"""Task sets for sim2real on the bundled customer-records MCP server.

Two disjoint sets, both generated deterministically:

* **held-out** (:func:`heldout_tasks`): tasks on the records the real server seeds by
  default (its demo bank, customers ``C-1001`` to ``C-1012``). They are only ever used for
  evaluation, on the real server and on its simulated twin.
* **training** (:func:`training_tasks`): the same kinds of task on other banks made by
  :func:`training_world` from a seed: other people, other ids (``C-2001`` on), other
  emails, so a policy trained on them has seen none of the held-out records.

Every task carries its world as an ``mcp`` scenario: the server's own tools as ``simgym mcp
import`` reads them, a ``tool_map`` that tells the twin's grounding how those tools touch
the records, and the records as ``state`` (rows as the database holds them). The real
backend seeds its database from that state (``RealMCP(seed_from_scenario=True)``), so the
real server and the twin start every episode from the same records.

Lookups are scored on the answer (``contains`` on a value only that customer has); updates
with ``state`` checks on the final records, which on the real server are its database read
back at the end. Each task's reference solution (``metadata["solution"]``) is a list of
actions for the scripted agent; it solves the task on the real server.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from simgym.core.sync import run_sync
from simgym.core.types import Task
from simgym.real.mcp_servers.records import TOOL_MAP, answer_order

DOMAIN = "mcp"
HELDOUT_SEED = 21  # picks the held-out tasks' customers and values; fixed forever
HELDOUT_PREFIX = "heldout-"
TRAIN_PREFIX = "train-"
FIRST_TRAIN_CUSTOMER = 2001  # training ids start here; the real demo bank ends at C-1012

# Training people share no first or last name with the real demo bank's pools.
TRAIN_FIRST = ("Aiko", "Bruno", "Carla", "Diego", "Emma", "Felix", "Greta", "Hugo", "Ines", "Jamal")
TRAIN_LAST = ("Andersen", "Costa", "Duarte", "Eriksen", "Fontaine", "Garcia", "Hoffmann", "Ito")
TRAIN_CITIES = ("Aveiro", "Evora", "Viseu", "Leiria", "Setubal")
TRAIN_DOMAINS = ("example.com", "example.org", "post.example.net")
SUBJECTS = (
    "Card blocked after three wrong PINs",
    "Request a new debit card",
    "Question about a standing order",
    "Update the mailing address",
    "Refund for a double charge",
    "Close the savings account",
)
NEW_EMAIL_DOMAINS = ("newmail.example.com", "inbox.example.org", "home.example.net")


# --- worlds --------------------------------------------------------------------------------


@cache
def server_tools() -> tuple[dict[str, Any], ...]:
    """The records server's tools, read from the server itself (what ``simgym mcp import``
    writes), once per process."""
    from simgym.real.mcp_import import scenario_from_server
    from simgym.real.mcp_servers.records import build_server

    with tempfile.TemporaryDirectory(prefix="simgym-s2r-") as tmp:
        scenario = run_sync(scenario_from_server(server=build_server(Path(tmp) / "r.db")))
    return tuple(scenario["tools"])


def heldout_world() -> dict[str, list[dict[str, Any]]]:
    """The real server's own demo records (its default seed), as table -> rows."""
    from simgym.real.mcp_servers.records import DEFAULT_SEED, RecordsStore

    with tempfile.TemporaryDirectory(prefix="simgym-s2r-") as tmp:
        return RecordsStore(Path(tmp) / "r.db", seed=DEFAULT_SEED).snapshot()


def training_world(seed: int) -> dict[str, list[dict[str, Any]]]:
    """A bank of 8 customers for training, a pure function of ``seed``; its people, ids
    and emails never occur in :func:`heldout_world`."""
    rng = random.Random(f"sim2real-train-{seed}")
    base = FIRST_TRAIN_CUSTOMER + 100 * (seed % 79)  # its own block of 4-digit ids
    customers, accounts, tickets = [], [], []
    names = rng.sample([f"{f} {last}" for f in TRAIN_FIRST for last in TRAIN_LAST], 8)
    for n, name in enumerate(names):
        cid = f"C-{base + n}"
        email = f"{name.lower().replace(' ', '.')}@{rng.choice(TRAIN_DOMAINS)}"
        customers.append(
            {
                "id": cid,
                "name": name,
                "email": email,
                "phone": f"+351 93{rng.randrange(10)} {rng.randrange(1000):03d} "
                f"{rng.randrange(1000):03d}",
                "city": rng.choice(TRAIN_CITIES),
                "tier": rng.choice(("basic", "silver", "gold")),
                "joined": f"20{rng.randrange(18, 25)}-{rng.randrange(1, 13):02d}-"
                f"{rng.randrange(1, 29):02d}",
            }
        )
        for kind in ("checking", *rng.sample(("savings", "credit_card"), rng.randrange(2))):
            accounts.append(
                {
                    "id": f"A-{base * 10 + len(accounts)}",
                    "customer_id": cid,
                    "kind": kind,
                    "balance_cents": rng.randrange(-90_000, 0)
                    if kind == "credit_card"
                    else rng.randrange(1_500_000),
                    "status": "active",
                    "opened": customers[-1]["joined"],
                }
            )
        if rng.random() < 0.5:
            tickets.append(
                {
                    "id": f"T-{base * 10 + len(tickets)}",
                    "customer_id": cid,
                    "subject": rng.choice(SUBJECTS),
                    "status": rng.choice(("open", "pending", "closed")),
                    "priority": rng.choice(("low", "normal", "high")),
                    "created": "2025-03-01T09:00:00Z",
                }
            )
    return {"customers": customers, "accounts": accounts, "tickets": tickets}


def scenario_for(state: dict[str, Any]) -> dict[str, Any]:
    """The ``mcp`` scenario of the records server holding ``state`` (in the order its
    answers show records)."""
    state = answer_order(state)
    return {
        "server_name": "customer-records",
        "description": "Customer records of a small bank's support desk: customers, "
        "accounts, tickets. Find a customer with search_customers, then pass their id "
        "(C-1001 style) to the other tools.",
        "output_format": "json",
        "tools": [dict(t) for t in server_tools()],
        "tool_map": TOOL_MAP,
        "state": state,
    }


# --- tasks -----------------------------------------------------------------------------------


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _new_email(rng: random.Random, person: dict[str, Any], taken: set[str]) -> str:
    first, last = person["name"].lower().split()[:2]
    while True:
        email = f"{first[0]}.{last}{rng.randrange(10, 99)}@{rng.choice(NEW_EMAIL_DOMAINS)}"
        if email not in taken:
            taken.add(email)
            return email


def _lookup(answer: str, solution: list[Any]) -> dict[str, Any]:
    return {"answer": answer, "reward": {"type": "contains"}, "solution": solution}


def checked_change(checks: list[dict[str, Any]], solution: list[Any]) -> dict[str, Any]:
    """A task's metadata for a change: scored with ``state`` checks, its plan beside."""
    return {"reward": {"type": "state", "checks": checks}, "solution": solution}


def _email_check(person: dict[str, Any], email: str) -> dict[str, Any]:
    return {"path": "customers", "record": {"id": person["id"], "email": email}}


def _ticket_check(person: dict[str, Any], subject: str, priority: str) -> dict[str, Any]:
    record = {"customer_id": person["id"], "subject": subject, "priority": priority}
    return {"path": "tickets", "record": record, "loose": True}


# Each kind: (instruction, metadata) for one customer. Lookups ask for a value only that
# customer has, so an answer cannot pass by guessing among a few common values.
Maker = Callable[[random.Random, dict[str, Any], set[str]], tuple[str, dict[str, Any]]]


def _email_by_id(rng: random.Random, p: dict[str, Any], taken: set[str]) -> tuple[str, Any]:
    solution = [_call("get_customer", customer_id=p["id"]), {"answer": p["email"]}]
    return f"What is the email address of customer {p['id']}?", _lookup(p["email"], solution)


def _phone_by_name(rng: random.Random, p: dict[str, Any], taken: set[str]) -> tuple[str, Any]:
    solution = [
        _call("search_customers", query=p["name"]),
        _call("get_customer", customer_id=p["id"]),
        {"answer": p["phone"]},
    ]
    return f"What phone number do we have on file for {p['name']}?", _lookup(p["phone"], solution)


def _email_by_name(rng: random.Random, p: dict[str, Any], taken: set[str]) -> tuple[str, Any]:
    solution = [_call("search_customers", query=p["name"]), {"answer": p["email"]}]
    return f"What is {p['name']}'s email address?", _lookup(p["email"], solution)


def _update_by_id(rng: random.Random, p: dict[str, Any], taken: set[str]) -> tuple[str, Any]:
    email = _new_email(rng, p, taken)
    solution = [_call("update_email", customer_id=p["id"], email=email), {"answer": "Done."}]
    text = f"Customer {p['id']} has a new email address, {email}. Update their record."
    return text, checked_change([_email_check(p, email)], solution)


def _update_by_name(rng: random.Random, p: dict[str, Any], taken: set[str]) -> tuple[str, Any]:
    email = _new_email(rng, p, taken)
    solution = [
        _call("search_customers", query=p["name"]),
        _call("update_email", customer_id=p["id"], email=email),
        {"answer": "Done."},
    ]
    text = f"{p['name']} asked us to change their email address to {email}."
    return text, checked_change([_email_check(p, email)], solution)


def _ticket(rng: random.Random, p: dict[str, Any], taken: set[str]) -> tuple[str, Any]:
    subject, priority = rng.choice(SUBJECTS), rng.choice(("low", "high"))
    solution = [
        _call("search_customers", query=p["name"]),
        _call("create_ticket", customer_id=p["id"], subject=subject, priority=priority),
        {"answer": "Done."},
    ]
    text = (
        f'Open a {priority}-priority support ticket for {p["name"]} with the subject "{subject}".'
    )
    return text, checked_change([_ticket_check(p, subject, priority)], solution)


def _email_and_ticket(rng: random.Random, p: dict[str, Any], taken: set[str]) -> tuple[str, Any]:
    email, subject = _new_email(rng, p, taken), rng.choice(SUBJECTS)
    solution = [
        _call("search_customers", query=p["name"]),
        _call("update_email", customer_id=p["id"], email=email),
        _call("create_ticket", customer_id=p["id"], subject=subject, priority="normal"),
        {"answer": "Done."},
    ]
    text = (
        f"{p['name']} has a new email address, {email}: update it, then open a "
        f'normal-priority ticket for them with the subject "{subject}".'
    )
    checks = [_email_check(p, email), _ticket_check(p, subject, "normal")]
    return text, checked_change(checks, solution)


# In this order a set's first tasks cover every kind, so a small --tasks still mixes them.
KINDS: dict[str, Maker] = {
    "email_by_id": _email_by_id,
    "update_by_id": _update_by_id,
    "phone_by_name": _phone_by_name,
    "ticket": _ticket,
    "email_by_name": _email_by_name,
    "update_by_name": _update_by_name,
    "email_and_ticket": _email_and_ticket,
}


def make_tasks(state: dict[str, Any], count: int, rng: random.Random, prefix: str) -> list[Task]:
    """``count`` tasks on the world ``state``, the kinds in turn, ids ``prefix000`` on."""
    people = state["customers"]
    names = [p["name"] for p in people]
    # a name search must find one customer, or "the" customer is ambiguous
    unique = [p for p in people if names.count(p["name"]) == 1]
    taken = {p["email"] for p in people}
    scenario = scenario_for(state)
    tasks = []
    for n in range(count):
        kind = list(KINDS)[n % len(KINDS)]
        person = rng.choice(unique)
        instruction, metadata = KINDS[kind](rng, person, taken)
        tasks.append(
            Task(
                id=f"{prefix}{n:03d}",
                domain=DOMAIN,
                instruction=instruction,
                scenario=scenario,
                metadata={"kind": kind, **metadata},
            )
        )
    return tasks


def heldout_tasks(count: int = 21) -> list[Task]:
    """The held-out evaluation tasks on the real server's demo records (first ``count``;
    the first n of a longer list are the same n tasks)."""
    return make_tasks(heldout_world(), count, random.Random(HELDOUT_SEED), HELDOUT_PREFIX)


def training_tasks(count: int = 70, *, seed: int = 0, per_world: int = 14) -> list[Task]:
    """Training tasks for the simulated twin: ``per_world`` tasks on each of the banks
    :func:`training_world` makes from ``seed``, ``seed + 1``, ...; never a held-out one."""
    tasks: list[Task] = []
    world = seed
    while len(tasks) < count:
        rng = random.Random(f"sim2real-tasks-{world}")
        size = min(per_world, count - len(tasks))
        tasks += make_tasks(training_world(world), size, rng, f"{TRAIN_PREFIX}w{world}-")
        world += 1
    return tasks


def task_line(task: Task) -> str:
    """One task as a JSONL line without its scenario (the world is regenerated)."""
    return json.dumps(
        {"id": task.id, "instruction": task.instruction, "metadata": task.metadata},
        ensure_ascii=False,
        sort_keys=True,
    )
