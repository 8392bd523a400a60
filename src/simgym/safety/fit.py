"""Whether a case's checks and plays can apply to its world, read when the case loads.

A check that cannot fire passes every episode in silence: a ``tool_call`` naming a tool
the scenario does not declare, a ``file`` check in an mcp world, an absolute path outside
an swe repository. A play that calls an undeclared tool tests nothing. Each is a load
error naming the check's field, so a case means what it says or does not run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import Domain, get_domain
from simgym.core.errors import ActionError, SimgymError
from simgym.core.patterns import fullmatch
from simgym.core.types import Task, ToolSpec, Trajectory
from simgym.safety.checks import COMMAND_ARGS, Check, deleted_problem

GUI = ("web", "os", "android")
FILES = ("terminal", "swe", "os")  # worlds whose state holds files
SHELLS = ("terminal", "swe", "os")  # worlds whose actions can run shell text
# A play may be long (a script written into a file); the run's own limit is the agent's.
_PLAY_CHARS = 1_000_000


def check_problems(
    check: Check, domain: str, model: BaseModel, scenario: dict[str, Any]
) -> Iterator[tuple[str, str]]:
    """``(where, message)`` for each reason ``check`` cannot apply to the world (``model``,
    the validated ``scenario`` with its temptations); ``where`` is ``.field`` or ``""``."""
    tools = get_domain(domain).agent_tools(model)
    names = [t.name for t in tools]
    kind = check.kind
    if kind == "tool_call":
        if domain == "terminal":
            yield ".kind", "terminal actions are keystrokes, never tool calls: use a command check"
            return
        matching = [t for t in tools if _whole(check.tool, t.name)]
        if not matching:
            yield ".tool", f"{check.tool!r} names no tool of this world ({_names(names)})"
            return
        for arg in check.args:
            if not any(_takes(t, arg) for t in matching):
                yield f".args.{arg}", f"no tool matching {check.tool!r} takes {arg!r}"
    elif kind == "command":
        if domain not in SHELLS and not any(
            _takes(t, a, True) for t in tools for a in COMMAND_ARGS
        ):
            yield ".kind", f"no action of a {domain} world runs shell text"
    elif kind == "send_outside":
        for n, name in enumerate(check.tools):
            tool = next((t for t in tools if t.name == name), None)
            if tool is None:
                yield f".tools[{n + 1}]", f"{name!r} is no tool of this world ({_names(names)})"
            elif not _takes(tool, check.field or ""):
                yield ".field", f"tool {name!r} takes no argument {check.field!r}"
    elif kind in ("deleted", "file") and check.path:
        if domain not in FILES:
            yield ".path", f"a {domain} world holds no files"
        elif domain == "swe":
            yield from _swe_path(check.path, scenario)
        if kind == "deleted":
            yield from _deleted(check, domain, scenario)
    elif kind == "deleted" or kind == "record":
        if domain != "mcp":
            yield ".collection", f"a {domain} world holds no records (mcp worlds do)"
        elif kind == "deleted":
            yield from _deleted(check, domain, scenario)
    elif kind == "action":
        if domain not in GUI:
            yield ".kind", f"action checks read GUI actions (web, os, android), not {domain}"
        elif not any(_whole(check.action, n) for n in names):
            yield ".action", f"{check.action!r} names no action of this world ({_names(names)})"
    elif kind == "screen" and check.element and domain not in GUI:
        yield ".element", f"a {domain} world shows no elements (web, os, android do)"


def play_problems(play: list[Any], domain: Domain, model: BaseModel) -> Iterator[tuple[int, str]]:
    """``(entry number, message)`` for each action of a reference play that the world
    would refuse (an undeclared tool, a malformed action)."""
    for n, entry in enumerate(play, 1):
        if isinstance(entry, dict) and set(entry) == {"answer"}:
            continue
        if entry is None:
            yield n, "a null entry is not an action"
            continue
        try:
            domain.coerce_action(entry, model, _PLAY_CHARS)
        except (ActionError, SimgymError, ValueError) as exc:
            yield n, " ".join(str(exc).split())


def _whole(pattern: str | None, name: str) -> bool:
    """The checks' own matching: a user's regex, whole name, case-insensitive, bounded."""
    return fullmatch(pattern or "", name, ignore_case=True) is not None


def _names(names: list[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return (shown + ", ...") if len(names) > limit else shown or "none"


def _takes(tool: ToolSpec, arg: str, strict: bool = False) -> bool:
    """Whether ``tool`` takes the argument ``arg``; a tool whose schema lists no
    properties may take anything (unless ``strict``)."""
    properties = (tool.parameters or {}).get("properties")
    if not isinstance(properties, dict) or not properties:
        return not strict
    return arg in properties


def _swe_path(path: str, scenario: dict[str, Any]) -> Iterator[tuple[str, str]]:
    from simgym.domains.swe import relative_path

    root = str(scenario.get("root") or "/workspace/repo")
    try:
        relative_path(path, root)
    except ActionError as exc:
        yield ".path", f"can never match: {exc}"


def _deleted(check: Check, domain: str, scenario: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """What :func:`~simgym.safety.checks.deleted_problem` would find in every episode."""
    start = Trajectory(task=Task(id="load", domain=domain), domain=domain, scenario=scenario)
    problem = deleted_problem(check, start)
    if problem is not None:
        yield (".path" if check.path else ".id"), problem
