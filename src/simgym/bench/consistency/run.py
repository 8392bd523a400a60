"""Running probe episodes, resumably, and the result row of each."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgym.bench.consistency.domains import PROBE_DOMAINS
from simgym.bench.consistency.model import ScriptedTurns
from simgym.bench.consistency.probes import GROUNDINGS, MODES, Probe, label, row_grounding
from simgym.bench.consistency.score import Verdict, ledger_agrees, score_observation
from simgym.bench.store import prepare_resume, read_rows
from simgym.core.domain import get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.worldmodel import WorldModel
from simgym.rollout.episode import model_rendered

SCHEMA = "simgym.bench.consistency/1"


@dataclass
class RunSettings:
    """What a row's result depends on besides the probe; rows of other settings are not
    mixed into one file."""

    context_turns: int = 4
    max_tokens: int | None = None
    temperature: float | None = None
    retries: int = 0  # format retries re-roll the answer and double the cost

    def record(self, backend: WorldModel, seed: int) -> dict[str, Any]:
        return {
            "world_model": backend.describe(),
            "seed": seed,
            "context_turns": self.context_turns,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "validation_retries": self.retries,
        }


class ProbeEpisode:
    """One probe played in one mode, in two halves: :meth:`prepare` plays every turn
    before the look, :meth:`look` plays the look and scores it. Splitting them lets a run
    ask for all the looks of a group one after another, when their prompts share the
    most (see :func:`run_consistency`)."""

    def __init__(
        self,
        probe: Probe,
        mode: str,
        backend: WorldModel,
        settings: RunSettings | None = None,
        grounding: str = "off",
    ) -> None:
        if mode not in MODES:
            raise SimgymError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if grounding not in GROUNDINGS:
            raise SimgymError(
                f"grounding must be one of {', '.join(GROUNDINGS)}, not {grounding!r}"
            )
        settings = settings or RunSettings()
        self.probe, self.mode, self.grounding = probe, mode, grounding
        self.world = ScriptedTurns(backend)
        self.env = SimEnv(
            get_domain(probe.domain),
            self.world,
            PROBE_DOMAINS[probe.domain].scenario,
            max_turns=len(probe.steps) + 1,
            context=mode,  # type: ignore[arg-type]
            context_turns=settings.context_turns,
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
            validation_retries=settings.retries,
            # Explicit: the row's key says which mode ran, whatever the backend defaults to.
            grounding=grounding,  # type: ignore[arg-type]
        )
        self.ended: str | None = None  # why the episode stopped before the look
        self.ledger_ok: bool | None = None
        self.seconds = 0.0

    async def prepare(self) -> None:
        started = time.perf_counter()
        env, probe = self.env, self.probe
        await env.reset(PROBE_DOMAINS[probe.domain].instruction, seed=probe.seed)
        for step in probe.steps[:-1]:
            self.world.script = step.scripted
            result = await env.step(step.action)
            if result.done or result.truncated:
                turn = env.trajectory.turns[-1]  # type: ignore[union-attr]
                self.ended = f"the episode ended at turn {turn.index}: {turn.error or 'done'}"
                break
        self.seconds += time.perf_counter() - started

    async def look(self) -> dict[str, Any]:
        started = time.perf_counter()
        if self.ended is None:
            if self.env.state_updates or self._grounded():
                self.ledger_ok = ledger_agrees(self.probe, self.env.state)
            self.world.script = None
            self.world.answers = []
            await self.env.step(self.probe.steps[-1].action)
        await self.env.close(None)
        self.seconds += time.perf_counter() - started
        return self.row()

    def _grounded(self) -> bool:
        """Has the domain grounded a turn of this episode (so simgym kept the ledger)?"""
        trajectory = self.env.trajectory
        return trajectory is not None and any(t.grounding for t in trajectory.turns)

    def row(self) -> dict[str, Any]:
        probe, trajectory = self.probe, self.env.trajectory
        assert trajectory is not None
        turns = {t.index: t for t in trajectory.turns}
        mutation, look = turns.get(probe.mutation_turn), turns.get(probe.probe_turn)
        model_passed: bool | None = None
        if self.ended is not None or look is None:
            verdict = Verdict(False, self.ended or "the probe turn did not run")
        else:
            verdict = score_observation(probe, look.observation.text, look.error)
            # What the model itself last wrote, before any strict correction.
            own = self.world.answers[-1] if self.world.answers else None
            model_passed = verdict.passed if own is None else score_observation(probe, own).passed
        # Only an unreachable model is an error to rerun; an empty answer is the model's.
        unreachable = look is not None and look.error_type == "world_model"
        model_error = self.ended or (look.error if unreachable else None)
        return {
            "schema": SCHEMA,
            "key": probe.key(self.mode, self.grounding),
            "status": "error" if model_error else "ok",
            "domain": probe.domain,
            "mode": self.mode,
            "grounding": self.grounding,
            "gap": probe.gap,
            "index": probe.index,
            "op": probe.op,
            "fact": probe.fact,
            "expected": {"current": probe.current, "previous": probe.previous},
            "mutation_turn": probe.mutation_turn,
            "probe_turn": probe.probe_turn,
            "passed": verdict.passed,
            "reason": verdict.reason,
            "model_passed": model_passed,
            "error": model_error,
            "ledger_ok": self.ledger_ok,
            "mutation": _turn_record(mutation),
            "probe": _turn_record(look)
            | {"request_chars": self.world.request_chars, "model_answers": self.world.answers},
            "model_calls": sum(1 for s in probe.steps if s.scripted is None),
            # Scripted observations are written to pass the domain's checks; a problem
            # here is a bug in the probes, not in the model.
            "scripted_problems": sorted(
                {
                    p
                    for s, t in zip(probe.steps, trajectory.turns, strict=False)
                    if s.scripted
                    for p in t.format_problems
                }
            ),
            # Likewise, a scripted turn that strict mode had to re-ask or correct
            # disagrees with what the domain computes from the state: a probe bug.
            # The turns the model under test wrote, and those of them strict mode found
            # against the state's facts and could not resolve (served anyway).
            "rendered": sum(
                1
                for s, t in zip(probe.steps, trajectory.turns, strict=False)
                if s.scripted is None and model_rendered(t, trajectory)
            ),
            "contradictions": sum(
                1
                for s, t in zip(probe.steps, trajectory.turns, strict=False)
                if s.scripted is None and _strict_action(t) == "unresolved"
            ),
            "scripted_strict": sorted(
                {
                    f"turn {t.index}: {_strict_action(t)}"
                    for s, t in zip(probe.steps, trajectory.turns, strict=False)
                    if s.scripted and _strict_action(t) not in (None, "accepted")
                }
            ),
            "seconds": round(self.seconds, 3),
            "finished_at": time.time(),
        }


async def run_probe(
    probe: Probe,
    mode: str,
    backend: WorldModel,
    settings: RunSettings | None = None,
    grounding: str = "off",
) -> dict[str, Any]:
    """Play one probe episode in ``mode`` and score it; returns the result row."""
    episode = ProbeEpisode(probe, mode, backend, settings, grounding)
    await episode.prepare()
    return await episode.look()


def _strict_action(turn: Any) -> str | None:
    """What strict mode did on a turn (accepted, reasked, corrected, unresolved)."""
    return ((turn.grounding or {}).get("strict") or {}).get("action")


def _turn_record(turn: Any) -> dict[str, Any]:
    if turn is None:
        return {}
    grounding = turn.grounding or {}
    return {
        "strict": _strict_action(turn),
        "facts": len(grounding.get("facts") or []),
        "action": turn.action_text,
        "observation": turn.observation.text[:4000],
        "error": turn.error,
        "format_problems": turn.format_problems,
        "state_patch": turn.state_patch,
        "state_error": turn.state_error,
        "prompt_tokens": turn.usage.prompt_tokens,
        "completion_tokens": turn.usage.completion_tokens,
        "latency_s": round(turn.latency_s, 3),
        "attempts": turn.attempts,
    }


def plan_runs(
    probes: Sequence[Probe],
    modes: Sequence[str],
    out: str | Path | None,
    run: dict[str, Any],
    *,
    restart: bool = False,
    groundings: Sequence[str] = ("off",),
) -> tuple[list[tuple[Probe, str, str]], dict[str, dict[str, Any]]]:
    """``((probe, mode, grounding) runs still to do, finished rows kept in out by key)``,
    ordered by domain, mode and grounding so that consecutive episodes share a system
    prompt (a local model's prefix cache then skips re-reading it). Rows that ended in a
    model error are rerun; rows written before grounding existed count as ``off``. An
    ``out`` file with rows of other settings is an error, not something to mix in."""

    modes = list(dict.fromkeys(modes))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise SimgymError(f"modes must be {' or '.join(MODES)}, not {', '.join(bad) or 'none'}")
    groundings = list(dict.fromkeys(groundings))
    bad = [g for g in groundings if g not in GROUNDINGS]
    if bad or not groundings:
        raise SimgymError(
            f"grounding must be {', '.join(GROUNDINGS)}, not {', '.join(bad) or 'none'}"
        )
    finished: dict[str, dict[str, Any]] = {}
    if out is not None:
        path = Path(out)
        if restart and path.exists():
            path.write_text("", encoding="utf-8")
        rows, _ = read_rows(path)
        run = json.loads(json.dumps(run))  # compare as it reads back from the file
        other = next((r for r in rows if r.get("run") != run), None)
        if other is not None:
            raise SimgymError(
                f"{path} holds rows of a run with other settings ({_settings_diff(other, run)}); "
                "write to another --out or pass --restart to discard them"
            )
        kept = prepare_resume(path, lambda r: r.get("status") == "ok")
        finished = {row_key(r): r for r in kept.values()}
    order = {name: i for i, name in enumerate(PROBE_DOMAINS)}
    runs = [(p, m, g) for p in probes for m in modes for g in groundings]
    runs.sort(
        key=lambda r: (
            order[r[0].domain],
            modes.index(r[1]),
            groundings.index(r[2]),
            r[0].gap,
            r[0].index,
        )
    )
    return [r for r in runs if r[0].key(r[1], r[2]) not in finished], finished


def row_key(row: dict[str, Any]) -> str:
    """A row's key from its fields (the same as its ``key``; also for old rows)."""
    mode = label(row["mode"], row_grounding(row))
    return f"{row['domain']}/{mode}/n{row['gap']}/p{row['index']}"


def _settings_diff(row: dict[str, Any], run: dict[str, Any]) -> str:
    theirs = row.get("run") or {}
    keys = [k for k in run if theirs.get(k) != run[k]] or ["run"]
    return ", ".join(f"{k}: {theirs.get(k)!r} there, {run.get(k)!r} now" for k in keys[:3])


async def run_consistency(
    pairs: Sequence[tuple[Probe, str] | tuple[Probe, str, str]],
    backend: WorldModel,
    *,
    settings: RunSettings | None = None,
    run: dict[str, Any] | None = None,
    writer: Any = None,
    concurrency: int = 1,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run each (probe, mode) pair or (probe, mode, grounding) triple (grounding ``off``
    when not given), ``concurrency`` model calls' worth at a time, writing rows as they
    finish. A model failure is recorded in its row; the run goes on.

    Runs of one domain, mode, grounding and gap form a group: all of its episodes are
    played up to the look first, then the looks are asked one group member after another.
    Their prompts share the system prompt and the filler turns (in ``history`` mode with a
    trimmed context, all but the last message), so a backend that reuses a cached prompt
    prefix (llama.cpp, vLLM, SGLang) reads each group's long history once, not once per
    probe."""
    gate = asyncio.Semaphore(max(1, concurrency))
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str, str, str, int], list[ProbeEpisode]] = {}
    for probe, mode, *rest in pairs:
        grounding = rest[0] if rest else "off"
        episode = ProbeEpisode(probe, mode, backend, settings, grounding)
        groups.setdefault((probe.domain, mode, grounding, probe.gap), []).append(episode)

    async def prepare(episode: ProbeEpisode) -> None:
        async with gate:
            await episode.prepare()

    async def look(episode: ProbeEpisode) -> None:
        async with gate:
            row = await episode.look()
        row["run"] = run
        rows.append(row)
        if writer is not None:
            writer.write(row)
        if on_row is not None:
            on_row(row)

    # Enough groups at once to keep ``concurrency`` calls busy, and no more: with one
    # call at a time, groups run strictly one after another, in order.
    largest = max((len(g) for g in groups.values()), default=1)
    group_gate = asyncio.Semaphore(max(1, -(-concurrency // largest)))

    async def play(group: list[ProbeEpisode]) -> None:
        async with group_gate:
            await asyncio.gather(*(prepare(e) for e in group))
            await asyncio.gather(*(look(e) for e in group))

    await asyncio.gather(*(play(group) for group in groups.values()))
    return rows
