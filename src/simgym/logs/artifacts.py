"""What an import builds beside a world's description: the data its twin is grounded in
and trained on, and tasks to run in it.

``experience.jsonl``  one plain transition per logged call the twin can replay:
                      ``{"domain": "mcp", "action": <the action text the twin's world
                      model reads>, "observation": <the logged answer as JSON text>,
                      "source": "sessions.jsonl:<session>#<record index>"}``
``experience.db``     the same, indexed (:mod:`simgym.experience`): ``--world DIR`` hands
                      it to the environment when grounding is on
``sft.jsonl``         one chat row per such call (``simgym export -f sft`` turn rows): the
                      twin's system prompt, the session's earlier calls (at most
                      ``history`` of them) and the call, answered with the logged result
``tasks.jsonl``       one task per session with something to verify
                      (:mod:`simgym.logs.tasks`)

Every logged call goes in, training and held-out alike: to hold sessions out, build the
world from the training split.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from simgym.core.domain import get_domain
from simgym.core.files import replacing, write_atomic
from simgym.core.types import Action, Observation, Task, Trajectory, Turn
from simgym.data.export import sft_examples
from simgym.experience import build_store
from simgym.logs.steps import DOMAIN, Step, Twin, observation_text, open_twin
from simgym.logs.tasks import mine_tasks

EXPERIENCE = "experience.jsonl"
EXPERIENCE_DB = "experience.db"
SFT = "sft.jsonl"
TASKS = "tasks.jsonl"
HISTORY = 6  # earlier calls kept in an SFT row's prompt
# What a huge log gives beyond these is more of the same; the caps keep an import of
# millions of records linear and its folder small (the first sessions are kept).
MAX_TRANSITIONS = 200_000
MAX_SFT_ROWS = 20_000
MAX_TASKS = 2_000
ARTIFACTS = (EXPERIENCE, EXPERIENCE_DB, SFT, TASKS)


def experience_rows(twin: Twin) -> Iterator[dict[str, str]]:
    """A plain transition per replayable logged call (see the module docstring)."""
    for _, steps in twin.steps():
        for step in steps:
            if step.call is not None:
                yield {
                    "domain": DOMAIN,
                    "action": twin.action_text(step.call),
                    "observation": observation_text(step.record.get("response")),
                    "source": step.source,
                }


def session_trajectory(
    session: str, steps: list[Step], twin: Twin, instruction: str = ""
) -> Trajectory:
    """A logged session as the twin's episode: every replayable call a turn answered
    with its logged result (no scenario kept: the caller holds the system prompt)."""
    turns = []
    for step in steps:
        if step.call is None:
            continue
        turns.append(
            Turn(
                index=len(turns) + 1,
                action=Action.tool_call(step.call.tool, step.call.arguments),
                action_text=twin.action_text(step.call),
                observation=Observation(text=observation_text(step.record.get("response"))),
            )
        )
    task = Task(id=session, instruction=instruction, domain=DOMAIN)
    return Trajectory(episode_id=f"log-{session}", task=task, domain=DOMAIN, turns=turns)


def sft_rows(
    twin: Twin, tasks: dict[str, Task] | None = None, *, history: int = HISTORY
) -> Iterator[dict[str, Any]]:
    """Chat rows to train the twin's world model (see the module docstring); a session
    with a task carries its instruction in the first turn, as a run of that task does."""
    tasks = tasks or {}
    domain = get_domain(DOMAIN)
    system = domain.system_prompt(twin.scenario)
    for session, steps in twin.steps():
        task = tasks.get(session)
        trajectory = session_trajectory(session, steps, twin, task.instruction if task else "")
        sources = [s.source for s in steps if s.call is not None]
        for source, row in zip(
            sources, sft_examples(trajectory, mode="turn", system_prompt=system), strict=True
        ):
            messages = row["messages"]
            keep = 2 * max(0, history) + 2  # earlier pairs, the call, the answer
            if len(messages) - 1 > keep:
                messages = [messages[0], *messages[-keep:]]
            yield {"messages": messages, "domain": DOMAIN, "source": source}


def _write_jsonl(path: Path, rows: Iterator[Any]) -> int:
    count = 0
    with replacing(path) as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_artifacts(world_dir: str | Path, *, history: int = HISTORY) -> dict[str, int]:
    """Write the artifacts into a world folder; returns rows per file."""
    root = Path(world_dir)
    twin = open_twin(root)
    tasks = mine_tasks(twin, limit=MAX_TASKS)
    rows = sft_rows(twin, {t.id: t for t in tasks}, history=history)
    counts = {
        EXPERIENCE: _write_jsonl(root / EXPERIENCE, islice(experience_rows(twin), MAX_TRANSITIONS)),
        TASKS: _write_jsonl(root / TASKS, (t.model_dump(mode="json") for t in tasks)),
        SFT: _write_jsonl(root / SFT, islice(rows, MAX_SFT_ROWS)),
    }
    db = root / EXPERIENCE_DB
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)
    counts[EXPERIENCE_DB] = int(build_store(db, [root / EXPERIENCE], domain=DOMAIN)["total"])
    return counts


def add_artifacts(world_dir: str | Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write the artifacts and record them in the world's manifest (returned)."""
    counts = write_artifacts(world_dir)
    files = [f for f in manifest.get("files", []) if f not in ARTIFACTS]
    manifest = {**manifest, "files": [*files, *ARTIFACTS]}
    manifest["counts"] = {
        **manifest.get("counts", {}),
        "transitions": counts[EXPERIENCE],
        "sft_rows": counts[SFT],
        "tasks": counts[TASKS],
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n"
    write_atomic(Path(world_dir) / "manifest.json", text)
    return manifest
