"""What a program simgym does not run may have changed: the files it redirects into or
edits, their modes, and the directory it runs in unless it only reads. Those paths
become unknown in the ledger until a certain write makes them known again."""

from __future__ import annotations

import posixpath
import re

from simgym.domains.shell.table import ALWAYS_RUN, EDITORS, MODE_CHANGERS, READ_ONLY
from simgym.domains.shell.view import Shell

# Options that make an otherwise read-only program write or delete (find -delete, sort -o).
WRITING_OPTIONS = re.compile(
    r"\bfind\b[^;&|]*\s-(?:delete|exec|execdir|ok|okdir|fprint0?|fprintf|fls)\b"
    r"|\bsort\b[^;&|]*\s-o\b"
)


def mark_unknown(session: Shell, text: str, words: list[str]) -> None:
    """Remember what a program simgym does not run may have changed: the files it
    redirects into or edits, and the directory it runs in unless it only reads."""
    for target in re.findall(r"(?:^|[^<&\d])>>?\s*([^\s;&|<>]+)", text):
        path = session.path(target)
        parent = posixpath.dirname(path)
        if (
            session.files.in_scope(path)
            and path not in session.content
            and path not in session.dirs
        ):
            if parent in session.dirs and parent not in session.unknown:
                session.write(path, "")  # bash creates it before the program runs
        session.unknown.add(path)
    programs = {w for w in re.split(r"[;&|]+", text) if w.strip()}
    names = {p.split()[0] for p in programs if p.split()}
    if names - READ_ONLY - ALWAYS_RUN - {"git", "sudo"} or "sudo" in names:
        session.unknown.add(session.cwd)
    if WRITING_OPTIONS.search(text):
        # it may delete or rewrite any file below the directories it walks, not only add
        roots = {session.cwd}
        for word in words[1:]:
            if not word.startswith(("-", "(", ")", "{", ";", "!")) and "/" in word:
                roots.add(session.path(word))
        for root in roots:
            inside = root.rstrip("/") + "/"
            session.unknown.add(root)
            session.unknown.update(
                p for p in [*session.content, *session.dirs] if p.startswith(inside)
            )
    if "git" in names and not re.search(r"\bgit\s+(status|log|diff|show|branch|remote)\b", text):
        session.unknown.add(session.cwd)
    if names & MODE_CHANGERS:
        for word in words[1:]:
            if not word.startswith(("-", "+")) and session.path(word) in session.content:
                session.unknown.add(session.path(word))  # its mode, shown by ls -l
    if names & EDITORS:
        for word in words[1:]:
            path = session.path(word)
            if not word.startswith("-") and path in session.content:
                session.unknown.add(path)
