"""Trajectory files: JSONL, one episode a line, appended and flushed per episode.

A crash can at worst leave a partial last line; readers skip it (with a warning) and
:func:`finished_ids` lets a rerun skip episodes that were already written.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

from simgym.core.errors import SimgymError
from simgym.core.types import Trajectory
from simgym.data.jsonl import JsonlAppender


class TrajectoryWriter(JsonlAppender):
    """Appends trajectories to a JSONL file; safe to share between threads and tasks.
    Each episode is flushed and fsynced as it is written."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        super().__init__(path, fsync=fsync)

    def write(self, trajectory: Trajectory) -> None:
        self.append(trajectory.model_dump_json())


def read_trajectories(
    path: str | os.PathLike[str], *, strict: bool = False
) -> Iterator[Trajectory]:
    """Yield the trajectories in a JSONL file. Broken lines are skipped with a warning
    (``strict=True`` raises instead)."""
    path = Path(path)
    if not path.is_file():
        raise SimgymError(f"trajectory file not found: {path}")
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Trajectory.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValueError) as exc:
                kind = exc.__class__.__name__
                message = f"{path}:{number}: skipping unreadable trajectory line ({kind})"
                if strict:
                    raise SimgymError(message) from None
                warnings.warn(message, stacklevel=2)


def finished_ids(path: str | os.PathLike[str]) -> set[str]:
    """Task ids already written to ``path`` (empty if the file does not exist)."""
    return {key.partition("#")[0] for key in finished_keys(path)}


def finished_keys(path: str | os.PathLike[str]) -> set[str]:
    """Episode keys (:attr:`Trajectory.key`: task id, plus ``#sample`` in a group) already
    written to ``path``, so a rerun skips exactly those episodes."""
    if not Path(path).is_file():
        return set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {t.key for t in read_trajectories(path)}
