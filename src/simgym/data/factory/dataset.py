"""A finished run as a dataset: :func:`finalize` (drop duplicates and failures, split by
episode id, write the manifest) and :func:`read_split`.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simgym.core.files import replacing
from simgym.core.types import Trajectory
from simgym.data.factory.common import (
    DEFAULT_SPLIT,
    FORMAT,
    MANIFEST_FILE,
    RAW_FILE,
    SPLITS,
    FactoryError,
)
from simgym.data.factory.config import FactoryConfig
from simgym.data.factory.records import EpisodeRecord, scan_raw, split_of


def finalize(
    out: str | os.PathLike[str],
    *,
    config: FactoryConfig | None = None,
    quotas: dict[str, int] | None = None,
    run: dict[str, Any] | None = None,
    abandoned: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Drop duplicate and failed episodes from ``out/raw.jsonl``, split the rest by
    episode id into ``train``/``val``/``test`` JSONL files and write ``manifest.json``
    (counts per split and domain, what was dropped and why, run timings). Rerunnable:
    the same raw file always gives the same files."""
    out = Path(out)
    raw = out / RAW_FILE
    split = config.split if config is not None else DEFAULT_SPLIT
    scan = scan_raw(raw)
    records = scan.records
    ordered = sorted(records, key=lambda r: (r.domain, r.index))
    kept: list[EpisodeRecord] = []
    seen: set[str] = set()
    dropped: dict[str, Counter] = {"duplicate": Counter(), "failed": Counter()}
    errors: dict[str, list[str]] = defaultdict(list)
    for record in ordered:
        if record.status == "failed":
            dropped["failed"][record.domain] += 1
            if len(errors[record.domain]) < 5:
                errors[record.domain].append(f"{record.id}: {record.error}")
        elif record.hash in seen:
            dropped["duplicate"][record.domain] += 1
        else:
            seen.add(record.hash)
            kept.append(record)
    counts: dict[str, dict[str, dict[str, int]]] = {s: {} for s in SPLITS}
    with open(raw, "rb") as source:
        for name in SPLITS:
            target = out / f"{name}.jsonl"
            with replacing(target, binary=True) as sink:
                for record in kept:
                    if split_of(record.id, split) != name:
                        continue
                    source.seek(record.offset)
                    sink.write(source.read(record.size))
                    entry = counts[name].setdefault(
                        record.domain, {"episodes": 0, "transitions": 0}
                    )
                    entry["episodes"] += 1
                    entry["transitions"] += record.transitions
    for name in SPLITS:
        counts[name] = dict(sorted(counts[name].items()))
        counts[name]["total"] = {
            "episodes": sum(v["episodes"] for v in counts[name].values()),
            "transitions": sum(v["transitions"] for v in counts[name].values()),
        }
    domains = sorted({r.domain for r in records})
    per_domain = {}
    for domain in domains:
        mine = [r for r in records if r.domain == domain]
        good = [r for r in kept if r.domain == domain]
        seconds = sum(r.seconds for r in mine)
        transitions = sum(r.transitions for r in good)
        per_domain[domain] = {
            "recorded": len(mine),
            "kept": len(good),
            "duplicates": dropped["duplicate"][domain],
            "failed": dropped["failed"][domain],
            "transitions": transitions,
            "mean_turns": round(transitions / len(good), 2) if good else 0.0,
            "rejected_actions": sum(r.rejected for r in mine),
            "format_problems": sum(r.format_problems for r in good),
            "episode_seconds": round(seconds, 1),
            "transitions_per_episode_second": round(transitions / seconds, 3) if seconds else 0.0,
        }
    previous = _read_manifest(out)
    runs = list(previous.get("runs", []))
    if run is not None:
        runs.append(run)
    manifest = {
        "format": FORMAT,
        "seed": config.seed if config is not None else previous.get("seed"),
        "target_transitions": config.transitions
        if config is not None
        else previous.get("target_transitions"),
        "quotas": quotas if quotas is not None else previous.get("quotas", {}),
        "split": list(split),
        "splits": counts,
        "domains": per_domain,
        "errors": dict(errors),
        "unreadable_lines": scan.broken,
        "abandoned": abandoned or {},
        "runs": runs,
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _read_manifest(out: Path) -> dict[str, Any]:
    try:
        return json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def read_split(out: str | os.PathLike[str], name: str) -> Iterator[Trajectory]:
    """The trajectories of one split of a finished factory run."""
    from simgym.core.trajectories import read_trajectories

    if name not in SPLITS:
        raise FactoryError(f"unknown split {name!r}; use one of {', '.join(SPLITS)}")
    return read_trajectories(Path(out) / f"{name}.jsonl", strict=True)
