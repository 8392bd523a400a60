"""Step latency of the embedded world model with one llama.cpp context (slots=1, the old
path) and with a pool of slots that keep each live episode's evaluated prompt prefix,
measured side by side in one run on the default terminal scenario.

    .venv/bin/python benchmarks/local_latency.py [--slots 8] [--turns 12] [--old-turns N]
        [--adapter auto,path/to/other-adapter.gguf]

Three settings, grounding off unless named: ``old: slots=1``, ``new: slots=N``, and
``default: slots=N, strict`` (the embedded default as ``simgym play``/``run`` use it; strict
mode answers the steps the state determines without a model call).

``--llama old,new`` (the default) runs the strict default once per llama.cpp preset, side by
side: ``old`` is the context as it was made before (every thread decodes and evaluates,
no flash attention), ``new`` the current default (see ``PRESETS``; others:
``t1``, ``flash``, ``q8kv``). The "model steps" column is the rendered step (a step the
model must answer); "in llama.cpp" is the part of its time spent inside llama.cpp (the
rest is Python: prompt assembly, tokenising, slot choice), "decoded" its output tokens.
``--quick`` runs only those preset rows (no slots=1 / grounding-off rows).

(a) sequential: one episode of ``--seq-turns`` steps, then a second episode of the same
    scenario (its first step should reuse the system prompt the first one evaluated).
(b) interleaved: ``--episodes`` episodes stepped round-robin, one step each, ``--turns``
    turns each. slots=1 re-evaluates every history, so at full length the run takes about
    7 minutes on two idle cores (25 on busy ones); ``--old-turns`` shortens the slots=1
    part (the output says so), 0 skips it.

Per setting: median / p90 / max step latency; the median number of prompt tokens the model
actually evaluated per step (the rest were served from a slot); the process CPU time per
step (two threads: about twice the wall time on an otherwise idle machine, and less
sensitive to other load); and the process's resident memory (RSS, and PSS, which counts
the mmapped weights shared by the slots once) before and after. Episodes are seeded, so
both settings see the same actions and, at the same sampling, the same observations. Other
processes on the machine slow everything down; the load average is printed with the
results. No assertions: this measures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import simgym
from simgym.worldmodels.local import LocalWorldModel, adapter_prompt_style, unload_models

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import save  # noqa: E402  (beside this script)

# A terminal session as agents type it: mostly file work the state determines (the date,
# uname and git outside a repository included), and three commands only the model can
# answer (a program, disk usage, the process list).
ACTIONS = [
    "ls",
    "pwd",
    "cat notes.txt",
    "echo hi > a.txt",
    "cat a.txt",
    "grep milk notes.txt",
    "mkdir work",
    "cd work",
    "ls -la",
    "python3 -m pip --version",  # a program only the model answers
    "touch b.txt",
    "ls",
    "cd ..",
    "whoami",
    "uname -a",
    "wc -l a.txt",
    "ls -la",
    "date",
    "git status",
    "df -h",
    "ps aux | head -3",
    "echo bye",
]


def memory_mb() -> dict[str, float]:
    """RSS and PSS of this process in MB (PSS splits shared file pages among mappers)."""
    out = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Rss", "Pss"):
                out[key.lower()] = int(value.split()[0]) / 1024
    return out


# llama.cpp context presets compared by --llama: n_threads and LocalWorldModel's
# llama_options. "old" pins what LocalWorldModel did before these options existed.
PRESETS: dict[str, dict] = {
    "old": {
        "n_threads": os.cpu_count() or 2,
        "llama_options": {"n_threads_batch": os.cpu_count() or 2, "flash_attn": False},
    },
    "new": {},  # LocalWorldModel's defaults (decode threads from the load: decode_threads)
    "t1decode": {"n_threads": 1},  # one decode thread, the prompt on every core
    "t1": {"n_threads": 1, "llama_options": {"n_threads_batch": 1}},
    "flash": {"llama_options": {"flash_attn": True}},
    "q8kv": {"llama_options": {"flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"}},
}


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


class Steps:
    """Latency and evaluated prompt tokens of each step, read from the backend's records."""

    def __init__(self, wm: LocalWorldModel) -> None:
        self.wm = wm
        self.latency: list[float] = []
        self.cpu: list[float] = []
        self.evaluated: list[int] = []
        self.observations: list[str] = []
        self.modelled: list[bool] = []
        self.llama_s: list[float] = []
        self.decoded: list[int] = []

    async def step(self, env: simgym.SimEnv, action: str) -> float:
        before = len(self.wm.calls)
        start, cpu = time.perf_counter(), time.process_time()
        res = await env.step(action)
        took = time.perf_counter() - start
        self.cpu.append(time.process_time() - cpu)
        calls = list(self.wm.calls)[before:]
        self.latency.append(took)
        self.evaluated.append(sum(int(c["evaluated"]) for c in calls))
        self.llama_s.append(sum(float(c.get("llama_s", 0.0)) for c in calls))
        self.decoded.append(sum(int(c.get("decoded", 0)) for c in calls))
        self.observations.append(res.observation.text)
        self.modelled.append(bool(calls))
        return took

    def model_steps(self) -> str:
        """How many steps called the model, and their median latency (strict mode answers
        the others from the state)."""
        times = self.model_times()
        return f"{len(times)}, {statistics.median(times):.2f}" if times else "0"

    def model_times(self) -> list[float]:
        return [t for t, called in zip(self.latency, self.modelled, strict=True) if called]

    def model_parts(self) -> dict[str, float]:
        """Medians over the rendered steps: seconds in llama.cpp, outside it, tokens
        evaluated and decoded."""
        picked = [i for i, called in enumerate(self.modelled) if called]
        if not picked:
            return {}
        med = statistics.median
        return {
            "steps": len(picked),
            "median_s": med(self.latency[i] for i in picked),
            "llama_s": med(self.llama_s[i] for i in picked),
            "outside_s": med(self.latency[i] - self.llama_s[i] for i in picked),
            "evaluated": med(self.evaluated[i] for i in picked),
            "decoded": med(self.decoded[i] for i in picked),
        }


def make_env(wm: LocalWorldModel, seed: int, max_tokens: int, grounding: str) -> simgym.SimEnv:
    return simgym.make(
        "terminal", world_model=wm, grounding=grounding, seed=seed, max_tokens=max_tokens
    )


async def sequential(
    wm: LocalWorldModel, turns: int, max_tokens: int | None, grounding: str
) -> tuple[Steps, float]:
    steps = Steps(wm)
    first_of_second = 0.0
    for episode in range(2):
        env = make_env(wm, seed=100 + episode, max_tokens=max_tokens, grounding=grounding)
        await env.reset("explore the home directory")
        for t in range(turns):
            took = await steps.step(env, ACTIONS[t % len(ACTIONS)])
            if episode == 1 and t == 0:
                first_of_second = took
    return steps, first_of_second


async def interleaved(
    wm: LocalWorldModel, episodes: int, turns: int, max_tokens: int | None, grounding: str
) -> Steps:
    steps = Steps(wm)
    envs = [make_env(wm, 200 + i, max_tokens, grounding) for i in range(episodes)]
    for i, env in enumerate(envs):
        await env.reset(f"task {i}: explore the home directory")
    for t in range(turns):
        for i, env in enumerate(envs):
            await steps.step(env, ACTIONS[(t + i) % len(ACTIONS)])
    return steps


def summary(values: list[float]) -> tuple[str, str, str]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(values):.2f}", f"{p90:.2f}", f"{max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=8, help="slots of the new path")
    parser.add_argument("--seq-turns", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--turns", type=int, default=12, help="interleaved turns, new path")
    parser.add_argument(
        "--old-turns",
        type=int,
        default=None,
        help="interleaved turns for slots=1 (default: --turns; 0 skips the old path)",
    )
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="observation token cap (default: the env's)"
    )
    parser.add_argument(
        "--no-strict",
        dest="strict",
        action="store_false",
        help="skip the third setting (the default: strict grounding)",
    )
    parser.add_argument(
        "--adapter",
        default="auto",
        help="comma list of adapters (auto: the shipped one; none: the base; or GGUF files); "
        "each after the first adds its own slots=N rows, with the prompt style it asks for",
    )
    parser.add_argument(
        "--llama",
        default="old,new",
        help=f"llama.cpp presets for the strict default, side by side ({', '.join(PRESETS)})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="only the --llama rows (strict default), one each"
    )
    args = parser.parse_args()
    presets = [p.strip() for p in args.llama.split(",") if p.strip()]
    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        parser.error(f"unknown --llama preset(s) {unknown}; known: {', '.join(PRESETS)}")
    old_turns = args.turns if args.old_turns is None else args.old_turns
    first, *others = [a.strip() for a in args.adapter.split(",") if a.strip()] or ["auto"]
    new = PRESETS["new"]
    settings = [(f"new: slots={args.slots}", args.slots, args.turns, "off", first, new)]
    if old_turns > 0:
        settings.insert(0, ("old: slots=1", 1, old_turns, "off", first, new))
    if args.quick:
        settings, old_turns = [], 0
    if args.strict or args.quick:
        # the embedded default as a user gets it: strict grounding answers what the state
        # determines without a model call (render_known=False), the model renders the rest;
        # once per llama.cpp preset
        for preset in presets:
            name = f"default: slots={args.slots}, strict, llama {preset}"
            settings.append((name, args.slots, args.turns, "strict", first, PRESETS[preset]))
    for adapter in others:
        label = f"{Path(adapter).name} ({adapter_prompt_style(adapter)} prompt)"
        settings.append(
            (f"{label}: slots={args.slots}", args.slots, args.turns, "off", adapter, new)
        )
        if args.strict:
            name = f"{label}: slots={args.slots}, strict"
            settings.append((name, args.slots, args.turns, "strict", adapter, new))

    console = Console(width=200)
    console.print(f"load average at start: {load()} ({os.cpu_count()} CPUs)")
    table = Table(
        "setting",
        "scenario",
        "steps",
        "median s",
        "p90 s",
        "max s",
        "2nd episode, 1st step s",
        "model steps: n, median s",
        "median CPU s",
        "median evaluated tokens",
        "RSS / PSS MB before → after",
        title="embedded world model (SmolLM2-135M + shipped adapter), terminal",
    )
    observations: dict[str, list[str]] = {}
    footprint: list[tuple[float, float, int]] = []  # (RSS, PSS) grown, slots open
    rows: list[dict] = []
    for name, slots, turns, grounding, adapter, preset in settings:
        unload_models()
        wm = LocalWorldModel(slots=slots, adapter=adapter, **preset)
        before = memory_mb()
        started = time.perf_counter()
        seq, first = asyncio.run(sequential(wm, args.seq_turns, args.max_tokens, grounding))
        inter = asyncio.run(interleaved(wm, args.episodes, turns, args.max_tokens, grounding))
        after = memory_mb()
        mem = f"{before['rss']:.0f} / {before['pss']:.0f} → {after['rss']:.0f} / {after['pss']:.0f}"
        table.add_row(
            name,
            f"sequential 2×{args.seq_turns}",
            str(len(seq.latency)),
            *summary(seq.latency),
            f"{first:.2f}",
            seq.model_steps(),
            f"{statistics.median(seq.cpu):.2f}",
            f"{statistics.median(seq.evaluated):.0f}",
            "",
        )
        table.add_row(
            name,
            f"interleaved {args.episodes}×{turns}",
            str(len(inter.latency)),
            *summary(inter.latency),
            "",
            inter.model_steps(),
            f"{statistics.median(inter.cpu):.2f}",
            f"{statistics.median(inter.evaluated):.0f}",
            mem,
        )
        stats = wm.stats()
        console.print(
            f"{name}: {time.perf_counter() - started:.0f} s; "
            f"prompt tokens {stats['prompt_tokens']}, evaluated {stats['evaluated']}, "
            f"reused {stats['reused']} "
            f"(copied between slots {stats['copied']}); slots open {stats['slots_open']}; "
            f"load average {load()}"
        )
        for scenario, steps in (("sequential", seq), ("interleaved", inter)):
            rows.append(
                {
                    "setting": name,
                    "scenario": scenario,
                    "grounding": grounding,
                    "n_threads": preset.get("n_threads"),
                    "llama_options": preset.get("llama_options", {}),
                    "steps": len(steps.latency),
                    "median_s": statistics.median(steps.latency),
                    "rendered": steps.model_parts(),
                }
            )
        footprint.append(
            (after["rss"] - before["rss"], after["pss"] - before["pss"], stats["slots_open"])
        )
        observations[name] = seq.observations + inter.observations[: args.episodes * old_turns]
    unload_models()
    console.print(table)
    parts = Table(
        "setting",
        "scenario",
        "rendered steps",
        "median s",
        "in llama.cpp s",
        "outside s",
        "evaluated tokens",
        "decoded tokens",
        title="rendered steps (the model answers): where the time goes, medians",
    )
    for row in rows:
        got = row["rendered"]
        if got:
            parts.add_row(
                row["setting"],
                row["scenario"],
                str(got["steps"]),
                f"{got['median_s']:.2f}",
                f"{got['llama_s']:.2f}",
                f"{got['outside_s']:.3f}",
                f"{got['evaluated']:.0f}",
                f"{got['decoded']:.0f}",
            )
    console.print(parts)
    console.print(f"load average at end: {load()} ({os.cpu_count()} CPUs)")
    strict_names = [name for name, *_, grounding, _, _ in settings if grounding == "strict"]
    same_as_first: dict[str, str] = {}
    if len(strict_names) > 1:  # presets change speed; what the model writes should hold
        base, *rest = strict_names
        for name in rest:
            pairs = list(zip(observations[base], observations[name], strict=False))
            same_as_first[name] = f"{sum(a == b for a, b in pairs)}/{len(pairs)}"
            console.print(f"same observations, {name} vs {base}: {same_as_first[name]} steps")
    strict_rows = [r for r in rows if r["grounding"] == "strict" and r["rendered"]]
    save(
        "local_latency",
        rows=rows,
        summary={
            "median_rendered_step_s": {
                f"{r['setting']} / {r['scenario']}": round(r["rendered"]["median_s"], 3)
                for r in strict_rows
            },
            "same_observations_as_first_preset": same_as_first,
        },
        notes="Rendered steps are those the model answers (strict grounding answers the "
        "rest from the state). Presets run one after another in one process on a shared "
        "machine: compare them side by side, with the load average.",
    )
    if old_turns <= 0:
        return
    old, new = list(observations.values())[:2]
    same = sum(a == b for a, b in zip(old, new, strict=False))
    console.print(
        f"same observations in both settings: {same}/{min(len(old), len(new))} steps compared "
        f"(interleaved: the first {min(old_turns, args.turns)} turns, which both ran)"
    )
    (old_rss, old_pss, _), (new_rss, new_pss, opened) = footprint[:2]
    if opened > 1:
        console.print(
            f"memory per extra slot: ~{(new_rss - old_rss) / (opened - 1):.0f} MB RSS, "
            f"~{(new_pss - old_pss) / (opened - 1):.0f} MB PSS "
            f"(growth with {opened} slots open minus growth with one)"
        )
    if old_turns < args.turns:
        console.print(
            f"note: slots=1 ran {old_turns} interleaved turns per episode, not {args.turns}: "
            "its prompts were shorter, so its latency here understates the old path"
        )


if __name__ == "__main__":
    main()
