"""How many turns the mcp grounding alone gets right against the real records server,
for a tool world written the way a user writes one: the tools as ``simgym mcp import``
lists them, the server's seed records as the state, and no ``tool_map``.

    .venv/bin/python benchmarks/mcp_inferred.py [--show] [--format mcp|json]

A long support-desk sequence (searches, lookups, lists by customer, mixed-case email
changes, tickets, calls that break the input schema, missing ids, read-backs) runs twice:
on the real server (:mod:`simgym.real.mcp_servers.records`, seeded from the same state,
with ``simulate_invalid_actions`` so calls that break the schema reach it) and through
the mcp domain's grounding, teacher-forced the way ``benchmarks/grounding_devset.py``
replays episodes: before each call the domain grounds it against the ledger, then the
ledger takes the grounding's certain effects and learns from the real answer (the
``observe`` hook), as it would from a world model that answered right.

Each turn is counted as ``exact`` (the grounding computed the whole answer and it equals
the server's, comparing JSON parsed: the envelope and the JSON text inside it),
``guessed`` (a refusal the tool's description or schemas make certain, in simgym's
default wording, which the server words otherwise: the refusal is right, its message is
not; the turn's facts say the wording is guessed), ``wrong`` (it computed one that
differs otherwise: strict mode would serve a wrong answer) or ``model`` (no exact answer:
the world model renders it, with the grounding's facts). ``--show`` prints every turn
that is not ``exact``. The tools carry the server's output schemas, as ``simgym mcp
import`` reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from results import save

import simgym
import simgym.real.mcp  # noqa: F401  (registers the real-mcp backend)
from simgym.core.errors import ActionError
from simgym.core.state import apply_patch
from simgym.core.types import Action
from simgym.domains.mcp_ground import WORDING_GUESSED
from simgym.real.mcp import RealMCP
from simgym.real.mcp_import import scenario_from_server
from simgym.real.mcp_servers.records import RecordsStore, build_server

MCP = simgym.get_domain("mcp")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


SEQUENCE = [
    call("search_customers", query="ana"),
    call("search_customers", query="TANAKA"),
    call("search_customers", query="913 671"),
    call("search_customers", query="example.org"),
    call("search_customers", query="zzz"),
    call("search_customers", query="o", limit=3),
    call("get_customer", customer_id="C-1008"),
    call("list_accounts", customer_id="C-1008"),
    call("list_tickets", customer_id="C-1008"),
    call("create_ticket", customer_id="C-1008", subject="Card declined at a shop", priority="high"),
    call("list_tickets", customer_id="C-1008"),
    call("get_customer", customer_id="C-1009"),
    call("update_email", customer_id="C-1009", email="Ivan.Rossi@NewMail.example.com"),
    call("get_customer", customer_id="C-1009"),
    call("search_customers", query="newmail"),
    call("update_email", customer_id="C-1009", email="not-an-email"),
    call("get_customer", customer_id="C-1009"),
    call("get_customer", customer_id="1009"),
    call("get_customer", customer_id="C-9999"),
    call("list_accounts", customer_id="C-1999"),
    call("search_customers", query="kemi"),
    call("list_accounts", customer_id="C-1012"),
    call("list_tickets", customer_id="C-1012", status="open"),
    call("create_ticket", customer_id="C-1012", subject="Unfreeze the checking account"),
    call("create_ticket", customer_id="C-1012", subject="x" * 130),
    call("create_ticket", customer_id="C-1012", subject="Lost card", priority="urgent"),
    call("search_customers", query=""),
    call("search_customers", query="a", limit=99),
    call("update_email", customer_id="C-1012", email="Kemi@Example.org"),
    call("update_email", customer_id="C-1001", email="kemi@example.org"),
    call("get_customer", customer_id="C-1012"),
    call("list_tickets", customer_id="C-1012"),
    call("get_customer"),
    call("get_customer", customer_id=1012),
    call("search_customers", query="haddad"),
    call("get_customer", customer_id="C-1006"),
    call("list_accounts", customer_id="C-1006"),
    call("list_tickets", customer_id="C-1006", status="closed"),
    call("list_tickets", customer_id="C-1006", status="bogus"),
    call("update_email", customer_id="C-1006", email="  Marco.H@Example.com "),
    call("get_customer", customer_id="C-1006"),
    call("search_customers", query="marco.h@"),
    call("create_ticket", customer_id="C-9999", subject="Test ticket"),
    call("list_tickets", customer_id="C-1001"),
    call("get_customer", customer_id="C-1001"),
    call("update_email", customer_id="C-12", email="a@b.com"),
    call("search_customers", query="+351 91", limit=5),
    call("list_accounts", customer_id="C-1002"),
    call("get_customer", customer_id="C-1002"),
    call("update_email", customer_id="C-1002", email="ben.okafor@example.org"),
    call("search_customers", query="okafor"),
    call("get_customer", customer_id="C-1002"),
]


async def user_scenario(output_format: str = "mcp") -> dict[str, Any]:
    """The records server's tools as ``simgym mcp import`` lists them, its seed records
    as the state, no tool map."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "records.db"
        scenario = await scenario_from_server(server=build_server(db), output_format=output_format)  # type: ignore[arg-type]
        scenario["state"] = RecordsStore(db).snapshot()
    scenario["simulate_invalid_actions"] = True
    return scenario


async def real_answers(scenario: dict[str, Any], actions: list[dict[str, Any]]) -> list[str]:
    env = simgym.make(
        "mcp",
        world_model=RealMCP(seed_from_scenario=True),
        scenario=scenario,
        max_turns=len(actions) + 1,
    )
    await env.reset("the support shift")
    answers = [(await env.step(action)).observation.text for action in actions]
    await env.close()
    return answers


def parsed(text: str, fmt: str) -> Any:
    """An answer as data: the envelope with the JSON text inside it parsed too."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if fmt == "mcp" and isinstance(value, dict):
        content = []
        for part in value.get("content") or []:
            inner = part.get("text") if isinstance(part, dict) else None
            try:
                content.append(json.loads(inner) if isinstance(inner, str) else inner)
            except ValueError:
                content.append(inner)
        return {"content": content, "isError": value.get("isError", False)}
    return value


def failed(text: str) -> bool:
    """Whether an answer is an error (the envelope's flag, or a json error object)."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and (value.get("isError") is True or set(value) == {"error"})


def placeholder(fmt: str) -> str:
    """What a world model that knows nothing writes: an empty success."""
    return (
        '{"content": [{"type": "text", "text": "{}"}], "isError": false}' if fmt == "mcp" else "{}"
    )


def grounded(
    scenario: dict[str, Any], actions: list[dict], real: list[str], learn: str = "real"
) -> list[dict]:
    """Each turn's verdict: the grounding's exact answer against the real one. The
    ledger learns from the real answer (``learn="real"``, teacher forcing) or from what
    the simulation served (``"sim"``: the exact answer, else an empty success, as from a
    world model that knows nothing)."""
    world = MCP.scenario(scenario)
    fmt = world.output_format
    state = MCP.initial_state(world)
    rows = []
    for action, answer in zip(actions, real, strict=True):
        try:
            parsed_action = MCP.validate_action(Action.parse(action), world)
        except ActionError:
            parsed_action = None  # sent to the model as typed: nothing grounds it
        grounding = MCP.ground(parsed_action, state, world) if parsed_action else None
        exact = grounding.observation if grounding is not None else None
        if exact is None:
            verdict = "model"
        elif parsed(exact, fmt) == parsed(answer, fmt):
            verdict = "exact"
        elif WORDING_GUESSED in grounding.facts and failed(exact) and failed(answer):
            verdict = "guessed"
        else:
            verdict = "wrong"
        rows.append(
            {
                "action": action,
                "verdict": verdict,
                "exact": exact,
                "real": answer,
                "facts": grounding.facts if grounding else [],
            }
        )
        if grounding is not None and grounding.effects:
            state = apply_patch(state, grounding.effects)
        if learn == "sim":
            answer = exact if exact is not None else placeholder(fmt)
        if parsed_action is not None:
            learned = MCP.observe(answer, parsed_action, state)
            if learned:
                state = apply_patch(state, learned)
    return rows


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print the turns not exact")
    parser.add_argument("--format", default="mcp", choices=["mcp", "json"])
    parser.add_argument(
        "--learn-from",
        default="real",
        choices=["real", "sim"],
        help="what the ledger learns each answer's layout from: the real answer (teacher "
        "forcing) or what the simulation served (its exact answer, else an empty success)",
    )
    args = parser.parse_args(argv)
    scenario = await user_scenario(args.format)
    real = await real_answers(scenario, SEQUENCE)
    rows = grounded(scenario, SEQUENCE, real, args.learn_from)
    counts = {
        k: sum(r["verdict"] == k for r in rows) for k in ("exact", "guessed", "wrong", "model")
    }
    for n, row in enumerate(rows, 1):
        if args.show and row["verdict"] != "exact":
            print(f"--- {n} {row['verdict']}: {json.dumps(row['action'])}")
            print(f"    real:  {row['real'][:300]}")
            if row["exact"] is not None:
                print(f"    exact: {row['exact'][:300]}")
            for fact in row["facts"][:4]:
                print(f"    fact:  {fact[:200]}")
    print(
        f"{len(rows)} turns ({args.format}, learning from {args.learn_from}): "
        f"{counts['exact']} exact and equal to the real "
        f"server, {counts['guessed']} refusals in guessed wording, {counts['wrong']} exact but "
        f"wrong, {counts['model']} left to the model"
    )
    save(
        "mcp_inferred",
        summary={"turns": len(rows), "format": args.format, "learn_from": args.learn_from} | counts,
        notes="mcp grounding alone against the real records server, for a tool world written "
        "as a user writes one (tools from `simgym mcp import`, seed records as state, no "
        "tool_map): exact = equal to the real server's answer.",
    )
    return 1 if counts["wrong"] else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
