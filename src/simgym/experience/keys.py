"""What an action *is*, for retrieval: its key and its search terms.

Recorded transitions are only useful as demonstrations when they show the same kind of
action: ``cat`` answers like ``cat``, ``get_customer`` like ``get_customer``. So every
transition gets a *key* (the tool name of a tool call, the command word of a shell line,
the function of a browser call such as ``click('6')``) and retrieval prefers rows with the
query's key. The *terms* are what the full-text index sees: the keystrokes, or the tool
name and argument values, without the JSON scaffolding (``keystrokes``, ``duration``,
``arguments``) that every row of a domain shares and that would only add noise.

Action texts arrive in the contract's rendered form (:mod:`simgym.core.contract`): a JSON
list of keystroke batches for the terminal, ``{"name", "arguments"}`` JSON for tool
domains, a call such as ``click('6')`` for the web, or a plain command line. Nothing here
raises on odd input: an unreadable action gets the key ``""`` and its raw text as terms.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

# Words that run another command: the command after them is the one that matters.
_WRAPPERS = frozenset(
    {"sudo", "time", "nohup", "env", "command", "builtin", "exec", "nice", "doas"}
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_CALL = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*\(")
_SHELL_STOP = re.compile(r"[;&|<>()]")
# Matches what SQLite's unicode61 tokenizer keeps together (letters and digits; "_" splits).
_TOKEN = re.compile(r"[^\W_]+")
MAX_KEY_CHARS = 64


def action_key(domain: str, action_text: str) -> str:
    r"""The key of an action: tool name, command word or called function (``""`` if none).

    >>> action_key("terminal", '[{"keystrokes": "cat notes.txt\\n", "duration": 1}]')
    'cat'
    >>> action_key("mcp", '{"name": "get_customer", "arguments": {"customer_id": "C-1"}}')
    'get_customer'
    >>> action_key("web", "click('6')")
    'click'
    """
    del domain  # the rendered form says enough; kept so a domain could refine it later
    text = (action_text or "").strip()
    if not text:
        return ""
    value = _json(text)
    if value is not None:
        return _key_of_value(value)[:MAX_KEY_CHARS]
    call = _CALL.match(text)
    if call:
        return call.group(1)[:MAX_KEY_CHARS]
    return command_word(text)[:MAX_KEY_CHARS]


def action_terms(action_text: str) -> str:
    """The text the full-text index holds for an action (see the module docstring)."""
    text = (action_text or "").strip()
    value = _json(text)
    if value is None:
        return text
    parts: list[str] = []
    _flatten(value, parts)
    return " ".join(parts)


def tokens(text: str, *, limit: int = 32, max_chars: int = 64) -> list[str]:
    """The distinct search tokens of ``text``, in order, at most ``limit`` of them.

    They are runs of letters and digits, as the index's tokenizer splits them, so a
    quoted token never holds FTS5 syntax of its own."""
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(text or ""):
        token = match.group(0).lower()[:max_chars]
        if token not in seen:
            seen[token] = None
            if len(seen) >= limit:
                break
    return list(seen)


def command_word(line: str) -> str:
    """The command a shell line runs: ``sudo git log`` -> ``git``,
    ``/usr/bin/env FOO=1 ./run.sh`` -> ``run.sh``, ``FOO=1`` alone -> ``=``."""
    first = next((part for part in line.splitlines() if part.strip()), "").strip()
    if not first:
        return ""
    cut = _SHELL_STOP.search(first)
    head = first[: cut.start()] if cut and cut.start() > 0 else first
    try:
        words = shlex.split(head, comments=False)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        words = head.split()
    if not words:
        return first.split()[0] if first.split() else ""
    assigned = False
    for index, word in enumerate(words):
        if _ASSIGNMENT.match(word):
            assigned = True
            continue
        name = word.rstrip("/").rsplit("/", 1)[-1] or word
        if name in _WRAPPERS and index + 1 < len(words):
            continue
        if name.startswith("-") and index > 0 and words[index - 1] in _WRAPPERS:
            continue  # an option of a wrapper (``sudo -i``; an option's value is not known)
        return name
    return "=" if assigned else words[0]


# -- helpers ----------------------------------------------------------------------------


def _json(text: str) -> Any:
    if text[:1] not in ("{", "["):
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None


def _key_of_value(value: Any) -> str:
    if isinstance(value, list):
        for item in value:  # keystroke batches: the first one that types something
            key = _key_of_value(item)
            if key:
                return key
        return ""
    if not isinstance(value, dict):
        return ""
    function = value.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return function["name"]  # an OpenAI tool call
    if isinstance(value.get("name"), str):
        return value["name"]
    keys = value.get("keystrokes")
    if isinstance(keys, str):
        return command_word(keys)
    if isinstance(keys, list):  # an Action dumped whole
        return _key_of_value(keys)
    if isinstance(value.get("text"), str):
        return command_word(value["text"])
    return ""


_SCAFFOLD = frozenset({"keystrokes", "duration", "name", "arguments", "function", "kind"})


def _flatten(value: Any, parts: list[str]) -> None:
    """Values (and argument names) of a JSON action, without the shared scaffolding."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "duration":
                continue
            if key not in _SCAFFOLD:
                parts.append(str(key))
            _flatten(item, parts)
    elif isinstance(value, list):
        for item in value:
            _flatten(item, parts)
    elif isinstance(value, str):
        parts.append(value)
    elif isinstance(value, bool) or value is None:
        return
    else:
        parts.append(str(value))
