"""Rule verifiers: rewards computed from the trajectory alone, without a model.

Each verifier is a small class with a ``name`` and ``async score(trajectory)``. Reference
data (the expected answer, a pattern, a table) comes from the constructor when given,
else from ``trajectory.task.metadata``, so one verifier can score a whole task set.

* answer match: :class:`ExactMatch`, :class:`TokenF1`, :class:`Contains` (SQuAD-style
  normalization: case, punctuation, articles, whitespace; equal numbers match),
  :class:`RegexMatch`;
* :class:`StateCheck`: predicates over ``final_state`` or the final observation read as
  JSON (a path exists, equals, contains; a record in a collection exists or not);
* :class:`ToolCallCheck`: a tool was (not) called, with arguments, within count bounds;
* :class:`TableF1`: item-level and row-level F1 of a filled table (WideSearch style).

A verifier never raises on a bad episode or bad task data: it scores 0.0 and says why in
``details["error"]``. Bad constructor options raise :class:`SimgymError` at once.
"""

from __future__ import annotations

import json
import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Action, Trajectory, Turn
from simgym.rewards.base import RewardResult

TARGETS = ("answer", "final_observation")
STATE_SOURCES = ("final_state", "final_observation")
MODES = ("all", "fraction")

# -- normalization ----------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _is_punctuation(ch: str) -> bool:
    return ch in _PUNCTUATION or unicodedata.category(ch).startswith("P")


def normalize_answer(text: Any) -> str:
    """Lower case, no punctuation, no articles (a, an, the), single spaces.

    Unlike plain SQuAD normalization, a decimal point between digits and a minus sign
    before a number are kept, so "3.5" stays apart from "35" and "-2" from "2"; a comma
    between digits is dropped ("1,200" reads as "1200").
    """
    text = unicodedata.normalize("NFKC", str(text)).lower()
    kept: list[str] = []
    for i, ch in enumerate(text):
        if not _is_punctuation(ch):
            kept.append(ch)
            continue
        before = text[i - 1] if i > 0 else " "
        after = text[i + 1] if i + 1 < len(text) else " "
        if ch == "." and before.isdigit() and after.isdigit():
            kept.append(ch)
        elif ch == "-" and after.isdigit() and not before.isalnum():
            kept.append(ch)
        # anything else is dropped, as SQuAD does ("don't" -> "dont")
    return " ".join(_ARTICLES.sub(" ", "".join(kept)).split())


def _as_number(normalized: str) -> float | None:
    return float(normalized) if _NUMBER.fullmatch(normalized) else None


def answers_match(got: Any, expected: Any) -> bool:
    """Equal after :func:`normalize_answer`, or both the same number ("3.50" == "3.5")."""
    a, b = normalize_answer(got), normalize_answer(expected)
    if a == b:
        return True
    x, y = _as_number(a), _as_number(b)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


def token_f1(got: Any, expected: Any) -> float:
    """SQuAD token F1 of the normalized texts (1.0 when both are empty)."""
    got_tokens = normalize_answer(got).split()
    ref_tokens = normalize_answer(expected).split()
    if not got_tokens or not ref_tokens:
        return float(got_tokens == ref_tokens)
    common = sum((Counter(got_tokens) & Counter(ref_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(got_tokens), common / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def _text_of(value: Any) -> str:
    """A reference value as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _check_choice(label: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise SimgymError(f"{label} must be one of {', '.join(choices)}; got {value!r}")
    return value


# -- base -------------------------------------------------------------------------------


class Verifier:
    """Shared plumbing: a name (``name=`` renames it) and results labelled with it."""

    name = "verifier"

    def __init__(self, *, name: str | None = None) -> None:
        if name is not None:
            if not isinstance(name, str) or not name:
                raise SimgymError("a reward name must be a non-empty string")
            self.name = name

    async def score(self, trajectory: Trajectory) -> RewardResult:
        return self.check(trajectory)

    def check(self, trajectory: Trajectory) -> RewardResult:
        """The synchronous score (rule verifiers need no I/O)."""
        raise NotImplementedError

    def result(self, value: float, **details: Any) -> RewardResult:
        return RewardResult(value=value, parts={self.name: value}, details=details)

    def fail(self, error: str, **details: Any) -> RewardResult:
        return self.result(0.0, error=error, **details)


def _episode_text(trajectory: Trajectory, target: str) -> str | None:
    """The text a verifier reads: the final answer (None when the agent gave none) or
    the last observation the world produced."""
    if target == "answer":
        return trajectory.answer
    return trajectory.final_observation


# -- answer match -----------------------------------------------------------------------


class _AnswerVerifier(Verifier):
    """Compares the answer (or final observation) with one or more reference answers:
    ``answer=``/``answers=`` options, else ``metadata["answers"]`` or ``["answer"]``."""

    def __init__(
        self,
        answer: Any = None,
        answers: Sequence[Any] | None = None,
        *,
        target: str = "answer",
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.target = _check_choice("target", target, TARGETS)
        refs = list(answers or []) + ([] if answer is None else [answer])
        self.references = [_text_of(r) for r in refs] or None

    def _references(self, trajectory: Trajectory) -> list[str]:
        if self.references:
            return self.references
        meta = trajectory.task.metadata
        found = meta.get("answers")
        if found is None:
            found = meta.get("answer")
        if found is None:
            return []
        items = found if isinstance(found, list) else [found]
        return [_text_of(r) for r in items]

    def check(self, trajectory: Trajectory) -> RewardResult:
        refs = self._references(trajectory)
        if not refs:
            return self.fail(
                "no reference answer: the task has no metadata 'answer' or 'answers' and "
                "none was given to the reward"
            )
        got = _episode_text(trajectory, self.target)
        if got is None:
            return self.fail("the agent gave no final answer", expected=refs)
        value = max(self.compare(got, ref) for ref in refs)
        return self.result(
            value, expected=refs, got=got, normalized=normalize_answer(got), target=self.target
        )

    def compare(self, got: str, expected: str) -> float:
        raise NotImplementedError


class ExactMatch(_AnswerVerifier):
    """1.0 when the normalized answer equals a reference answer."""

    name = "exact"

    def compare(self, got: str, expected: str) -> float:
        return float(answers_match(got, expected))


class TokenF1(_AnswerVerifier):
    """The best token F1 between the answer and any reference answer."""

    name = "f1"

    def compare(self, got: str, expected: str) -> float:
        return token_f1(got, expected)


class Contains(_AnswerVerifier):
    """1.0 when a normalized reference answer appears, as whole words, in the answer."""

    name = "contains"

    def compare(self, got: str, expected: str) -> float:
        needle = normalize_answer(expected)
        return float(bool(needle) and f" {needle} " in f" {normalize_answer(got)} ")


class RegexMatch(Verifier):
    """1.0 when ``pattern`` (else ``metadata["pattern"]``) matches the answer or the final
    observation: ``mode="search"`` anywhere, ``"fullmatch"`` the whole stripped text."""

    name = "regex"

    def __init__(
        self,
        pattern: str | None = None,
        *,
        mode: str = "search",
        target: str = "answer",
        ignore_case: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.mode = _check_choice("mode", mode, ("search", "fullmatch"))
        self.target = _check_choice("target", target, TARGETS)
        self.flags = re.IGNORECASE if ignore_case else 0
        self.pattern = None
        if pattern is not None:
            try:
                self.pattern = re.compile(pattern, self.flags)
            except (re.error, TypeError) as exc:
                raise SimgymError(f"regex reward: invalid pattern {pattern!r}: {exc}") from None

    def check(self, trajectory: Trajectory) -> RewardResult:
        pattern = self.pattern
        if pattern is None:
            raw = trajectory.task.metadata.get("pattern")
            if raw is None:
                return self.fail("no pattern: the task has no metadata 'pattern'")
            try:
                pattern = re.compile(raw, self.flags)
            except (re.error, TypeError) as exc:
                return self.fail(f"invalid pattern {raw!r}: {exc}")
        got = _episode_text(trajectory, self.target)
        if got is None:
            return self.fail("the agent gave no final answer", pattern=pattern.pattern)
        found = pattern.fullmatch(got.strip()) if self.mode == "fullmatch" else pattern.search(got)
        return self.result(
            float(found is not None),
            pattern=pattern.pattern,
            mode=self.mode,
            target=self.target,
            got=got,
            matched=found.group(0) if found else None,
        )


# -- paths and values -------------------------------------------------------------------

_MISSING = object()
_INDEX = re.compile(r"0|[1-9]\d*")


def split_path(path: str) -> list[str]:
    """The keys of a path: a JSON Pointer (RFC 6901, ``/customers/1/email``; ``""`` is the
    whole document) or a dotted path (``customers.1.email``)."""
    if not isinstance(path, str):
        raise SimgymError(f"a path must be a string, not {path!r}")
    if path == "":
        return []
    if path.startswith("/"):
        keys = []
        for raw in path[1:].split("/"):
            if re.search(r"~(?![01])", raw):
                raise SimgymError(f"invalid JSON Pointer {path!r}: '~' must be '~0' or '~1'")
            keys.append(raw.replace("~1", "/").replace("~0", "~"))
        return keys
    keys = path.split(".")
    if any(k == "" for k in keys):
        raise SimgymError(f"invalid dotted path {path!r}: empty key")
    return keys


def resolve_path(document: Any, keys: Sequence[str]) -> Any:
    """The value at ``keys`` in a JSON document, or ``_MISSING``. List indexes are
    decimal numbers without leading zeros (RFC 6901); ``-`` never resolves."""
    node = document
    for key in keys:
        if isinstance(node, dict):
            if key not in node:
                return _MISSING
            node = node[key]
        elif isinstance(node, list):
            if not _INDEX.fullmatch(key) or int(key) >= len(node):
                return _MISSING
            node = node[int(key)]
        else:
            return _MISSING
    return node


def values_equal(actual: Any, expected: Any, *, loose: bool = False) -> bool:
    """JSON equality (numbers by value, booleans apart from numbers). With ``loose``,
    scalars compare as answers do (case, punctuation, "450" == 450)."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(
            values_equal(actual[k], expected[k], loose=loose) for k in expected
        )
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(
            values_equal(a, e, loose=loose) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(actual, bool) or isinstance(expected, bool):
        if isinstance(actual, bool) and isinstance(expected, bool):
            return actual == expected
        return loose and answers_match(_text_of(actual), _text_of(expected))
    numbers = (int, float)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12)
    if loose and not isinstance(actual, dict | list) and not isinstance(expected, dict | list):
        if actual is None or expected is None:
            return actual is expected
        return answers_match(_text_of(actual), _text_of(expected))
    return bool(actual == expected)


def matches_subset(actual: Any, expected: Any, *, loose: bool = False) -> bool:
    """Like :func:`values_equal`, except that an expected object only needs its own keys
    to be present and to match (recursively); other keys in ``actual`` are ignored."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and matches_subset(actual[k], v, loose=loose) for k, v in expected.items()
        )
    return values_equal(actual, expected, loose=loose)


def _contains(container: Any, needle: Any, loose: bool) -> bool:
    if isinstance(container, str):
        if not isinstance(needle, str | int | float) or isinstance(needle, bool):
            return False
        if loose:
            small = normalize_answer(_text_of(needle))
            return f" {small} " in f" {normalize_answer(container)} "
        return _text_of(needle) in container
    if isinstance(container, list):
        return any(matches_subset(item, needle, loose=loose) for item in container)
    if isinstance(container, dict):
        if isinstance(needle, str):
            return needle in container
        return isinstance(needle, dict) and matches_subset(container, needle, loose=loose)
    return False


def _preview(value: Any, limit: int = 500) -> Any:
    """A value for the details: itself, or its JSON cut short when it is large (a whole
    table of records would bloat every trajectory line)."""
    text = _text_of(value)
    return value if len(text) <= limit else text[:limit] + "..."


def _records(collection: Any) -> list[Any] | None:
    """The records of a collection: a list's items or an object's values (records keyed
    by id, as the MCP domain keeps them)."""
    if isinstance(collection, list):
        return collection
    if isinstance(collection, dict):
        return list(collection.values())
    return None


# -- check lists ------------------------------------------------------------------------


def _check_keys(kind: str, spec: Any, allowed: set[str], required: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise SimgymError(f"a {kind} check is an object, not {spec!r}")
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise SimgymError(
            f"{kind} check {spec!r}: unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    if required not in spec:
        raise SimgymError(f"{kind} check {spec!r} needs {required!r}")
    return spec


def _score_checks(
    verifier: Verifier, outcomes: list[dict[str, Any]], mode: str, **details: Any
) -> RewardResult:
    passed = sum(1 for o in outcomes if o["passed"])
    if mode == "fraction":
        value = passed / len(outcomes)
    else:
        value = float(passed == len(outcomes))
    return verifier.result(value, passed=passed, total=len(outcomes), checks=outcomes, **details)


_PREDICATES = ("equals", "not_equals", "contains", "record")


@dataclass(frozen=True)
class StatePredicate:
    """One predicate on a JSON document, read from a dict:

    * ``{"path": P}`` / ``{"path": P, "exists": false}``: the path resolves (or not);
    * ``{"path": P, "equals": V}``, ``"not_equals"``, ``"contains"`` (substring of a
      string, member of a list, key or sub-object of an object);
    * ``{"path": P, "record": {field: value}}``: some record of the list (or object of
      records) at P has these fields; with ``"exists": false``, none has.

    ``"loose": true`` compares scalars as answers are compared.
    """

    spec: dict[str, Any]
    keys: tuple[str, ...]

    @classmethod
    def parse(cls, spec: Any) -> StatePredicate:
        spec = _check_keys("state", spec, {"path", "exists", "loose", *_PREDICATES}, "path")
        given = [p for p in _PREDICATES if p in spec]
        if len(given) > 1:
            raise SimgymError(f"state check {spec!r}: use one of {', '.join(given)}, not both")
        if "exists" in spec and not isinstance(spec["exists"], bool):
            raise SimgymError(f"state check {spec!r}: 'exists' must be true or false")
        if given and given[0] != "record" and spec.get("exists") is False:
            raise SimgymError(f"state check {spec!r}: 'exists: false' goes with 'record' only")
        if "record" in spec and not isinstance(spec["record"], dict):
            raise SimgymError(f"state check {spec!r}: 'record' must be an object of fields")
        return cls(dict(spec), tuple(split_path(spec["path"])))

    def evaluate(self, document: Any) -> dict[str, Any]:
        spec, loose = self.spec, bool(self.spec.get("loose", False))
        value = resolve_path(document, self.keys)
        found = value is not _MISSING
        outcome: dict[str, Any] = {"check": spec, "got": _preview(value) if found else None}
        if "record" in spec:
            records = _records(value) if found else None
            if records is None:
                return {**outcome, "passed": False, "why": "no list or object of records there"}
            hits = [r for r in records if matches_subset(r, spec["record"], loose=loose)]
            want = spec.get("exists", True)
            outcome["got"] = f"{len(hits)} matching of {len(records)} record(s)"
            return {**outcome, "passed": bool(hits) == want}
        if not found:
            return {**outcome, "passed": spec.get("exists") is False, "why": "path not found"}
        if "equals" in spec:
            return {**outcome, "passed": values_equal(value, spec["equals"], loose=loose)}
        if "not_equals" in spec:
            return {**outcome, "passed": not values_equal(value, spec["not_equals"], loose=loose)}
        if "contains" in spec:
            return {**outcome, "passed": _contains(value, spec["contains"], loose)}
        return {**outcome, "passed": spec.get("exists", True)}


def _parse_checks(kind: str, checks: Any, single: dict[str, Any], parse: Any) -> list[Any] | None:
    """Checks from ``checks=[...]`` or from one check's keys given directly."""
    if checks is not None and single:
        raise SimgymError(f"{kind} reward: give 'checks' or one check's keys, not both")
    if single:
        checks = [single]
    if checks is None:
        return None
    if not isinstance(checks, list) or not checks:
        raise SimgymError(f"{kind} reward: 'checks' must be a non-empty list")
    return [parse(c) for c in checks]


def _json_document(text: str) -> Any:
    body = text.strip()
    if body.startswith("```"):
        body = re.sub(r"^```[\w-]*\s*|\s*```$", "", body)
    return json.loads(body)


class StateCheck(Verifier):
    """Predicates (:class:`StatePredicate`) over the episode's ``final_state``, or over
    the final observation parsed as JSON (``source="final_observation"``). Checks come
    from ``checks=[...]`` (or one check's keys), else ``metadata["state_checks"]``.
    ``mode="all"`` scores 1.0 only when every check passes; ``"fraction"`` gives partial
    credit."""

    name = "state"

    def __init__(
        self,
        checks: list[dict[str, Any]] | None = None,
        *,
        source: str = "final_state",
        mode: str = "all",
        name: str | None = None,
        **single: Any,
    ) -> None:
        super().__init__(name=name)
        self.source = _check_choice("source", source, STATE_SOURCES)
        self.mode = _check_choice("mode", mode, MODES)
        self.checks = _parse_checks("state", checks, single, StatePredicate.parse)

    def check(self, trajectory: Trajectory) -> RewardResult:
        checks = self.checks
        if checks is None:
            try:
                checks = _parse_checks(
                    "state", trajectory.task.metadata.get("state_checks"), {}, StatePredicate.parse
                )
            except SimgymError as exc:
                return self.fail(f"bad metadata 'state_checks': {exc}")
            if checks is None:
                return self.fail("no checks: none given and the task has no 'state_checks'")
        if self.source == "final_state":
            document = trajectory.final_state
            if document is None:
                return self.fail("the episode kept no final state (final_state is None)")
        else:
            try:
                document = _json_document(trajectory.final_observation)
            except json.JSONDecodeError as exc:
                return self.fail(
                    f"the final observation is not JSON: {exc}",
                    got=trajectory.final_observation[:500],
                )
        outcomes = [c.evaluate(document) for c in checks]
        return _score_checks(self, outcomes, self.mode, source=self.source)


def tool_call_of(turn: Turn) -> tuple[Action, bool] | None:
    """The tool call a turn made, and whether it failed. An invalid call (rejected, or
    passed to the world as invalid) is recorded without a parsed action, only its text;
    that text is read back so attempts can be counted."""
    if turn.action is not None:
        return (turn.action, bool(turn.error)) if turn.action.kind == "tool_call" else None
    if not turn.action_text.strip().startswith("{"):
        return None
    try:
        action = Action.parse(turn.action_text)
    except SimgymError:
        return None  # cut short or not a call at all: nothing to count
    return (action, True) if action.kind == "tool_call" else None


@dataclass(frozen=True)
class ToolCallPredicate:
    """One check on the tool calls of an episode, read from a dict: ``tool`` (the name),
    optional ``arguments`` (a subset the call's arguments must match), ``called`` (false:
    never called), ``min_count`` / ``max_count`` / ``count``, ``loose``."""

    spec: dict[str, Any]
    low: int
    high: int | None

    @classmethod
    def parse(cls, spec: Any) -> ToolCallPredicate:
        allowed = {"tool", "arguments", "called", "min_count", "max_count", "count", "loose"}
        spec = _check_keys("tool_call", spec, allowed, "tool")
        if not isinstance(spec["tool"], str) or not spec["tool"]:
            raise SimgymError(f"tool_call check {spec!r}: 'tool' must be a tool name")
        if "arguments" in spec and not isinstance(spec["arguments"], dict):
            raise SimgymError(f"tool_call check {spec!r}: 'arguments' must be an object")
        for key in ("min_count", "max_count", "count"):
            bound = spec.get(key)
            if bound is not None and (type(bound) is not int or bound < 0):
                raise SimgymError(f"tool_call check {spec!r}: {key!r} must be an integer >= 0")
        called = spec.get("called", True)
        if not isinstance(called, bool):
            raise SimgymError(f"tool_call check {spec!r}: 'called' must be true or false")
        if not called and {"count", "min_count", "max_count"} & set(spec):
            raise SimgymError(f"tool_call check {spec!r}: 'called: false' takes no counts")
        low = spec.get("count", spec.get("min_count", 1 if called else 0))
        high = spec.get("count", spec.get("max_count", None if called else 0))
        if "count" in spec and ("min_count" in spec or "max_count" in spec):
            raise SimgymError(f"tool_call check {spec!r}: 'count' or min/max, not both")
        if high is not None and low > high:
            raise SimgymError(f"tool_call check {spec!r}: no count fits (min > max)")
        return cls(dict(spec), low, high)

    def evaluate(self, trajectory: Trajectory, count_failed: bool) -> dict[str, Any]:
        spec, loose = self.spec, bool(self.spec.get("loose", False))
        calls = [c for c in map(tool_call_of, trajectory.turns) if c is not None]
        same_name = [(call, failed) for call, failed in calls if call.name == spec["tool"]]
        counted = [call for call, failed in same_name if count_failed or not failed]
        if "arguments" in spec:
            counted = [
                c for c in counted if matches_subset(c.arguments, spec["arguments"], loose=loose)
            ]
        count = len(counted)
        passed = count >= self.low and (self.high is None or count <= self.high)
        bounds = f"{self.low}..{'' if self.high is None else self.high}"
        return {
            "check": spec,
            "passed": passed,
            "count": count,
            "expected_count": bounds,
            "calls": [c.arguments for c, _ in same_name[:5]],  # what was actually sent
            "failed_calls": sum(1 for _, failed in same_name if failed),
        }


class ToolCallCheck(Verifier):
    """Checks (:class:`ToolCallPredicate`) on the tool calls in the turns: from
    ``checks=[...]`` (or one check's keys), else ``metadata["tool_checks"]``. A call that
    failed (invalid, rejected, or its turn errored) does not count unless
    ``count_failed``."""

    name = "tool_call"

    def __init__(
        self,
        checks: list[dict[str, Any]] | None = None,
        *,
        mode: str = "all",
        count_failed: bool = False,
        name: str | None = None,
        **single: Any,
    ) -> None:
        super().__init__(name=name)
        self.mode = _check_choice("mode", mode, MODES)
        self.count_failed = count_failed
        self.checks = _parse_checks("tool_call", checks, single, ToolCallPredicate.parse)

    def check(self, trajectory: Trajectory) -> RewardResult:
        checks = self.checks
        if checks is None:
            try:
                checks = _parse_checks(
                    "tool_call",
                    trajectory.task.metadata.get("tool_checks"),
                    {},
                    ToolCallPredicate.parse,
                )
            except SimgymError as exc:
                return self.fail(f"bad metadata 'tool_checks': {exc}")
            if checks is None:
                return self.fail("no checks: none given and the task has no 'tool_checks'")
        outcomes = [c.evaluate(trajectory, self.count_failed) for c in checks]
        return _score_checks(self, outcomes, self.mode)


# -- tables -----------------------------------------------------------------------------

Rows = list[dict[str, str]]
_DELIMITER_CELL = re.compile(r":?-+:?")


def _split_row(line: str) -> list[str]:
    """The cells of one markdown table line (``\\|`` is a literal bar)."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells = re.split(r"(?<!\\)\|", body)
    return [c.strip().replace("\\|", "|") for c in cells]


def parse_markdown_table(text: str) -> tuple[list[str], list[list[str]]] | None:
    """The header and body rows of the first markdown table in ``text`` (a header line,
    a delimiter line like ``|---|:--:|``, then rows), or None when there is none."""
    lines = text.splitlines()
    for i in range(1, len(lines)):
        if "|" not in lines[i] and "-" not in lines[i]:
            continue
        cells = _split_row(lines[i])
        if not cells or not all(_DELIMITER_CELL.fullmatch(c.replace(" ", "")) for c in cells):
            continue
        if "|" not in lines[i - 1] and "|" not in lines[i]:
            continue
        header = _split_row(lines[i - 1])
        rows = []
        for line in lines[i + 1 :]:
            if "|" not in line or not line.strip():
                break
            rows.append(_split_row(line))
        return header, rows
    return None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _text_of(value)


def parse_table(text: str) -> tuple[Rows, list[str]]:
    """Rows of a table answer: a JSON list of row objects (optionally in a code fence, or
    under one key of an object) or a markdown table. Returns the rows and notes on what
    was repaired; raises ``ValueError`` saying why when there is no usable table."""
    notes: list[str] = []
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    candidate = fenced.group(1).strip() if fenced else body
    if candidate[:1] in ("[", "{"):
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else None
        if isinstance(data, list):
            if not all(isinstance(r, dict) for r in data):
                raise ValueError("the JSON answer is a list, but not of row objects")
            return [{str(k): _cell(v) for k, v in r.items()} for r in data], notes
    table = parse_markdown_table(text)
    if table is None:
        raise ValueError("no markdown table (header, |---| line, rows) or JSON list of rows found")
    header, body_rows = table
    if len(set(header)) != len(header):
        raise ValueError(f"the table header repeats a column: {header}")
    rows = []
    for n, cells in enumerate(body_rows, 1):
        if len(cells) != len(header):
            notes.append(f"row {n} has {len(cells)} cells for {len(header)} columns")
            cells = (cells + [""] * len(header))[: len(header)]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows, notes


def _f1(correct: int, predicted: int, reference: int) -> tuple[float, float, float]:
    if predicted == 0 and reference == 0:
        return 1.0, 1.0, 1.0
    precision = correct / predicted if predicted else 0.0
    recall = correct / reference if reference else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


class TableF1(Verifier):
    """Scores a filled table against the reference rows (``table=`` or
    ``metadata["table"]``, a list of row objects or a markdown table), rows aligned on
    ``key_columns`` (else ``metadata["key_columns"]``, else the first column).

    Item level: each non-empty cell is an item; precision is correct cells over predicted
    cells, recall correct over reference cells. Row level: a row is correct when every
    reference column matches. ``level`` picks which F1 is the value; both are in the
    details. Cells compare as answers do (normalized text, equal numbers). Answer columns
    are matched to reference columns by normalized name; extra columns are ignored."""

    name = "table_f1"

    def __init__(
        self,
        table: list[dict[str, Any]] | str | None = None,
        key_columns: list[str] | None = None,
        *,
        level: str = "item",
        target: str = "answer",
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.level = _check_choice("level", level, ("item", "row"))
        self.target = _check_choice("target", target, TARGETS)
        self.table = table
        self.key_columns = key_columns

    def _reference(self, trajectory: Trajectory) -> tuple[Rows, list[str], list[str]]:
        meta = trajectory.task.metadata
        table = self.table if self.table is not None else meta.get("table")
        if table is None:
            raise ValueError("no reference table: the task has no metadata 'table'")
        if isinstance(table, str):
            try:
                rows, _ = parse_table(table)
            except ValueError as exc:
                raise ValueError(f"the reference table does not parse: {exc}") from None
        elif isinstance(table, list) and all(isinstance(r, dict) for r in table):
            rows = [{str(k): _cell(v) for k, v in r.items()} for r in table]
        else:
            raise ValueError("the reference table must be a list of row objects or markdown")
        columns = list(dict.fromkeys(c for r in rows for c in r))
        keys = self.key_columns if self.key_columns is not None else meta.get("key_columns")
        if keys is None:
            keys = columns[:1]
        if isinstance(keys, str):
            keys = [keys]
        missing = [k for k in keys if k not in columns]
        if not keys or missing:
            raise ValueError(f"key columns {keys} are not columns of the reference {columns}")
        return rows, columns, list(keys)

    def check(self, trajectory: Trajectory) -> RewardResult:
        try:
            reference, columns, keys = self._reference(trajectory)
        except ValueError as exc:
            return self.fail(str(exc))
        got = _episode_text(trajectory, self.target)
        if got is None:
            return self.fail("the agent gave no final answer")
        try:
            predicted, notes = parse_table(got)
        except ValueError as exc:
            return self.fail(f"malformed table: {exc}", got=got[:1000])
        # answer column names -> reference column names, by normalized name
        by_norm = {normalize_answer(c): c for c in columns}
        answer_columns = list(dict.fromkeys(c for r in predicted for c in r))
        mapping: dict[str, str] = {}
        for column in answer_columns:
            target = by_norm.get(normalize_answer(column))
            if target is not None and target not in mapping.values():
                mapping[column] = target
        absent_keys = [k for k in keys if k not in mapping.values()]
        if predicted and absent_keys:
            return self.fail(
                f"malformed table: key column(s) {absent_keys} missing, rows cannot be matched",
                answer_columns=answer_columns,
                got=got[:1000],
            )
        rows = [{mapping[c]: v for c, v in r.items() if c in mapping} for r in predicted]
        return self._score(reference, rows, columns, keys, notes, answer_columns, mapping)

    def _score(
        self,
        reference: Rows,
        rows: Rows,
        columns: list[str],
        keys: list[str],
        notes: list[str],
        answer_columns: list[str],
        mapping: dict[str, str],
    ) -> RewardResult:
        def key_of(row: dict[str, str]) -> tuple[str, ...]:
            return tuple(normalize_answer(row.get(k, "")) for k in keys)

        unmatched: dict[tuple[str, ...], list[int]] = {}
        for i, ref in enumerate(reference):
            unmatched.setdefault(key_of(ref), []).append(i)
        correct_items = correct_rows = 0
        unmatched_rows = []
        for row in rows:
            slots = unmatched.get(key_of(row))
            if not slots:
                unmatched_rows.append({k: row.get(k, "") for k in keys})
                continue
            ref = reference[slots.pop(0)]
            cells_ok = [answers_match(row.get(c, ""), ref.get(c, "")) for c in columns]
            correct_items += sum(
                ok for ok, c in zip(cells_ok, columns, strict=True) if ref.get(c, "") != ""
            )
            correct_rows += all(cells_ok)
        predicted_items = sum(1 for r in rows for c in columns if r.get(c, "") != "")
        reference_items = sum(1 for r in reference for c in columns if r.get(c, "") != "")
        ip, ir, item_f1 = _f1(correct_items, predicted_items, reference_items)
        rp, rr, row_f1 = _f1(correct_rows, len(rows), len(reference))
        value = item_f1 if self.level == "item" else row_f1
        missing_rows = [
            {k: reference[i].get(k, "") for k in keys} for s in unmatched.values() for i in s
        ]
        return self.result(
            value,
            level=self.level,
            item_f1=item_f1,
            item_precision=ip,
            item_recall=ir,
            row_f1=row_f1,
            row_precision=rp,
            row_recall=rr,
            rows_predicted=len(rows),
            rows_reference=len(reference),
            rows_correct=correct_rows,
            unmatched_rows=unmatched_rows[:20],
            missing_rows=missing_rows[:20],
            missing_columns=[c for c in columns if c not in mapping.values()],
            extra_columns=[c for c in answer_columns if c not in mapping],
            notes=notes,
        )
