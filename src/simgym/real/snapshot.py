"""A real world's files, read the way a simulated domain keeps them in its hidden state.

The terminal and swe domains hold a machine's files as ``{path: content}`` (a directory
as ``path/`` with empty content). :func:`tree_files` reads a sandbox's directory tree into
the same shape, so a check written against the simulated final state (a file deleted, a
secret written into code) reads a real episode's final state unchanged.

Paths are written as the scenario wrote them where it named them (a terminal scenario may
use paths relative to the working directory); new files get the absolute path (terminal)
or the path relative to the repository (swe). System trees the sandbox mounts or copies
from the host (``/usr``, ``/etc``, ...) are not walked: only the scenario's own files in
them are read, so a deleted or edited one still shows.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

MAX_FILE_CHARS = 100_000  # a bigger file is cut: checks look for short patterns
MAX_ENTRIES = 5_000  # a tree bigger than this is cut (a run that unpacked an archive)
# Top-level trees that hold the host's system, not the scenario's machine.
SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
VIRTUAL_TREES = ("/proc", "/sys", "/dev", "/run")
KEPT_SYSTEM = ("/usr/local",)  # the sandbox's own, filled from the scenario


def read_text(path: Path) -> str:
    """A file's text as a state holds it: UTF-8 (undecodable bytes replaced), cut at
    :data:`MAX_FILE_CHARS`; a symbolic link is ``-> target``; anything unreadable, or
    not a regular file, is ''."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            return f"-> {os.readlink(path)}"
        if not stat.S_ISREG(mode):  # a FIFO would block the read, a socket cannot be read
            return ""
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_CHARS * 4)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[:MAX_FILE_CHARS]


def tree_files(
    top: Path,
    *,
    inside: str,
    declared: Mapping[str, str] | None = None,
    relative: bool = False,
    skip: Iterable[str] = (),
) -> dict[str, str]:
    """The files under ``top`` (the host directory that is ``inside`` in the world).

    ``declared`` maps the absolute world path of each scenario file to the key the
    scenario used for it; ``relative`` writes other keys relative to ``inside`` (swe);
    ``skip`` lists absolute world paths not to walk (their declared files are still read).
    """
    declared = dict(declared or {})
    skipped = tuple(p.rstrip("/") for p in skip)
    files: dict[str, str] = {}

    def key(world_path: str, is_dir: bool) -> str:
        name = declared.get(world_path) or declared.get(world_path + "/")
        if name is None:
            name = posixpath.relpath(world_path, inside) if relative else world_path
        if is_dir and not name.endswith("/"):
            name += "/"
        return name

    def blocked(world_path: str) -> bool:
        return any(world_path == s or world_path.startswith(s + "/") for s in skipped) and not any(
            world_path == k or world_path.startswith(k + "/") or k.startswith(world_path + "/")
            for k in KEPT_SYSTEM
        )

    for directory, dirs, names in os.walk(top, followlinks=False):
        here = Path(directory)
        rel = here.relative_to(top).as_posix()
        world_dir = inside if rel == "." else posixpath.join(inside, rel)
        dirs[:] = sorted(d for d in dirs if not blocked(posixpath.join(world_dir, d)))
        if rel != "." and not blocked(world_dir):
            files[key(world_dir, True)] = ""
        for name in sorted(names):
            world_path = posixpath.join(world_dir, name)
            if blocked(world_path):
                continue
            if len(files) >= MAX_ENTRIES:
                return files
            files[key(world_path, False)] = read_text(here / name)
    # The scenario's own files inside skipped trees: read where they still are.
    for world_path, name in declared.items():
        if not blocked(world_path.rstrip("/")):
            continue
        host = top / posixpath.relpath(world_path.rstrip("/"), inside)
        if host.is_symlink() or host.is_file():
            files[name] = read_text(host)
        elif host.is_dir():
            files[name if name.endswith("/") else name + "/"] = ""
    return files


def declared_paths(files: Iterable[str], base: str) -> dict[str, str]:
    """Absolute world path -> the scenario's key, for keys relative to ``base``."""
    out: dict[str, str] = {}
    for name in files:
        absolute = posixpath.normpath(posixpath.join(base, name))
        out[absolute + ("/" if name.endswith("/") and absolute != "/" else "")] = name
        out.setdefault(absolute, name)
    return out
