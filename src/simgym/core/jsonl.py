"""Append-only JSONL files that survive crashes: one record a line, flushed as written.

A killed process leaves at most a cut last line; the next writer starts on a fresh line
and readers skip the broken one.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


class JsonlAppender:
    """Appends lines to a file, flushing each; safe to share between threads and tasks.

    ``fsync=True`` also waits for the disk, so a record survives the machine going down,
    not only the process being killed.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open)
        self._repair_tail()

    def _repair_tail(self) -> None:
        # If a crash cut the last line, start ours on a fresh line so it stays readable.
        if self.path.stat().st_size == 0:
            return
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                self._file.write("\n")
                self._file.flush()

    def append(self, line: str) -> None:
        """Write one record (a JSON text without newlines)."""
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
