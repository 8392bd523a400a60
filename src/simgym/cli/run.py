"""``simgym run``: many episodes from task or episode files, agents acting, rewards scored."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

import simgym
from simgym.cli.errors import errors, friendly_errors
from simgym.cli.options import (
    ExecutionOption,
    ExperienceOption,
    GroundingOption,
    WorldModelOptions,
    WorldOption,
    agent_options,
    executor_options,
    grounding_options,
    reward_spec,
    scenario_domain,
    world_model_options,
    world_scenario_option,
    wrong_domain_message,
)
from simgym.cli.progress import CommandProgress
from simgym.core.errors import SimgymError

RetryErrorsOption = Annotated[
    bool,
    typer.Option(
        "--retry-errors/--no-retry-errors",
        help="on resume, run again the episodes that errored (the world model unreachable, "
        "the agent failing)",
    ),
]


def errored(trajectories: list[simgym.Trajectory]) -> list[tuple[simgym.Trajectory, str]]:
    """The episodes that did not run to their end, each with its cause."""
    from simgym.rollout.episode import episode_error

    return [(t, e) for t in trajectories if (e := episode_error(t)) is not None]


def exit_on_errors(trajectories: list[simgym.Trajectory], out: Path) -> None:
    """Say how many episodes errored and the first one's cause, and exit 1: a run with an
    errored episode is not a finished run (rerunning the command retries them)."""
    failed = errored(trajectories)
    if not failed:
        return
    first, cause = failed[0]
    errors.print(
        f"[bold red]{len(failed)} of {len(trajectories)} episode(s) errored[/]; the first "
        f"({first.key}): {escape(' '.join(cause.split())[:500])}",
        highlight=False,
    )
    errors.print(f"rerun the same command to retry them (they are in {out})", highlight=False)
    raise typer.Exit(1)


@friendly_errors
@world_model_options
def run(
    files: Annotated[
        list[Path],
        typer.Argument(help="task files (.jsonl) or episode files (.yaml/.json, one each)"),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="trajectory JSONL (appended)")],
    domain: Annotated[
        str | None, typer.Option("--domain", "-d", help="domain for tasks that do not name one")
    ] = None,
    agent: Annotated[
        str,
        typer.Option(
            help="scripted (the files' actions) | plan (a mined task's plan) | openai | local "
            "| human"
        ),
    ] = "scripted",
    agent_base_url: Annotated[
        str | None, typer.Option(help="the openai agent's server (or SIMGYM_AGENT_BASE_URL)")
    ] = None,
    agent_model: Annotated[str | None, typer.Option(help="the openai agent's model")] = None,
    agent_model_path: Annotated[
        str | None, typer.Option(help="GGUF file for the local agent (default: embedded)")
    ] = None,
    agent_temperature: Annotated[float | None, typer.Option()] = None,
    reward: Annotated[
        str | None,
        typer.Option(
            help="reward: a name (exact, f1, judge, ...) or a JSON/YAML spec; default: each "
            "task's own metadata.reward (or exact match on metadata.answer)"
        ),
    ] = None,
    group_size: Annotated[
        int, typer.Option(help="episodes per task (a GRPO group; they share the seed)")
    ] = 1,
    concurrency: Annotated[int, typer.Option(help="episodes in flight")] = 8,
    group_concurrency: Annotated[
        int | None, typer.Option(help="at most this many episodes of one group in flight")
    ] = None,
    max_turns: Annotated[int, typer.Option()] = 30,
    max_agent_tokens: Annotated[
        int | None, typer.Option(help="truncate an episode once its agent used this many tokens")
    ] = None,
    executor: Annotated[str, typer.Option(help="local | ray")] = "local",
    ray_workers: Annotated[
        int | None, typer.Option(help="ray: worker processes (default: one per CPU)")
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="ray: cluster address (default: RAY_ADDRESS, or local)")
    ] = None,
    resume: Annotated[bool, typer.Option(help="skip episodes already in --out")] = True,
    retry_errors: RetryErrorsOption = True,
    seed: Annotated[int | None, typer.Option()] = None,
    compare: Annotated[
        str | None,
        typer.Option(help="real: also run the episodes for real and compare turn by turn"),
    ] = None,
    perturb: Annotated[
        Path | None,
        typer.Option("--perturb", help="faults to inject: a YAML/JSON perturbation spec"),
    ] = None,
    difficulty: Annotated[
        float | None, typer.Option(help="built-in faults at this level, 0 (none) to 1")
    ] = None,
    curriculum: Annotated[
        str | None,
        typer.Option(
            help="SCHEDULE:START:END:STEPS[:STAGES] or a YAML file; faults at the level of --step"
        ),
    ] = None,
    step: Annotated[int, typer.Option(help="training step, for --curriculum")] = 0,
    context: Annotated[
        str,
        typer.Option(
            help="history: every earlier turn goes to the world model; state: the hidden "
            "state plus the last --context-turns turns (bounded prompts)"
        ),
    ] = "history",
    context_turns: Annotated[int, typer.Option(help="turns kept in state context")] = 4,
    state_updates: Annotated[
        bool | None,
        typer.Option(
            "--state-updates/--no-state-updates",
            help="ask the world model to patch the hidden state each turn "
            "(default: on with --context state)",
        ),
    ] = None,
    grounding: GroundingOption = None,
    execution: ExecutionOption = "sandbox",
    experience: ExperienceOption = None,
    world: WorldOption = None,
    *,
    wm: WorldModelOptions,
) -> None:
    """Run an agent on tasks in simulated environments; trajectories go to --out.

    The default agent plays the actions written in the files. With --compare real the same
    scripted episodes also run in real environments (written to OUT.real.jsonl), and each
    turn's simulated and real observations are compared (OUT.compare.jsonl, and a
    per-domain table)."""
    if compare not in (None, "real"):
        raise SimgymError(f"--compare takes 'real', not {compare!r}")
    if compare and agent != "scripted":
        raise SimgymError("--compare real replays the files' actions: use --agent scripted")
    from simgym.perturb.curriculum import env_perturbations
    from simgym.rollout.runner import arollout
    from simgym.rollout.scripted import load_specs

    plan = env_perturbations(perturb, difficulty, curriculum, step, seed=seed)
    if context not in ("history", "state"):
        raise SimgymError(f"--context takes 'history' or 'state', not {context!r}")

    specs = load_specs(files, domain)
    if world is not None:  # every task plays in the business world
        other = sorted({str(spec.task.domain) for spec in specs if spec.task.domain != "mcp"})
        served = world_scenario_option(world, other[0] if other else "mcp")
        from simgym.logs.tasks import before_session

        for spec in specs:
            spec.task.scenario = copy.deepcopy(before_session(served, spec.task))
    for spec in specs:
        if not spec.task.domain:
            raise SimgymError(f"{spec.task.id}: no domain; name one in the file or pass --domain")
        domain_obj = simgym.get_domain(spec.task.domain)  # fail early on an unknown domain
        try:  # and on a broken scenario, before any episode runs (mid-run it stops them all),
            # a key the schema does not know included (a typo'd `evn:` is no environment)
            domain_obj.scenario(spec.task.scenario or None, strict=world is None)
        except SimgymError as exc:
            fits = scenario_domain(spec.task.scenario, spec.task.domain) if world is None else None
            raise SimgymError(
                wrong_domain_message(spec.task.id, fits, spec.task.domain)
                if fits
                else f"{spec.task.id}: {' '.join(str(exc).split())}"
            ) from None
    agent_kwargs = agent_options(
        agent, agent_base_url, agent_model, agent_model_path, agent_temperature
    )
    if agent == "scripted":
        agent_kwargs["by_task"] = {spec.task.id: spec.actions for spec in specs}
    elif agent == "plan":  # tasks mined from logs carry a plan (simgym.logs.tasks)
        agent_kwargs["by_task"] = {
            spec.task.id: spec.task.metadata.get("plan", []) for spec in specs
        }
    wm_name, wm_options = wm.spec()
    if wm_name.startswith("real-") and executor == "local" and concurrency > 1:
        # A real backend holds one world at a time (a LiveWorld): episodes sharing it
        # would act in each other's world, so they take turns.
        errors.print(f"[dim]{wm_name} holds one world at a time: one episode at a time[/]")
        concurrency = 1
    episodes = len(specs) * group_size
    stats = {"errors": 0, "turns": 0, "reward": 0.0, "done": 0}

    with CommandProgress(errors, disable=agent == "human") as progress:
        bar = progress.add("episodes")  # the total comes from on_start, after resuming

        def on_start(todo: int) -> None:
            progress.update(bar, total=todo)

        def on_done(trajectory: simgym.Trajectory) -> None:
            stats["errors"] += trajectory.metrics.get("errors", 0)
            stats["turns"] += len(trajectory.turns)
            stats["reward"] += trajectory.total_reward
            stats["done"] += 1
            progress.update(
                bar,
                advance=1,
                failed=len(errored([trajectory])),
                note=f"reward {stats['reward'] / stats['done']:.3f}, {stats['errors']} turn errors",
            )

        finished = asyncio.run(
            arollout(
                [spec.task for spec in specs],
                agent=agent,
                agent_options=agent_kwargs,
                world_model=wm_name,
                world_model_options=wm_options,
                reward=reward_spec(reward),
                out=out,
                resume=resume,
                retry_errors=retry_errors,
                executor=executor,
                on_done=on_done,
                on_start=on_start,
                group_size=group_size,
                concurrency=concurrency,
                group_concurrency=group_concurrency,
                max_turns=max_turns,
                max_agent_tokens=max_agent_tokens,
                seed=seed,
                executor_options=executor_options(executor, ray_workers, ray_address),
                env_options={
                    "context": context,
                    "context_turns": context_turns,
                    "state_updates": state_updates,
                    **grounding_options(grounding, experience, world, execution),
                    **({"perturbations": plan} if plan else {}),
                },
            )
        )
    skipped = episodes - len(finished)
    if skipped:
        errors.print(f"resuming: {skipped} of {episodes} episodes already in {out}")
    errors.print(summary_table(finished))
    errors.print(
        f"wrote {len(finished)} episodes ({stats['turns']} turns, {stats['errors']} turn "
        f"errors, {len(errored(finished))} episodes errored) to {out}"
    )
    if compare == "real":
        _compare_with_real(files, out, domain, max_turns)
    exit_on_errors(finished, out)


def _compare_with_real(files: list[Path], out: Path, domain: str | None, max_turns: int) -> None:
    from simgym.bench.sim_vs_real import compare_turns, summarize
    from simgym.real.sandbox import bwrap_problem
    from simgym.rollout.record import record as record_real

    problem = bwrap_problem()
    if problem:
        raise SimgymError(f"--compare real needs real sandboxes: {problem}")
    real_out = out.with_name(out.stem + ".real.jsonl")
    record_real(files, real_out, domain=domain, max_turns=max_turns)
    rows = compare_turns(
        list(simgym.read_trajectories(out)), list(simgym.read_trajectories(real_out))
    )
    report = out.with_name(out.stem + ".compare.jsonl")
    report.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    table = Table(
        "domain",
        "turns compared",
        "edit similarity",
        "line F1",
        "simulated turns well-formed",
        title="simulated vs real",
    )
    for name, stats in summarize(rows).items():
        table.add_row(
            name,
            str(stats["turns"]),
            f"{stats['edit_similarity']:.3f}",
            f"{stats['line_f1']:.3f}",
            f"{stats['simulated_format_ok']:.0%}",
        )
    errors.print(table)
    errors.print(f"real episodes in {real_out}; per-turn comparison in {report}")


# how the observations came about, in the summary's order (rollout.episode.grounding_counts)
GROUNDING_COLUMNS = ("rendered", "from_state", "executed", "contradictions")


def summary_table(trajectories: list[simgym.Trajectory]) -> Table:
    """Per-domain totals of a run: how episodes ended and what went wrong."""
    from simgym.rollout.episode import grounding_counts

    table = Table(
        "domain",
        "episodes",
        "done",
        "truncated",
        "errored",
        "turns",
        "rejected actions",
        "world-model errors",
        "format problems",
        "rendered",
        "from state",
        "executed",
        "contradictions",
        "tokens",
        "mean latency s",
        "mean reward",
    )
    for domain in sorted({t.domain for t in trajectories}):
        group = [t for t in trajectories if t.domain == domain]
        turns = [turn for t in group for turn in t.turns]
        simulated = [turn for turn in turns if turn.in_history]
        counts = [grounding_counts(t) for t in group]
        table.add_row(
            domain,
            str(len(group)),
            str(sum(t.done for t in group)),
            str(sum(t.truncated for t in group)),
            str(len(errored(group))),
            str(len(turns)),
            str(
                sum(
                    1
                    for turn in turns
                    if turn.observation.kind == "error"
                    and turn.action is None
                    and not turn.in_history
                )
            ),
            str(sum(1 for turn in turns if turn.error_type in ("world_model", "empty_output"))),
            str(sum(1 for turn in turns if turn.format_problems)),
            *(str(sum(c[k] for c in counts)) for k in GROUNDING_COLUMNS),
            str(sum(turn.usage.total_tokens for turn in turns)),
            f"{sum(x.latency_s for x in simulated) / max(len(simulated), 1):.2f}",
            f"{sum(t.total_reward for t in group) / len(group):.3f}",
        )
    return table
