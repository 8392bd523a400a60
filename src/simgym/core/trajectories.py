"""Trajectory files: JSONL, one episode a line, appended and flushed per episode.

A crash can at worst leave a partial last line; readers skip it (with a warning) and
:func:`finished_ids` lets a rerun skip episodes that were already written.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

from simgym.core.errors import SimgymError
from simgym.core.jsonl import JsonlAppender
from simgym.core.safeload import MAX_DEPTH, loads_json
from simgym.core.types import Trajectory


class UnreadableLineWarning(UserWarning):
    """A trajectory line that was skipped; callers may count these (``simgym export``
    fails when every line was one)."""


# A trajectory wraps user data (task metadata, tool arguments) a few levels deep.
_TRAJECTORY_DEPTH = 2 * MAX_DEPTH


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
    (``strict=True`` raises instead).

    Args:
        path: a trajectory JSONL file, as `simgym run` or a `TrajectoryWriter` writes it.
        strict: raise on a broken line instead of skipping it.

    Returns:
        An iterator of `Trajectory` objects, in the file's order.
    """
    path = Path(path)
    if not path.is_file():
        raise SimgymError(f"trajectory file not found: {path}")
    # Bytes, decoded line by line: one binary or mis-encoded line is skipped like any
    # other unreadable line instead of ending the read with a UnicodeDecodeError.
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                # loads_json also turns deep nesting, huge integers and NaN into errors
                data = loads_json(raw.decode("utf-8"), max_depth=_TRAJECTORY_DEPTH)
                yield Trajectory.model_validate(data)
            except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError included
                kind = exc.__class__.__name__
                message = f"{path}:{number}: skipping unreadable trajectory line ({kind})"
                if strict:
                    raise SimgymError(message) from None
                warnings.warn(message, UnreadableLineWarning, stacklevel=2)


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
