"""A calibration policy: it knows each task's plan but reads every fact from the world.

The ``reader`` agent calls the tools of a task's reference solution in order, but it takes
the customer id a search found and the value a lookup asks for from the observations it is
shown, never from the task. A plan step may say what to read itself: ``"read": {name:
regex}`` takes the regular expression's first group from the observation that answers the
step, and later steps' arguments and answers use it as ``{name}`` (the terminal tasks,
:mod:`~simgym.bench.sim2real.shell_tasks`). It solves every task on the real backends. Its
success on the twin therefore shows how often the twin shows the facts a policy needs, and
its gap is the part of the sim-to-real gap that the world causes, with no policy error
mixed in.

With ``retries``, it sends a call again when the world answers with an error a retry may
clear (a timeout, a rate limit, a server error, a dropped connection, a result still
pending; on a terminal, a command that printed such an error), up to ``retries`` times in
a row: the behaviour its demonstrations teach in a twin with injected faults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from simgym.agents.base import Decision, EpisodeView
from simgym.bench.sim2real.plans import fill
from simgym.core.patterns import compile_pattern
from simgym.core.types import Task

NOT_FOUND = "I could not find it."
NO_CUSTOMER = "C-0000"  # sent when a search showed no id: the plan's own id would be a leak


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """Every object in a JSON value, outermost first."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _dicts(item)


# A shell command's transient failure as tools print it ("curl: error: operation timed out
# after 30 seconds", "cat: notes.txt: Stale file handle", a command killed still running),
# with the prompt or the exit code line after it: a network client's error, or a local
# program's system error that goes away when tried again.
_TRANSIENT_ERRNO = (
    "Stale file handle|Resource temporarily unavailable|Input/output error|"
    "Connection timed out|Transport endpoint is not connected"
)
_SHELL_FAULT = re.compile(rf"^(\S+: (error: |.*: (?:{_TRANSIENT_ERRNO})$)|\[command still running)")
_PROMPT_BACK = re.compile(r"[$#]\s*$|^\[exit code: \d+\]$")
# A tool's failure as a whole, from a search engine or a repository's file tools ("Error:
# 429 Too Many Requests ...", "Error: the search request timed out ..."), or a page still
# loading; a bad request, a refused key, a missing file or page is not one a retry clears.
_TOOL_FAULT = re.compile(
    r"^Error: (?:(?:429|5\d\d)\b|.*(?:timed out|still running|changed on disk|"
    r"lost the connection|while contacting|while fetching))"
    r"|^# Loading\.\.\.\n\nThe page is still loading"
)


def transient_fault(observation: str) -> bool:
    """Whether ``observation`` is an error or a not-yet-ready result rather than an answer:
    a JSON ``error`` object, an ``isError`` envelope, or a ``pending`` status; on a
    terminal or through a ``bash`` tool, a command's last line of output is such an error and
    the prompt (or the exit code) is back; from a search engine or a file tool, an
    ``Error:`` line that a retry may clear (a timeout, 429, 5xx, a dropped connection)."""
    seen = _json(observation)
    if isinstance(seen, dict):
        return "error" in seen or seen.get("isError") is True or seen.get("status") == "pending"
    if seen is not None:
        return False
    if _TOOL_FAULT.match(observation):
        return True
    lines = [line for line in observation.rstrip().splitlines() if line.strip()]
    return (
        len(lines) >= 2
        and _PROMPT_BACK.search(lines[-1]) is not None
        and _SHELL_FAULT.match(lines[-2]) is not None
    )


def first_field(value: Any, field: str) -> str | None:
    """The first ``field`` an object in ``value`` holds (the record a search listed
    first, or the record a lookup returned)."""
    for found in _dicts(value):
        if isinstance(found.get(field), str | int | float):
            return str(found[field])
    return None


class ReaderAgent:
    """Plays each task's reference plan, reading ids and answers from observations."""

    name = "reader"

    def __init__(self, tasks: Iterable[Task], *, retries: int = 0) -> None:
        self.plans = {
            t.id: (str(t.metadata.get("kind", "")), list(t.metadata.get("solution") or []))
            for t in tasks
        }
        self.retries = retries

    async def start(self, view: EpisodeView) -> _ReaderSession:
        kind, plan = self.plans.get(view.task_id, ("", []))
        return _ReaderSession(kind, plan, self.retries)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **({"retries": self.retries} if self.retries else {})}


class _ReaderSession:
    def __init__(self, kind: str, plan: list[Any], retries: int = 0) -> None:
        self.kind = kind
        self.plan = plan
        self.retries = retries
        self.retried = 0  # retries of the current call so far
        self.call: dict[str, Any] | None = None  # the call sent last
        self.step = 0
        self.last: Any = None  # the newest observation that was JSON
        self.customer_id: str | None = None  # the id the search showed
        self.read: dict[str, str] = {}  # values the plan's "read" steps took from the world
        self.messages: list[dict[str, Any]] = []

    async def act(self, observation: str) -> Decision | None:
        self.messages.append({"role": "user", "content": observation})
        if self.call is not None and self.retried < self.retries and transient_fault(observation):
            self.retried += 1
            self.messages.append({"role": "assistant", "content": json.dumps(self.call)})
            return Decision(action=dict(self.call))
        self.retried = 0
        seen = _json(observation)
        if seen is not None:
            self.last = seen
        if self.step and self.plan[self.step - 1].get("name") == "search_customers":
            self.customer_id = first_field(seen, "id") or NO_CUSTOMER
        if self.step:
            for name, pattern in (self.plan[self.step - 1].get("read") or {}).items():
                found = compile_pattern(pattern).search(observation)  # a task file's regex
                self.read[name] = found.group(1) if found else NOT_FOUND
        if self.step >= len(self.plan):
            return None
        entry = self.plan[self.step]
        self.step += 1
        if "answer" in entry:
            answer = fill(str(entry["answer"]), self.read)
            if self.kind.startswith(("email_by", "phone_by")):
                field = "phone" if self.kind.startswith("phone") else "email"
                answer = first_field(self.last, field) or NOT_FOUND
            self.messages.append({"role": "assistant", "content": answer})
            self.call = None
            return Decision(answer=answer)
        arguments = fill(entry["arguments"], self.read)
        if "customer_id" in arguments and self.customer_id is not None:
            arguments["customer_id"] = self.customer_id
        call = {"name": entry["name"], "arguments": arguments}
        self.call = call
        self.messages.append({"role": "assistant", "content": json.dumps(call)})
        return Decision(action=call)
