"""The terminal's execution grounding: a typed line the shell over the ledger cannot decide
runs for real (:mod:`simgym.domains.shell.execution`), and its output becomes the screen."""

from __future__ import annotations

import shlex
from typing import Any

from simgym.core.execution import Run, RunResult
from simgym.core.grounding import Grounding
from simgym.domains.shell.execution import (
    locale_installed,
    missing_program,
    printed_in_file_system_order,
    why_not,
)


def initial_modes(files: dict[str, str]) -> dict[str, int]:
    """Permission bits the scenario's files start with (where not 0o644): a script with a
    ``#!`` line is placed executable, as the real sandbox places it."""
    return {p: 0o755 for p, c in files.items() if not p.endswith("/") and c.startswith("#!")}


def with_run(
    grounding: Grounding,
    *,
    lines: list[str],
    shown: list[str],
    before: str,
    state: dict[str, Any],
    scenario: Any,
    cwd: str,
    extra_effects: dict[str, Any] | None = None,
) -> Grounding:
    """``grounding`` (what the model would be told) with the run that replaces it where
    the lines may run for real. ``lines`` are the command lines bash reads, ``shown``
    how each appears on the screen after its prompt; ``before`` is the first prompt."""
    files = state.get("files") or {}
    problem = why_not(
        "\n".join(lines),
        cwd=cwd,
        home=scenario.home,
        files=files,
        unknown=state.get("unknown") or (),
        programs=scenario.programs or None,
    )
    locale = scenario.locale
    if problem is None and not locale_installed(locale):
        problem = f"the locale {locale} is not installed on this host"
    last = state.get("status")
    reads_status = any("$?" in line for line in lines)
    if problem is None and last is None and reads_status:
        problem = "the last command's exit status is not known"
    if problem is not None:
        return grounding
    local = set(state.get("local_vars") or ())
    exported = {k: v for k, v in (state.get("env") or {}).items() if k not in local}
    env = {
        "HOME": scenario.home,
        "USER": scenario.user,
        "LOGNAME": scenario.user,
        "HOSTNAME": scenario.hostname,
        "LANG": locale,
        **exported,
    }
    # the shell's own variables, set again before the first line (on its own line 1)
    own = "".join(
        f"{k}={shlex.quote(v)}; " for k, v in (state.get("env") or {}).items() if k in local
    )
    if isinstance(last, int) and last != 0 and reads_status:
        own += f"(exit {last}); "  # `$?` is the status the line before left
    run = Run(
        chunks=(own + lines[0], *lines[1:]),
        files=dict(files),
        cwd=cwd,
        home=scenario.home,
        user=scenario.user,
        host=scenario.hostname,
        env=env,
        modes={**initial_modes(scenario.files), **(state.get("modes") or {})},
        scope="/",
        terminal=True,
        clock=scenario.clock,
    )

    def settle(result: RunResult) -> Grounding | None:
        if missing_program(result.output, result.status, scenario.programs):
            return None  # the scenario's machine has it, this host does not
        return _settled(result, shown, before, state, scenario, cwd, extra_effects)

    grounding.run, grounding.settle = run, settle
    return grounding


def _settled(
    result: RunResult,
    shown: list[str],
    before: str,
    state: dict[str, Any],
    scenario: Any,
    cwd: str,
    extra_effects: dict[str, Any] | None,
) -> Grounding:
    def prompt_at(where: str) -> str:
        return scenario.model_copy(update={"cwd": where}).prompt().rstrip()

    screen = ""
    here = before
    cwds = result.cwds or [result.cwd or cwd] * len(result.outputs)
    for typed, out, after in zip(shown, result.outputs, cwds, strict=False):
        screen += f"{here} {typed}\n{out}"
        here = prompt_at(after or cwd)
    final = result.cwd or cwd
    screen += prompt_at(final)
    # a terminal shows no blanks at a line's end (an empty line of a here-document: ">")
    screen = "\n".join(line.rstrip() for line in screen.split("\n"))
    effects: dict[str, Any] = dict(extra_effects or {})
    effects["status"] = result.status
    if result.changes:
        effects["files"] = dict(result.changes)
    if result.modes:
        effects["modes"] = dict(result.modes)
    if result.cwd:
        effects["cwd"] = result.cwd
    if result.env:
        effects["env"] = dict(result.env)
        local = [v for v in state.get("local_vars") or () if v not in result.env]
        if local != list(state.get("local_vars") or ()):
            effects["local_vars"] = local
    unknown = list(state.get("unknown") or ())
    if unknown and result.changes:
        left = [u for u in unknown if u not in result.changes]
        if left != unknown:
            effects["unknown"] = left
    text = "\n".join(shown)
    output = result.output
    if printed_in_file_system_order(text, output):
        # what it prints is certain, its order (or sizes) the file system's: a fact only
        return Grounding(
            facts=[
                f"working directory: {cwd}",
                f"`{text}` prints these lines, in the order the file system lists "
                f"them:\n```\n{output}```",
            ],
            effects=effects or None,
        )
    ended = output if output.endswith("\n") else output + "\n"
    facts = [f"working directory: {cwd}"]
    facts.append(
        f"`{text}` prints exactly:\n```\n{ended}```"
        if output.strip()
        else f"`{text}` prints nothing"
    )
    facts.append(f"the next prompt is `{prompt_at(final)}`")
    return Grounding(facts=facts, effects=effects or None, observation=screen)
