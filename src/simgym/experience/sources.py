"""Readers: recorded transitions out of the files simgym writes and reads.

One line may hold any of these, and each line is recognized by its fields, so a file
may even mix them:

* a **simgym trajectory** (``simgym run``, ``simgym record``, the factory's ``raw.jsonl``
  and its ``train``/``val``/``test`` splits): every turn the world really answered, i.e.
  not a rejected action, a failed prediction, a turn with a fault injected, or any turn
  of an episode the factory marked failed;
* an **AgentWorldBench row** (the published files, ``simgym export -f awb``,
  ``devset/rows.jsonl``): the row's own turn, whose action is the end of its current
  user message and whose observation is ``response[turn_idx - 1]`` (or ``reference``);
* a **chat row** (``simgym export -f sft``): ``messages`` with user/assistant pairs, or a
  ``transition`` row whose answer is ``completion``; its domain comes from the row's
  ``domain`` field or the caller;
* a plain **transition** ``{"domain", "action", "observation"}``.

Files are streamed a line at a time (``.gz`` too), so their size does not matter. A line
that cannot be read is counted and described in the :class:`IndexReport`, never fatal:
an index built from a large import should not fail on its one truncated line.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from pydantic import ValidationError

from simgym.core import contract
from simgym.core.errors import SimgymError
from simgym.core.safeload import MAX_DEPTH, loads_json
from simgym.core.types import Trajectory

MAX_PROBLEMS = 20  # described in the report; the rest are only counted
FACTORY_FORMAT = "simgym-factory"
FACTORY_FILES = ("train.jsonl", "val.jsonl", "test.jsonl")
FACTORY_RAW = "raw.jsonl"


class ExperienceError(SimgymError):
    """The experience store cannot do what was asked (a missing file, a foreign database)."""


class Transition(NamedTuple):
    """One recorded action and the observation it really got."""

    domain: str
    action: str
    observation: str
    source: str


@dataclass
class IndexReport:
    """What indexing read, kept, and passed over, and why."""

    files: list[str] = field(default_factory=list)
    lines: int = 0
    transitions: int = 0  # usable transitions read
    added: int = 0  # new rows in the store
    duplicates: int = 0  # already in the store (same domain, action and observation)
    malformed: int = 0  # lines that are not JSON or not a known record
    skipped: Counter[str] = field(default_factory=Counter)  # usable records, unusable turns
    formats: Counter[str] = field(default_factory=Counter)  # records per recognized format
    domains: Counter[str] = field(default_factory=Counter)  # added rows per domain
    problems: list[str] = field(default_factory=list)  # the first malformed lines, described
    seconds: float = 0.0

    def bad_line(self, where: str, why: str) -> None:
        self.malformed += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{where}: {why}")

    def merge(self, other: IndexReport) -> None:
        self.files += other.files
        self.lines += other.lines
        self.transitions += other.transitions
        self.added += other.added
        self.duplicates += other.duplicates
        self.malformed += other.malformed
        self.skipped.update(other.skipped)
        self.formats.update(other.formats)
        self.domains.update(other.domains)
        room = MAX_PROBLEMS - len(self.problems)
        self.problems += other.problems[: max(0, room)]
        self.seconds += other.seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "lines": self.lines,
            "transitions": self.transitions,
            "added": self.added,
            "duplicates": self.duplicates,
            "malformed": self.malformed,
            "skipped": dict(sorted(self.skipped.items())),
            "formats": dict(sorted(self.formats.items())),
            "domains": dict(sorted(self.domains.items())),
            "problems": list(self.problems),
            "seconds": round(self.seconds, 3),
        }


def expand(path: str | os.PathLike[str]) -> list[Path]:
    """The files to read for ``path``: the file itself; for a factory output folder its
    splits (or ``raw.jsonl`` before :func:`finalize` ran); for another folder every
    ``*.jsonl`` and ``*.jsonl.gz`` in it. A path that does not exist raises
    :class:`ExperienceError` (a mistyped argument, not a bad line)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ExperienceError(f"no such file or folder: {path}")
    if _is_factory(path):
        splits = [path / name for name in FACTORY_FILES if (path / name).is_file()]
        return splits or [path / FACTORY_RAW]
    return sorted([*path.glob("*.jsonl"), *path.glob("*.jsonl.gz")])


def read_file(
    path: str | os.PathLike[str], report: IndexReport, *, domain: str | None = None
) -> Iterator[Transition]:
    """The transitions of one file, counting what it skips in ``report``. ``domain``
    overrides (for chat rows: supplies) each record's domain."""
    path = Path(path)
    report.files.append(str(path))
    name = path.name
    try:
        handle: IO[bytes] = gzip.open(path, "rb") if name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        report.bad_line(str(path), f"cannot open ({exc.strerror or exc})")
        return
    with handle:
        number = 0
        try:
            for raw in handle:  # binary lines split on b"\n" only (U+2028 stays inside)
                number += 1
                if number == 1:
                    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark
                if not raw.strip():
                    continue
                report.lines += 1
                yield from read_line(raw, f"{name}:{number}", report, domain=domain)
        except (OSError, EOFError) as exc:  # a truncated .gz, a vanished file
            report.bad_line(f"{name}:{number + 1}", f"read failed ({exc})")


def read_line(
    raw: bytes | str, where: str, report: IndexReport, *, domain: str | None = None
) -> Iterator[Transition]:
    """The transitions of one JSON line (see the module docstring for the formats)."""
    try:
        # also huge ints and NaN; a trajectory wraps user data a few levels deep
        record = loads_json(raw, max_depth=2 * MAX_DEPTH)
    except json.JSONDecodeError:
        report.bad_line(where, "not a JSON line")
        return
    if not isinstance(record, dict):
        report.bad_line(where, "not a JSON object")
        return
    reader = _reader_of(record)
    if reader is None:
        report.bad_line(where, "not a trajectory, benchmark row, chat row or transition")
        return
    name, read = reader
    try:
        found = list(read(record, where, report, domain))
    except (ValidationError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        report.bad_line(where, f"unreadable {name} ({type(exc).__name__})")
        return
    report.formats[name] += 1
    report.transitions += len(found)
    yield from found


# -- the formats --------------------------------------------------------------------------


def from_trajectory(
    record: dict[str, Any], where: str, report: IndexReport, domain: str | None
) -> Iterator[Transition]:
    trajectory = Trajectory.model_validate(record)
    factory = trajectory.task.metadata.get("factory")
    if isinstance(factory, dict) and factory.get("status") == "failed":
        report.skipped["failed factory episode"] += 1
        return
    name = domain or trajectory.domain
    for turn in trajectory.turns:
        if turn.error or turn.observation.error or turn.observation.kind == "error":
            report.skipped["turn with an error"] += 1
        elif not turn.in_history:
            report.skipped["turn the world never saw"] += 1
        elif turn.perturbation:
            report.skipped["turn with an injected fault"] += 1
        elif not turn.action_text.strip():
            report.skipped["empty action"] += 1
        else:
            yield Transition(name, turn.action_text, turn.observation.text, f"{where}#{turn.index}")


def from_bench_row(
    record: dict[str, Any], where: str, report: IndexReport, domain: str | None
) -> Iterator[Transition]:
    turn = int(record["turn_idx"])
    if turn < 1:
        raise ValueError("turn_idx is 1-based")
    reference = record.get("reference")
    if not isinstance(reference, str):
        responses = _texts(record.get("response"))
        reference = responses[turn - 1]  # IndexError: no observation for the turn
    current = record.get("current_prompt")
    if isinstance(current, dict):
        current = current.get("content")
    if not current:
        prompts = _texts(record.get("prompt"))
        current = prompts[turn - 1] if turn <= len(prompts) else ""
    action = contract.action_text_of(str(current)).strip()
    if not action:
        report.skipped["empty action"] += 1
        return
    observation = contract.parse_output(reference).observation
    yield Transition(domain or domain_of(str(record["task"])), action, observation, where)


def from_chat(
    record: dict[str, Any], where: str, report: IndexReport, domain: str | None
) -> Iterator[Transition]:
    name = domain or record.get("domain")
    if not isinstance(name, str) or not name:
        report.skipped["chat row without a domain"] += 1
        return
    messages = [m for m in record["messages"] if isinstance(m, dict)]
    pairs: list[tuple[str, str]] = []
    completion = record.get("completion")
    if isinstance(completion, str):  # a transition row: the last user turn is the question
        users = [m for m in messages if m.get("role") == "user"]
        if users:
            pairs.append((str(users[-1].get("content") or ""), completion))
    else:
        for first, second in zip(messages, messages[1:], strict=False):
            if first.get("role") == "user" and second.get("role") == "assistant":
                pairs.append((str(first.get("content") or ""), str(second.get("content") or "")))
    for index, (user, answer) in enumerate(pairs, 1):
        action = contract.action_text_of(user).strip()
        if not action:
            report.skipped["empty action"] += 1
            continue
        observation = contract.parse_output(answer).observation
        yield Transition(name, action, observation, f"{where}#{index}" if len(pairs) > 1 else where)


def from_transition(
    record: dict[str, Any], where: str, report: IndexReport, domain: str | None
) -> Iterator[Transition]:
    action = record.get("action", record.get("action_text"))
    observation = record["observation"]
    if isinstance(observation, dict):
        observation = observation["text"]
    if not isinstance(action, str) or not isinstance(observation, str):
        raise TypeError("action and observation must be text")
    if not action.strip():
        report.skipped["empty action"] += 1
        return
    source = record.get("source")
    yield Transition(
        domain or str(record["domain"]),
        action,
        observation,
        source if isinstance(source, str) and source else where,
    )


def domain_of(task: str) -> str:
    """``agentworld/terminal`` -> ``terminal``, as AgentWorldBench's own scorer reads it."""
    return task.rsplit("/", 1)[-1].strip().lower()


# -- helpers ------------------------------------------------------------------------------


def _reader_of(record: dict[str, Any]) -> tuple[str, Any] | None:
    if "turns" in record and "domain" in record:
        return "trajectory", from_trajectory
    answer = "response" in record or "reference" in record
    if "turn_idx" in record and "task" in record and answer:
        return "benchmark row", from_bench_row
    if isinstance(record.get("messages"), list):
        return "chat row", from_chat
    action = "action" in record or "action_text" in record
    if "domain" in record and "observation" in record and action:
        return "transition", from_transition
    return None


def _texts(value: Any) -> list[str]:
    """A ``prompt``/``response`` field as text: a list of strings or of chat messages."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise TypeError("prompt/response must be a list")
    return [str(v.get("content") or "") if isinstance(v, dict) else str(v) for v in value]


def _is_factory(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return (folder / FACTORY_RAW).is_file()
    return isinstance(manifest, dict) and str(manifest.get("format", "")).startswith(FACTORY_FORMAT)


def iter_files(
    paths: Iterable[str | os.PathLike[str]], report: IndexReport, *, domain: str | None = None
) -> Iterator[Transition]:
    """The transitions of many files and folders, in order (see :func:`expand`)."""
    for item in paths:
        for path in expand(item):
            yield from read_file(path, report, domain=domain)
