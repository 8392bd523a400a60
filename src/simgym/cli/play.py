"""``simgym domains`` and ``simgym play``: a person (or a pipe) acts, the world model answers."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

import simgym
from simgym.cli.console import make_console
from simgym.cli.errors import errors, friendly_errors
from simgym.cli.options import (
    ExecutionOption,
    ExperienceOption,
    GroundingOption,
    WorldModelOptions,
    WorldOption,
    grounding_options,
    load_scenario,
    world_model_options,
    world_scenario_option,
)
from simgym.core.errors import SimgymError

console = make_console()


def domains() -> None:
    """List the domains simgym can simulate."""
    table = Table("domain", "description", "action")
    for name in simgym.domain_names():
        domain = simgym.get_domain(name)
        table.add_row(name, domain.description, domain.action_hint)
    console.print(table)


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
    execution: ExecutionOption = "sandbox",
    experience: ExperienceOption = None,
    world: WorldOption = None,
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
    if world is not None and scenario is not None:
        raise SimgymError("--world and --scenario both give the scenario: pass one")
    world_scenario = world_scenario_option(world, domain)
    # strict (a typo'd key is an error, not a world without it) and for this domain
    user_scenario = load_scenario(scenario, domain)
    backend = wm.build()
    writer = simgym.TrajectoryWriter(out) if out else None
    env = simgym.SimEnv(
        domain_obj,
        backend,
        world_scenario or user_scenario,
        max_turns=max_turns,
        system_prompt_file=system_prompt_file,
        writer=writer,
        **grounding_options(grounding, experience, world, execution),
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
            if not interactive and domain != "terminal":
                # A piped transcript shows what was typed, as a terminal's screen does.
                _show(f"> {line}", interactive, last=False)
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
