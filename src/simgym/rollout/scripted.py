"""Scripted episodes: a task, a scenario and a fixed list of actions, run many at once.

Specs come from action files (one episode per YAML/JSON file) or JSONL task files (one
episode per line). Each finished episode is appended to the output as it ends, and a
rerun skips the task ids already there, so a crash loses at most the in-flight episodes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.safeload import load_yaml, loads_json, read_text
from simgym.core.types import Task, Trajectory


class EpisodeSpec(BaseModel):
    """One scripted episode."""

    task: Task
    actions: list[Any] = Field(default_factory=list)


# What an episode file or task line may hold: the task's own fields, or ``task:`` with
# ``scenario:`` and ``domain:`` beside it; and ``actions``. Anything else is a typo (an
# ``acitons:`` list would otherwise make an episode with no actions), refused.
_TASK_KEYS = frozenset(Task.model_fields)
_BESIDE_TASK = frozenset({"task", "scenario", "domain"})


def _spec_from_dict(data: dict[str, Any], fallback_id: str, domain: str | None) -> EpisodeSpec:
    data = dict(data)
    actions = data.pop("actions", None)
    if "task" in data and isinstance(data["task"], dict):
        unknown = sorted(map(str, set(data) - _BESIDE_TASK))
        task_data = dict(data.pop("task"))
        task_data.setdefault("scenario", data.pop("scenario", {}))
        task_data.setdefault("domain", data.pop("domain", None))
    else:
        task_data = data
        unknown = sorted(map(str, set(data) - _TASK_KEYS))
    if unknown:
        known = ", ".join(sorted({"actions", *_BESIDE_TASK, *_TASK_KEYS}))
        raise SimgymError(
            f"{fallback_id}: unknown key(s) {', '.join(unknown)} (an episode holds {known})"
        )
    metadata = task_data.get("metadata")
    if actions is None:
        actions = metadata.get("actions", []) if isinstance(metadata, dict) else []
    if not isinstance(actions, list):
        raise SimgymError(f"{fallback_id}: 'actions' must be a list")
    task_data.setdefault("id", fallback_id)
    if domain and not task_data.get("domain"):
        task_data["domain"] = domain
    try:
        task = Task.model_validate(task_data, extra="forbid")
    except ValidationError as exc:
        # pydantic's text spans lines per error; the CLI's promise is one line
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}" for e in exc.errors()
        )
        raise SimgymError(f"{fallback_id}: invalid task: {problems}") from None
    return EpisodeSpec(task=task, actions=actions)


def load_specs(paths: Iterable[str | Path], domain: str | None = None) -> list[EpisodeSpec]:
    """Read episode specs from ``.jsonl`` task files and ``.yaml``/``.json`` action files.

    Specs without an id get a stable one (file name and a hash of the content), so
    resuming recognizes them.
    """
    specs: list[EpisodeSpec] = []
    for raw_path in paths:
        path = Path(raw_path)
        if not path.is_file():
            raise SimgymError(f"file not found: {path}")
        text = read_text(path)
        if path.suffix == ".jsonl":
            # "\n" only: splitlines() would also cut at U+2028 inside a JSON string
            for number, raw_line in enumerate(text.split("\n"), 1):
                line = raw_line.removesuffix("\r")  # as splitlines() did: ids stay stable
                if not line.strip():
                    continue
                try:
                    data = loads_json(line)
                except json.JSONDecodeError as exc:
                    raise SimgymError(f"{path}:{number}: not valid JSON: {exc}") from None
                if not isinstance(data, dict):
                    raise SimgymError(f"{path}:{number}: a task line must be a JSON object")
                specs.append(_spec_from_dict(data, _stable_id(path, line), domain))
        else:
            try:
                data = load_yaml(text)  # refuses alias bombs, deep nesting, huge ints
            except yaml.YAMLError as exc:
                raise SimgymError(f"{path}: not valid YAML/JSON: {exc}") from None
            if not isinstance(data, dict):
                raise SimgymError(f"{path}: expected a mapping with 'actions'")
            specs.append(_spec_from_dict(data, _stable_id(path, text), domain))
    return specs


def _stable_id(path: Path, content: str) -> str:
    return f"{path.stem}-{hashlib.sha1(content.encode()).hexdigest()[:8]}"


async def run_episode(env: SimEnv, spec: EpisodeSpec) -> Trajectory:
    """Reset, play the actions until the episode ends, close; return the trajectory."""
    await env.reset(spec.task)
    for action in spec.actions:
        result = await env.step(action)
        if result.done or result.truncated:
            break
    await env.close(reason=None)  # a script that ran out: truncated, but not an error
    assert env.trajectory is not None
    return env.trajectory


async def run_specs(
    specs: list[EpisodeSpec],
    make_env: Callable[[EpisodeSpec], SimEnv],
    *,
    concurrency: int = 8,
    on_done: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """Run episodes with at most ``concurrency`` in flight. ``make_env`` should give each
    episode its own environment sharing one world model and one writer."""
    gate = asyncio.Semaphore(max(1, concurrency))
    results: list[Trajectory] = []

    async def one(spec: EpisodeSpec) -> None:
        async with gate:
            trajectory = await run_episode(make_env(spec), spec)
        results.append(trajectory)
        if on_done is not None:
            on_done(trajectory)

    await asyncio.gather(*(one(spec) for spec in specs))
    return results
