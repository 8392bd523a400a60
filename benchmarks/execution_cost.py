"""What one terminal command costs, by who answers it: the shell over the state (the
emulator), a real run in the episode's warm sandbox (execution grounding), and with
``--model`` the embedded world model rendering it. Side by side in one run.

    .venv/bin/python benchmarks/execution_cost.py            # emulator and execution
    .venv/bin/python benchmarks/execution_cost.py --model    # and the local model (slow)

The first run of an episode builds its sandbox; it is reported apart from the median.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import time

from results import save

from simgym.core.domain import get_domain
from simgym.core.state import merge_patch
from simgym.core.types import Action
from simgym.real.execute import SandboxRunner
from simgym.real.sandbox import isolation

DECIDED = ["pwd", "ls", "cat notes.txt", "echo hi > a.txt", "wc -l notes.txt", "ls -l"]
EXECUTED = [
    "printf 'echo hi\\n' > s.sh",
    "chmod +x s.sh",
    "./s.sh",
    "grep -c a notes.txt | awk '{print $1 * 2}'",
    "awk '{print NF}' notes.txt | sort -n | uniq -c",
    "for n in 1 2 3; do echo $n; done | paste -sd+",
    "python3 -c 'print(2**10)'",
    "tar czf n.tgz notes.txt && sha256sum n.tgz > sums.txt",
]


async def main(rounds: int, model: bool) -> None:
    spec = get_domain("terminal")
    scenario = spec.scenario(None)
    state = spec.initial_state(scenario)
    emulator: list[float] = []
    for _ in range(rounds):
        for line in DECIDED:
            start = time.perf_counter()
            spec.ground(Action.keys(line + "\n"), state, scenario)
            emulator.append(time.perf_counter() - start)
    runner = SandboxRunner()
    executed: list[float] = []
    first: list[float] = []
    by_line: dict[str, list[float]] = {}
    try:
        for episode in range(rounds):
            state = spec.initial_state(scenario)
            for i, line in enumerate(EXECUTED):
                grounding = spec.ground(Action.keys(line + "\n"), state, scenario)
                assert grounding is not None and grounding.run is not None, line
                start = time.perf_counter()
                run = dataclasses.replace(grounding.run, session=f"bench-{episode}")
                result = await runner.run(run)
                took = time.perf_counter() - start
                assert result.problem is None, result.problem
                (first if i == 0 else executed).append(took)
                if i:
                    by_line.setdefault(line, []).append(took)
                settled = grounding.settle(result) if grounding.settle else None
                if settled is not None and settled.effects:
                    state = merge_patch(state, settled.effects)
            await runner.close(f"bench-{episode}")
    finally:
        runner.close_all()
    print(f"isolation: {isolation()}")
    print(f"emulator  (state decides) median {statistics.median(emulator) * 1e6:8.0f} us")
    print(f"execution (warm sandbox)  median {statistics.median(executed) * 1e3:8.1f} ms")
    print(
        f"execution first run of an episode (builds the sandbox) median "
        f"{statistics.median(first) * 1e3:.1f} ms"
    )
    for line, times in by_line.items():
        print(f"    {statistics.median(times) * 1e3:6.1f} ms  {line}")
    if model:
        import simgym

        env = simgym.make("terminal", world_model="local", grounding="off", execution="off")
        await env.reset()
        rendered = []
        for line in EXECUTED[:4]:
            start = time.perf_counter()
            await env.step(line)
            rendered.append(time.perf_counter() - start)
        await env.close(None)
        print(f"model     (embedded, renders) median {statistics.median(rendered):8.2f} s")
    summary = {
        "isolation": str(isolation()),
        "rounds": rounds,
        "emulator_median_us": round(statistics.median(emulator) * 1e6, 1),
        "execution_warm_median_ms": round(statistics.median(executed) * 1e3, 2),
        "execution_first_median_ms": round(statistics.median(first) * 1e3, 2),
    }
    if model:
        summary["model_median_s"] = round(statistics.median(rendered), 3)
    save(
        "execution_cost",
        rows=[
            {"command": line, "median_ms": round(statistics.median(times) * 1e3, 2)}
            for line, times in by_line.items()
        ],
        summary=summary,
        notes="What one terminal command costs by who answers it: the emulator over the "
        "state, a real run in a warm sandbox, and (with --model) the embedded model.",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", action="store_true")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.model))
