"""Answer-match verifiers: exact, token F1, contains (SQuAD-style normalization, equal
numbers match) and regex, on the final answer or the final observation."""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.patterns import PatternError, PatternTimeout, compile_pattern
from simgym.core.types import Trajectory
from simgym.rewards._verifier import TARGETS, Verifier, check_choice, episode_text, text_of
from simgym.rewards.base import RewardResult

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
        self.target = check_choice("target", target, TARGETS)
        refs = list(answers or []) + ([] if answer is None else [answer])
        self.references = [text_of(r) for r in refs] or None

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
        return [text_of(r) for r in items]

    def check(self, trajectory: Trajectory) -> RewardResult:
        refs = self._references(trajectory)
        if not refs:
            return self.fail(
                "no reference answer: the task has no metadata 'answer' or 'answers' and "
                "none was given to the reward"
            )
        got = episode_text(trajectory, self.target)
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
        self.mode = check_choice("mode", mode, ("search", "fullmatch"))
        self.target = check_choice("target", target, TARGETS)
        self.ignore_case = ignore_case
        self.pattern = None
        if pattern is not None:
            try:  # bounded time: RE2, or a backtracking match cut off after a second
                self.pattern = compile_pattern(pattern, ignore_case=ignore_case)
            except PatternError as exc:
                raise SimgymError(f"regex reward: {exc}") from None

    def check(self, trajectory: Trajectory) -> RewardResult:
        pattern = self.pattern
        if pattern is None:
            raw = trajectory.task.metadata.get("pattern")
            if raw is None:
                return self.fail("no pattern: the task has no metadata 'pattern'")
            try:
                pattern = compile_pattern(raw, ignore_case=self.ignore_case)
            except PatternError as exc:
                return self.fail(str(exc))
        got = episode_text(trajectory, self.target)
        if got is None:
            return self.fail("the agent gave no final answer", pattern=pattern.pattern)
        try:
            found = (
                pattern.fullmatch(got.strip()) if self.mode == "fullmatch" else pattern.search(got)
            )
        except PatternTimeout as exc:
            return self.fail(str(exc), pattern=pattern.pattern)
        return self.result(
            float(found is not None),
            pattern=pattern.pattern,
            mode=self.mode,
            target=self.target,
            got=got,
            matched=found.group(0) if found else None,
        )
