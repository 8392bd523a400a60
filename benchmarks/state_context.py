"""Prompt size and prefix reuse of the two context modes over a 100-turn episode.

    .venv/bin/python benchmarks/state_context.py [--turns 100] [--context-turns 4]

``history`` sends every earlier turn (the Qwen-AgentWorld contract), so the prompt grows
with the episode but each request repeats the previous one as a prefix, which server-side
prefix caches (vLLM, SGLang, llama.cpp) reuse. ``state`` sends the system prompt, the last
k turns and the current hidden state, so the prompt stays bounded, but the sliding window
and the changing state break the shared prefix right after the system prompt. This prints
both, measured on the same scripted episodes (a terminal session that writes a file every
third turn, an MCP session that updates a record every third call): prompt tokens per
request (counted with the embedded model's tokenizer) and the share of each request that
repeats the previous request as a prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable

from results import save
from rich.console import Console
from rich.table import Table

import simgym


def tokenizer() -> tuple[str, Callable[[str], int]]:
    """The embedded model's tokenizer (vocabulary only), or ~4 characters a token."""
    from simgym.worldmodels.local import embedded_model_path

    path = embedded_model_path()
    try:
        from llama_cpp import Llama

        llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
        return "SmolLM2 tokens", lambda text: len(llm.tokenize(text.encode(), add_bos=False))
    except Exception:  # no llama-cpp-python: estimate
        return "chars/4", lambda text: len(text) // 4


def chat_text(messages) -> str:
    """The prompt as a ChatML chat template lays it out (what a server's cache sees)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def terminal_world(turn: int) -> tuple[object, str]:
    if turn % 3 == 0:
        name, value = f"notes-{turn % 7}.txt", f"entry {turn}"
        action = f"echo '{value}' > {name}"
        patch = {"files": {f"/home/dev/{name}": value + "\n"}}
        screen = f"dev@devbox:~$ {action}\ndev@devbox:~$"
    else:
        action = "ls -la" if turn % 2 else f"tail -n 3 build-{turn}.log"
        patch = {}
        lines = [f"-rw-r--r-- 1 dev dev {100 + i * turn} Dec  3 notes-{i}.txt" for i in range(4)]
        screen = "dev@devbox:~$ " + action + "\n" + "\n".join(lines) + "\ndev@devbox:~$"
    return action, f"<predicted_observation>{screen}</predicted_observation>" + (
        f"<state_update>{json.dumps(patch)}</state_update>"
    )


def mcp_world(turn: int) -> tuple[object, str]:
    if turn % 3 == 0:
        email = f"ben{turn}@example.org"
        action = {"name": "update_email", "arguments": {"customer_id": "C-1002", "email": email}}
        patch = {
            "customers": [{"id": "C-1001", "name": "Ana Lima"}, {"id": "C-1002", "email": email}]
        }
        body = {"id": "C-1002", "email": email, "updated": True}
    else:
        action = {"name": "get_customer", "arguments": {"customer_id": "C-1001"}}
        patch = {}
        body = {"id": "C-1001", "name": "Ana Lima", "email": "ana.lima@example.com", "tier": "gold"}
    return action, (
        f"<predicted_observation>{json.dumps(body)}</predicted_observation>"
        f"<state_update>{json.dumps(patch)}</state_update>"
    )


async def measure(domain: str, world, context: str, turns: int, k: int, count) -> dict:
    prompts: list[str] = []
    step = {"n": 0}

    def respond(messages):
        prompts.append(chat_text(messages))
        return world(step["n"])[1]

    env = simgym.make(
        domain,
        world_model=simgym.FunctionWorldModel(respond),
        context=context,
        context_turns=k,
        max_turns=turns + 1,
        validation_retries=0,
    )
    await env.reset("Keep working on the machine.")
    for turn in range(1, turns + 1):
        step["n"] = turn
        await env.step(world(turn)[0])
    await env.close()
    tokens = [count(p) for p in prompts]
    shares = [
        len(os.path.commonprefix([prev, cur])) / len(cur)
        for prev, cur in zip(prompts, prompts[1:], strict=False)
    ]
    applied = sum(
        1 for t in env.trajectory.turns if t.state_patch is not None and not t.state_error
    )
    return {
        "domain": domain,
        "context": context,
        "first": tokens[0],
        "t10": tokens[min(9, len(tokens) - 1)],
        "t50": tokens[min(49, len(tokens) - 1)],
        "last": tokens[-1],
        "max": max(tokens),
        "total": sum(tokens),
        "reuse": sum(shares) / len(shares),
        "updates": applied,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--context-turns", type=int, default=4)
    args = parser.parse_args()
    unit, count = tokenizer()
    rows = [
        asyncio.run(measure(domain, world, context, args.turns, args.context_turns, count))
        for domain, world in (("terminal", terminal_world), ("mcp", mcp_world))
        for context in ("history", "state")
    ]
    table = Table(
        title=f"prompt per request over a {args.turns}-turn episode ({unit}); "
        f"state mode keeps {args.context_turns} turns"
    )
    for column in (
        "domain",
        "context",
        "turn 1",
        "turn 10",
        "turn 50",
        f"turn {args.turns}",
        "max",
        "total",
        "prefix reuse",
        "state updates applied",
    ):
        table.add_column(column, justify="left" if column in ("domain", "context") else "right")
    for r in rows:
        table.add_row(
            r["domain"],
            r["context"],
            str(r["first"]),
            str(r["t10"]),
            str(r["t50"]),
            str(r["last"]),
            str(r["max"]),
            str(r["total"]),
            f"{r['reuse']:.1%}",
            str(r["updates"]),
        )
    Console(width=160).print(table)
    save(
        "state_context",
        rows=[
            {
                "domain": r["domain"],
                "context": r["context"],
                "turn_1": r["first"],
                "turn_10": r["t10"],
                "turn_50": r["t50"],
                f"turn_{args.turns}": r["last"],
                "max": r["max"],
                "total": r["total"],
                "prefix_reuse": r["reuse"],
                "state_updates_applied": r["updates"],
            }
            for r in rows
        ],
        summary={"turns": args.turns, "context_turns": args.context_turns, "unit": unit},
        notes=f"Prompt size per request ({unit}) over one scripted episode; "
        "prefix reuse is the share of each prompt equal to the previous one's start.",
    )


if __name__ == "__main__":
    main()
