"""Regular expressions that users write (case files, task rewards, plans), run in bounded
time.

Python's ``re`` backtracks: ``^(a+)+$`` against 37 ``a`` and a ``b`` takes minutes, and
a case file or a task row is enough to hand simgym such a pattern. Every user pattern is
compiled here instead:

* with **RE2** (``google-re2``), whose matching time is linear in the text, whenever RE2
  can read the pattern. Python's meaning is kept where the syntaxes differ: ``\\Z`` is
  RE2's ``\\z``; ``$`` (without multiline) also matches before a final newline; ``\\d``,
  ``\\w`` and ``\\s`` are Unicode classes as in Python (``\\b`` stays RE2's, ASCII);
* otherwise (look-around, back-references, possessive forms: what RE2 has no linear
  algorithm for) with the ``regex`` module, whose every match is cut off after
  :data:`MATCH_TIMEOUT_S` seconds. A match that runs out of time raises
  :class:`PatternTimeout`: "could not tell" is never taken for "no match".

An invalid pattern raises :class:`PatternError` (a ``ValueError``) with RE2's or Python's
reason.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from simgym.core.errors import SimgymError

MATCH_TIMEOUT_S = 1.0  # per match, for patterns RE2 cannot run

try:  # pragma: no branch (a core dependency)
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None  # type: ignore[assignment]


class PatternError(SimgymError, ValueError):
    """A pattern neither engine can read."""


class PatternTimeout(SimgymError):
    """A pattern that RE2 cannot run took longer than its time limit on some text."""


@dataclass(frozen=True)
class Pattern:
    """A compiled user pattern; ``engine`` is ``"re2"`` (linear time) or ``"regex"``
    (backtracking, each match bounded by ``timeout_s``)."""

    pattern: str
    engine: str
    compiled: Any
    timeout_s: float = MATCH_TIMEOUT_S
    whole: Any = None  # RE2: the form for fullmatch, where $ can only be the very end

    def search(self, text: str) -> Any:
        return self._run("search", text)

    def match(self, text: str) -> Any:
        return self._run("match", text)

    def search_from(self, text: str, pos: int) -> Any:
        """``search`` starting at ``pos`` (anchors and look-behind still see the text
        before it), in bounded time."""
        if self.engine == "re2":
            return self.compiled.search(text, pos)
        try:
            return self.compiled.search(text, pos, timeout=self.timeout_s)
        except TimeoutError:
            raise PatternTimeout(
                f"pattern {_short(self.pattern)} ran past {self.timeout_s:g} s"
            ) from None

    def fullmatch(self, text: str) -> Any:
        if self.whole is not None:
            return self.whole.fullmatch(text)
        return self._run("fullmatch", text)

    def _run(self, how: str, text: str) -> Any:
        method = getattr(self.compiled, how)
        if self.engine == "re2":
            return method(text)
        try:
            return method(text, timeout=self.timeout_s)
        except TimeoutError:
            raise PatternTimeout(
                f"pattern {_short(self.pattern)} ran past {self.timeout_s:g} s on a text of "
                f"{len(text):,} characters (it uses look-around or back-references, which "
                "only a backtracking engine runs; rewrite it without them to make it linear)"
            ) from None


def compile_pattern(
    pattern: str,
    *,
    ignore_case: bool = False,
    multiline: bool = False,
    dotall: bool = False,
    timeout_s: float = MATCH_TIMEOUT_S,
) -> Pattern:
    """A user pattern compiled for bounded-time matching (see the module docstring)."""
    if not isinstance(pattern, str):
        raise PatternError(f"a pattern is text, not {type(pattern).__name__}")
    return _compile(pattern, ignore_case, multiline, dotall, timeout_s)


def search(pattern: str, text: str, *, ignore_case: bool = False) -> Any:
    """``re.search`` in bounded time."""
    return compile_pattern(pattern, ignore_case=ignore_case).search(text)


def fullmatch(pattern: str, text: str, *, ignore_case: bool = False) -> Any:
    """``re.fullmatch`` in bounded time."""
    return compile_pattern(pattern, ignore_case=ignore_case).fullmatch(text)


@functools.lru_cache(maxsize=1024)
def _compile(
    pattern: str, ignore_case: bool, multiline: bool, dotall: bool, timeout_s: float
) -> Pattern:
    try:  # Python's syntax is the reference: what it refuses is refused on either engine
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise PatternError(f"invalid pattern {_short(pattern)}: {exc}") from None
    translated = to_re2(pattern, multiline=multiline) if _re2 is not None else None
    if translated is not None:
        flags = "".join(f for f, on in (("i", ignore_case), ("m", multiline), ("s", dotall)) if on)
        prefix = f"(?{flags})" if flags else ""
        options = _re2.Options()
        options.log_errors = False  # RE2 would print its refusals on stderr
        try:
            compiled = _re2.compile(prefix + translated, options)
            end_only = to_re2(pattern, multiline=multiline, dollar=r"\z")
            whole = _re2.compile(prefix + end_only, options) if end_only != translated else None
        except _re2.error:
            pass  # a construct RE2 lacks: the bounded backtracking engine below
        else:
            return Pattern(pattern, "re2", compiled, timeout_s, whole)
    return Pattern(
        pattern, "regex", _backtracking(pattern, ignore_case, multiline, dotall), timeout_s
    )


def _backtracking(pattern: str, ignore_case: bool, multiline: bool, dotall: bool) -> Any:
    try:
        import regex
    except ImportError:  # pragma: no cover (a core dependency)
        raise PatternError(
            f"pattern {_short(pattern)} needs the regex package (pip install regex) for "
            "look-around or back-references"
        ) from None
    flags = regex.V0
    flags |= regex.IGNORECASE if ignore_case else 0
    flags |= regex.MULTILINE if multiline else 0
    flags |= regex.DOTALL if dotall else 0
    try:
        return regex.compile(pattern, flags)
    except (regex.error, RecursionError, OverflowError) as exc:
        raise PatternError(f"invalid pattern {_short(pattern)}: {exc}") from None


# Python's (Unicode) meaning of the class escapes, in RE2's syntax: inside a class the
# parts only, outside a whole class. \W, \S and \D inside a class have no RE2 form here.
_CLASS_PARTS = {
    "d": r"\p{Nd}",
    "w": r"\p{L}\p{N}\p{Mn}\p{Mc}_",
    "s": r"\t\n\v\f\r \x{1c}-\x{1f}\x{85}\p{Z}",
}
_NEGATED = {"D": "d", "W": "w", "S": "s"}
# Escapes that mean the same in both (Python has checked the pattern already; after a
# backslash, anything but a letter or digit is that character itself in both).
_SAME_ESCAPES = set("afnrtvAbBx") | set(r".^$*+?()[]{}|\-/#&~ '\"!%,:;<=>@`_")


def to_re2(pattern: str, *, multiline: bool = False, dollar: str = r"(?:\n?\z)") -> str | None:
    """``pattern`` rewritten so RE2 means what Python's ``re`` means by it, or None when a
    construct has no RE2 form (look-around, back-references, inline flags RE2 lacks...):
    those run on the bounded backtracking engine. ``dollar`` is what a ``$`` becomes
    (RE2's ``$`` is the very end only; Python's also the place before a final newline,
    which a whole-text match can never end at)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    class_start = 0
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n:
                return None
            nxt = pattern[i + 1]
            i += 2
            if nxt in _CLASS_PARTS:
                parts = _CLASS_PARTS[nxt]
                out.append(parts if in_class else f"[{parts}]")
            elif nxt in _NEGATED:
                if in_class:
                    return None
                out.append(f"[^{_CLASS_PARTS[_NEGATED[nxt]]}]")
            elif nxt == "Z":
                out.append(r"\z")
            elif nxt in "uUN":
                return None  # \uXXXX and \N{NAME}: leave them to Python's own syntax
            elif nxt.isdigit() or (nxt == "b" and in_class):
                return None  # back-references and octal escapes; a backspace in a class
            elif nxt in _SAME_ESCAPES or not nxt.isalnum():
                out.append("\\" + nxt)
            else:
                return None
            continue
        if in_class:
            if ch == "]" and i > class_start:
                in_class = False
            elif ch == "[" and pattern.startswith("[:", i):
                return None  # POSIX classes: Python reads "[:" as two characters
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1  # "[]...]" and "[^]...]": a leading ] is a literal
            out.append(pattern[i:j])
            class_start = j
            i = j
            continue
        if ch == "{" and pattern.startswith("{,", i):
            return None  # Python reads {,n} as {0,n}, RE2 as text
        if ch == "$" and not multiline:
            out.append(dollar)  # Python's $ also matches before a final newline
            i += 1
            continue
        if ch == "(" and pattern.startswith("(?", i):
            rest = pattern[i + 2 : i + 4]
            if rest[:1] in ("=", "!", "#", ">", "<", "("):
                return None  # look-around, comments, atomic groups, conditionals
            if rest[:1] == "P" and pattern.startswith("(?P=", i):
                return None  # a named back-reference
            if rest[:1] in "aiLmsux-":
                flags = re.match(r"\(\?([aiLmsux-]+)[:)]", pattern[i:])
                if flags is None or set(flags.group(1)) - set("ims-"):
                    return None  # flags RE2 lacks (ASCII, locale, verbose)
                if "m" in flags.group(1).split("-")[0]:
                    return None  # multiline switched on inside: $ would mean another thing
        out.append(ch)
        i += 1
    if in_class:
        return None
    return "".join(out)


def _short(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 80 else pattern[:77] + "...")
