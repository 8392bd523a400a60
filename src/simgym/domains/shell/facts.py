"""Facts for a command line simgym does not run: where it runs and what the files and
directories it names hold. They go to the world model in the newest user turn."""

from __future__ import annotations

import posixpath
import shlex

from simgym.domains.shell.table import INTERACTIVE, PAGERS_AND_EDITORS
from simgym.domains.shell.unknown import mark_unknown
from simgym.domains.shell.view import Shell


def describe_unknown(session: Shell, text: str) -> None:
    """Facts for a command simgym does not run: the files it names, where it runs."""
    result = session.result
    result.facts.append(f"working directory: {session.cwd}")
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        words = text.split()
    if words and words[0] in INTERACTIVE and len(words) == 1:
        result.foreground = words[0]
    if words and words[0] in PAGERS_AND_EDITORS:
        result.foreground = words[0]
    mark_unknown(session, text, words)
    seen: set[str] = set()
    if (
        words
        and words[0] in ("ls", "ll", "dir", "tree", "find", "du")
        and not any(not w.startswith("-") for w in words[1:])
    ):
        words = [*words, "."]
    for word in words[1:]:
        if word.startswith("-") or "=" in word or len(seen) >= 4:
            continue
        path = session.path(word)
        if path in seen or not session.files.in_scope(path):
            continue
        seen.add(path)
        if path in session.system:
            result.facts.append(f"{path} is a directory of the system; its files are not known")
        elif path in session.unknown:
            result.facts.append(f"{path} was changed by a program: its content is not known")
        elif path in session.content:
            result.facts.append(file_fact(path, session.content[path]))
        elif path in session.dirs:
            result.facts.append(_directory_fact(session, path))


def _directory_fact(session: Shell, path: str) -> str:
    """A directory's entries with their kinds and sizes (what ``ls -l`` would list)."""
    entries = []
    for name in session.children(path):
        full = posixpath.join(path, name)
        if session.is_dir(full):
            entries.append(f"{name}/ (directory)")
        else:
            entries.append(f"{name} ({len(session.content[full].encode('utf-8'))} bytes)")
    return f"directory {path} contains: {', '.join(entries) or '(nothing)'}"


def file_fact(path: str, content: str, limit: int = 1500) -> str:
    """A file's content as a fact line (long files are cut, and say so)."""
    body = content if len(content) <= limit else content[:limit] + "\n[... cut ...]\n"
    if not body:
        return f"file {path} exists and is empty"
    body = body if body.endswith("\n") else body + "\n"
    return f"file {path} contains:\n```\n{body}```"
