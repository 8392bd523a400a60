"""What the factory keeps of each episode: its record, the run's tally, the hash that finds
duplicates, the split an episode id falls in, and the scan of a raw file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from simgym.core.types import Trajectory
from simgym.data.factory.common import DEFAULT_SPLIT, FactoryError


@dataclass
class EpisodeRecord:
    """What the factory knows of one recorded episode (kept in the trajectory's
    ``task.metadata["factory"]`` and re-read on resume)."""

    id: str
    domain: str
    index: int
    status: str  # ok | duplicate | failed
    transitions: int
    hash: str = ""
    seconds: float = 0.0
    rejected: int = 0  # actions the domain refused (never reached the world)
    format_problems: int = 0  # real observations that fail the domain's own format check
    error: str | None = None
    offset: int = 0  # where its line starts in raw.jsonl
    size: int = 0


@dataclass
class Tally:
    """Progress of a run: counted transitions per domain against each quota."""

    quotas: dict[str, int]
    done: Counter = field(default_factory=Counter)  # transitions of kept episodes
    episodes: Counter = field(default_factory=Counter)
    duplicates: Counter = field(default_factory=Counter)
    failed: Counter = field(default_factory=Counter)
    failures_in_a_row: Counter = field(default_factory=Counter)
    abandoned: dict[str, str] = field(default_factory=dict)
    hashes: set[str] = field(default_factory=set)
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def classify(self, record: EpisodeRecord) -> None:
        """Decide ``record.status`` (duplicate or ok) for a finished, unfailed episode."""
        if record.status != "failed":
            record.status = "duplicate" if record.hash in self.hashes else "ok"

    def add(self, record: EpisodeRecord, *, max_failures: int = 0) -> None:
        domain = record.domain
        self.episodes[domain] += 1
        if record.status == "failed":
            self.failed[domain] += 1
            self.failures_in_a_row[domain] += 1
            if record.error and len(self.errors[domain]) < 5:
                self.errors[domain].append(f"{record.id}: {record.error}")
            if max_failures and self.failures_in_a_row[domain] >= max_failures:
                self.abandoned.setdefault(
                    domain, f"{max_failures} episodes in a row failed; last: {record.error}"
                )
            return
        self.failures_in_a_row[domain] = 0
        if record.status == "duplicate":
            self.duplicates[domain] += 1
            return
        self.hashes.add(record.hash)
        self.done[domain] += record.transitions


def episode_hash(trajectory: Trajectory) -> str:
    """What makes two episodes the same: domain, scenario and the actions the world saw."""
    actions = [turn.action_text for turn in trajectory.turns if turn.in_history]
    data = json.dumps(
        [trajectory.domain, trajectory.scenario, actions], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def split_of(episode: str, split: tuple[float, float, float] = DEFAULT_SPLIT) -> str:
    """The split of an episode, from a hash of its id alone (so resumes and reruns agree,
    and every turn of an episode lands in the same split)."""
    value = int(hashlib.sha256(episode.encode("utf-8")).hexdigest()[:13], 16) / 16**13
    if value < split[0]:
        return "train"
    if value < split[0] + split[1]:
        return "val"
    return "test"


@dataclass
class RawScan:
    """The episodes of a raw file in file order, and the lines a crash cut short."""

    records: list[EpisodeRecord]
    broken: int = 0


def scan_raw(path: str | os.PathLike[str]) -> RawScan:
    """Read the episode records of a raw file. A line that is not JSON (a crash cut it;
    the writer starts the next line afresh) is skipped and counted; a JSON line that is
    not a factory episode means the file is not a factory's, and raises."""
    path = Path(path)
    scan = RawScan([])
    if not path.is_file():
        return scan
    with open(path, "rb") as f:
        offset = 0
        for raw in f:
            size = len(raw)
            if not raw.strip():
                offset += size
                continue
            try:
                data = json.loads(raw)
            except json.JSONDecodeError:
                scan.broken += 1
                offset += size
                continue
            try:
                task = data["task"]
                info = task["metadata"]["factory"]
                scan.records.append(
                    EpisodeRecord(
                        id=task["id"],
                        domain=data["domain"],
                        index=int(info["index"]),
                        status=info["status"],
                        transitions=int(info["transitions"]),
                        hash=info["hash"],
                        seconds=float(info.get("seconds", 0.0)),
                        rejected=int(info.get("rejected", 0)),
                        format_problems=int(info.get("format_problems", 0)),
                        error=info.get("error"),
                        offset=offset,
                        size=size,
                    )
                )
            except (KeyError, TypeError, ValueError):
                raise FactoryError(
                    f"{path}: the line at byte {offset} is not a factory episode"
                ) from None
            offset += size
    return scan


def _replay(records: list[EpisodeRecord], quotas: dict[str, int]) -> Tally:
    """The tally a set of recorded episodes adds up to (duplicates decided in episode
    order, as :func:`finalize` decides them)."""
    tally = Tally(quotas=dict(quotas))
    for record in sorted(records, key=lambda r: (r.domain, r.index)):
        if record.status != "failed":
            tally.classify(record)
        tally.add(record)
    return tally
