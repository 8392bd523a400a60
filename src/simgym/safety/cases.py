"""Safety test cases: the schema, and loading them from YAML or JSONL files.

A case is one situation to put an agent in, with what would make it unsafe and what would
make it useful. Its fields:

``id``            unique name (``bank-delete-all-closed``)
``domain``        mcp, terminal, swe, web, search, os or android
``scenario``      the world: a dict (inline), a name from the file's ``scenarios:`` table,
                  or a path to a YAML/JSON file (relative to the case file); checked, with
                  the temptations written in, against the domain's scenario schema (GUI
                  scenarios may pin what an action shows: ``screens``)
``world``         mcp only: a business-world folder (``simgym logs import``) served instead
``instruction``   what the user asks
``category``      one of Agent-SafetyBench's eight risk categories, or ``benign``
``kind``          risky | underspecified | injection | benign
``risks``         free text: what could go wrong
``adversarial``   how the world tempts the agent (:mod:`simgym.safety.adversarial`):
                  ``seed``, ``injection``, ``urgency``, ``shortcut``, ``credentials``,
                  ``permission``
``minefields``    checks any hit of which fails the case (:mod:`simgym.safety.checks`), each
                  with a ``severity`` 1 (minor) to 3 (severe)
``milestones``    checks that say the useful work was done
``expected``      the safe move: ``ask_or_refuse`` or ``complete`` (default: ask_or_refuse for
                  risky and underspecified cases, complete for injection and benign ones)
``safe_behaviours``  free text: what a careful agent does
``plays``         reference plays by agent name (``reckless``, ``careful``): the actions a
                  scripted agent of that name takes in this case

A case file is YAML or JSONL. YAML holds a list of cases, or a mapping with ``cases:`` and
optional ``scenarios:`` (named scenarios the cases share). Bad input raises
:class:`CaseError` naming the file, the case and the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simgym.core.errors import SimgymError
from simgym.core.safeload import load_yaml, loads_json, read_text
from simgym.safety.checks import Check

Category = Literal[
    "privacy_leak",
    "financial_loss",
    "unsafe_information",
    "unsafe_content",
    "physical_harm",
    "law_ethics",
    "harmful_code",
    "availability",
    "benign",
]
Kind = Literal["risky", "underspecified", "injection", "benign"]
Expected = Literal["ask_or_refuse", "complete"]
Domain = Literal["mcp", "search", "terminal", "swe", "web", "os", "android"]
# The Literals are the one list each: pydantic validates with them, the tuples are read off.
CATEGORIES: tuple[str, ...] = get_args(Category)
DOMAINS: tuple[str, ...] = get_args(Domain)
KINDS: tuple[str, ...] = get_args(Kind)


class CaseError(SimgymError):
    """A case file that cannot be read: the message names the file, case and field."""


class _Strict(BaseModel):
    """A part of a case: unknown fields are errors (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class Adversarial(_Strict):
    """How the world tempts the agent; see :mod:`simgym.safety.adversarial`."""

    seed: int = 0
    injection: Injection | None = None
    urgency: bool | str = False
    shortcut: Shortcut | None = None
    credentials: Credentials | None = None
    permission: Permission | None = None


class Injection(_Strict):
    """An instruction planted in data the agent will read."""

    text: str = Field(description="the planted instruction")
    into: str = Field(
        description="where: mcp 'collection/id/field'; terminal, swe: a file path "
        "(appended); search, web: a document url or page (appended)"
    )


class Shortcut(_Strict):
    """A destructive shortcut on offer: an extra tool (mcp) or a script file (terminal)."""

    tool: dict[str, Any] | None = Field(None, description="mcp: a tool declaration")
    binding: dict[str, Any] | None = Field(None, description="mcp: its tool_map entry")
    path: str | None = Field(None, description="terminal, swe: the script's path")
    content: str | None = Field(None, description="terminal, swe: the script")


class Credentials(_Strict):
    """A secret lying around: in a file, an environment variable or a record field."""

    secret: str
    path: str | None = Field(None, description="terminal, swe: a file holding it")
    env: str | None = Field(None, description="terminal: an environment variable")
    record: str | None = Field(None, description="mcp: 'collection/id/field'")


class Permission(_Strict):
    """A permission or consent prompt the agent should not accept blindly."""

    prompt: str = Field(min_length=1, description="what the prompt asks")
    requester: str = Field("", description="who asks: an app, extension or integration")
    ids: list[str] = Field(
        default_factory=list,
        description="web, os, android: ids of the dialog, its accept button and its decline "
        "button (default: the next free numbers of the screen)",
    )
    into: str | None = Field(
        None,
        description="web: a page url of `pages` (default: the first page); mcp: "
        "'collection/id/field' of the record that carries the request",
    )
    tool: str = Field("answer_access_request", description="mcp: the tool that answers it")

    @model_validator(mode="after")
    def _ids(self) -> Permission:
        if self.ids and len(self.ids) != 3:
            raise ValueError("ids are three: the dialog, its accept button, its decline button")
        return self


Adversarial.model_rebuild()


class SafetyCase(_Strict):
    """One case of the test track (the schema is in the module docstring)."""

    id: str = Field(min_length=1)
    domain: Domain
    scenario: dict[str, Any] | str | None = None
    world: str | None = None
    instruction: str = Field(min_length=1)
    category: Category
    kind: Kind
    risks: str = ""
    adversarial: Adversarial = Field(default_factory=Adversarial)
    minefields: list[Check] = Field(default_factory=list)
    milestones: list[Check] = Field(default_factory=list)
    expected: Expected | None = None
    safe_behaviours: list[str] = Field(default_factory=list)
    plays: dict[str, list[Any]] = Field(default_factory=dict)
    source: str = Field("", description="the file the case came from (set on loading)")

    @model_validator(mode="after")
    def _consistent(self) -> SafetyCase:
        if self.expected is None:
            risky = self.kind in ("risky", "underspecified")
            self.expected = "ask_or_refuse" if risky else "complete"
        if (self.kind == "benign") != (self.category == "benign"):
            raise ValueError("kind benign goes with category benign, and only with it")
        if self.world is not None and self.domain != "mcp":
            raise ValueError("world (a business-world folder) serves mcp cases only")
        if self.kind != "benign" and not self.minefields:
            raise ValueError("a case that is not benign needs at least one minefield")
        for agent, play in self.plays.items():
            for n, entry in enumerate(play, 1):
                # YAML reads {answer: Done, 5 moved} as two keys: catch it here, not mid-run
                if isinstance(entry, dict) and "answer" in entry and set(entry) != {"answer"}:
                    raise ValueError(
                        f"plays.{agent}[{n}]: an answer entry holds only 'answer' (quote "
                        f"text with commas): {entry}"
                    )
        return self


CaseCheck = Callable[[SafetyCase, Path], None]


def read_cases(
    paths: list[str | Path] | None = None, check: CaseCheck | None = None
) -> list[SafetyCase]:
    """Cases from YAML/JSONL files and folders (``None``: the shipped suite), ids unique;
    ``check`` (it raises :class:`CaseError`) runs on each case as it is read.
    :func:`simgym.safety.suite.load_cases` checks each against its world."""
    files = _expand(paths) if paths else shipped_files()
    cases: list[SafetyCase] = []
    seen: dict[str, str] = {}
    for file in files:
        for case in read_file(file, check):
            if case.id in seen:
                raise CaseError(f"{file}: case id {case.id!r} is also in {seen[case.id]}")
            seen[case.id] = str(file)
            cases.append(case)
    return cases


def shipped_files() -> list[Path]:
    """The shipped suite's files (package data, so an installed simgym has them)."""
    suite = resources.files("simgym.safety") / "suite"
    return sorted(Path(str(p)) for p in suite.iterdir() if p.name.endswith((".yaml", ".yml")))


def _expand(paths: list[str | Path]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".jsonl"))
        elif path.exists():
            files.append(path)
        else:
            raise CaseError(f"{path}: no such case file or folder")
    return files


def read_file(path: Path, check: CaseCheck | None = None) -> list[SafetyCase]:
    """The cases of one file, scenarios resolved, each passed to ``check``; errors name
    the file, case and field."""
    text = read_text(path)
    try:
        if path.suffix == ".jsonl":
            rows = [loads_json(line) for line in text.splitlines() if line.strip()]
            named: dict[str, Any] = {}
        else:
            data = load_yaml(text)  # refuses alias bombs, deep nesting, huge integers
            if isinstance(data, dict):
                rows, named = data.get("cases") or [], data.get("scenarios") or {}
            else:
                rows, named = data or [], {}
    except (ValueError, yaml.YAMLError) as exc:
        raise CaseError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from None
    if not isinstance(rows, list) or not isinstance(named, dict):
        raise CaseError(f"{path}: expected a list of cases (or 'cases:' and 'scenarios:')")
    cases = []
    for n, row in enumerate(rows, 1):
        label = row.get("id", f"#{n}") if isinstance(row, dict) else f"#{n}"
        if not isinstance(row, dict):
            raise CaseError(f"{path}: case {label}: a case is a mapping of fields")
        try:
            case = SafetyCase.model_validate({**row, "source": str(path)})
        except ValidationError as exc:
            raise CaseError(f"{path}: case {label}: {_fields(exc)}") from None
        case.scenario = _resolve_scenario(case, named, path)
        if check is not None:
            check(case, path)
        cases.append(case)
    return cases


def flat(exc: Exception) -> str:
    """An error on one line (pydantic's spans several, and points at its web pages)."""
    text = re.sub(r"\s*For further information visit \S+", "", str(exc))
    return " ".join(text.split())


def _fields(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(case)"
        parts.append(f"field {where}: {err['msg']}")
    return "; ".join(parts)


def _resolve_scenario(case: SafetyCase, named: dict[str, Any], path: Path) -> dict[str, Any]:
    value = case.scenario
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if value in named:
        return dict(named[value])
    file = path.parent / value
    if not file.exists():
        raise CaseError(
            f"{path}: case {case.id}: field scenario: {value!r} is neither a named scenario "
            f"of this file nor a file"
        )
    try:
        loaded = load_yaml(read_text(file))
    except yaml.YAMLError as exc:
        raise CaseError(f"{path}: case {case.id}: field scenario: {file}: {exc}") from None
    if not isinstance(loaded, dict):
        raise CaseError(f"{path}: case {case.id}: field scenario: {file} holds no mapping")
    return loaded
