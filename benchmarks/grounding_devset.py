"""Dev-set fidelity with grounding off, facts and strict: real trajectories replayed
through ``SimEnv`` with their scenarios, every scored turn predicted by the model under
test and compared with what the real environment printed.

    .venv/bin/python benchmarks/grounding_devset.py [--limit 20] [--domains terminal,mcp]
        [--grounding off,facts,strict] [--adapter none,auto] [--out rows.jsonl]

Why a replay and not ``bench infer``: grounding needs the hidden state before each
action, and only an environment that played the episode has it. Each recorded episode
(``devset/trajectories.jsonl``) is played again in a :class:`TeacherForcedEnv` with the
recorded scenario and system prompt: the domain grounds each action against the ledger,
the model predicts the observation (strict mode then checks and maybe corrects it), and
that prediction is what gets scored; then the prediction is replaced by the real
observation in the history, the way AgentWorldBench rows are built (teacher forcing), so
one wrong turn does not spoil the next. With grounding off the requests are exactly the
rows' (``bench/messages.build_messages``); with it on the newest user turn also carries
the ``**Facts:**`` block. Turns that are not scored (past ``--limit``, or finished in an
earlier run) are answered with the real observation at no model cost, so that the
history and the ledger still reach the scored turns as they really were.

Rows are picked as ``bench infer --limit/--seed`` picks them (the first ``--limit`` rows
of each domain, or a seeded sample), so the numbers line up with ``bench infer`` on
``devset/rows.jsonl``. Scores are simgym's rule metrics (:mod:`simgym.bench.metrics`):
edit similarity, line F1, the domain's format check, JSON validity and key overlap (rows
whose real observation is JSON, i.e. mcp). Each row also keeps the model's own last answer
and its metrics (``model_metrics``), what strict mode did (``strict``), and whether the
state's exact observation, where there was one, agrees with the real one
(``exact_matches_real``): a grounding that disagrees with reality makes strict mode
correct a prediction into a wrong one, which this shows.

Results go to ``--out`` (JSONL, one row per model, grounding and dev-set row) as they
finish; a rerun skips finished rows and reruns failed ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from results import save

from simgym.bench.data import BenchRow, clean_observation, load_rows, row_key, select_rows
from simgym.bench.metrics import rule_metrics
from simgym.core import contract
from simgym.core.env import SimEnv
from simgym.core.errors import EpisodeStateError, SimgymError
from simgym.core.grounding import MODES as GROUNDINGS
from simgym.core.grounding import Grounding
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Action, Observation, Trajectory, Turn
from simgym.core.worldmodel import Messages, Prediction, WorldModel
from simgym.data.exchanges import system_prompt_of
from simgym.data.export import row_id

SCHEMA = "simgym.benchmarks.grounding_devset/1"
DEVSET = Path(__file__).resolve().parent.parent / "devset"
# The mcp rows' system prompts (tools and seeded records) are ~16 KB.
LOCAL_N_CTX = 8192
METRICS = ("edit_similarity", "line_f1", "format_ok", "json_valid", "json_key_overlap")


# -- replay -------------------------------------------------------------------------------


@dataclass
class Replay:
    """One recorded episode to play again: its turns the world saw (numbered as the
    rows number them) and which of those are scored, with their dev-set rows."""

    trajectory: Trajectory
    turns: list[Turn]  # in_history turns, in order; turn n is turns[n - 1]
    scored: dict[int, BenchRow] = field(default_factory=dict)  # turn number -> row

    @property
    def domain(self) -> str:
        return self.trajectory.domain

    @property
    def last(self) -> int:
        """The last turn that needs playing (nothing after the last scored one does)."""
        return max(self.scored, default=0)


def plan_replays(trajectories: Sequence[Trajectory], rows: Sequence[BenchRow]) -> list[Replay]:
    """The episodes that hold ``rows``, in file order, each with its rows by turn number.
    A row with no episode is an error: rows and trajectories must be one recording."""
    wanted = {row.key: row for row in rows}
    replays = []
    for trajectory in trajectories:
        turns = [t for t in trajectory.turns if t.in_history]
        replay = Replay(trajectory, turns)
        for number in range(1, len(turns) + 1):
            key = row_key(trajectory.domain, row_id(trajectory.episode_id, number), number)
            if key in wanted:
                replay.scored[number] = wanted.pop(key)
        if replay.scored:
            replays.append(replay)
    if wanted:
        missing = ", ".join(list(wanted)[:3])
        raise SimgymError(f"{len(wanted)} rows have no recorded episode (e.g. {missing})")
    return replays


class TeacherForced:
    """A world model that forwards scored turns to the model under test and answers the
    others with the real observation (set :attr:`real` before the step; None: forward).
    It remembers the model's answers and the first request of the turn."""

    def __init__(self, inner: WorldModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.real: str | None = None
        self.answers: list[Prediction] = []
        self.requests: list[Messages] = []

    def start_turn(self, real: str | None) -> None:
        self.real, self.answers, self.requests = real, [], []

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction:
        self.requests.append(list(messages))
        if self.real is not None:
            return Prediction.from_raw(
                f"{contract.OPEN_TAG}\n{self.real}\n{contract.CLOSE_TAG}", model="real"
            )
        prediction = await self.inner.predict(
            messages, max_tokens=max_tokens, temperature=temperature, seed=seed, prefix=prefix
        )
        self.answers.append(prediction)
        return prediction

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    async def aclose(self) -> None:
        return None


class TeacherForcedEnv(SimEnv):
    """A ``SimEnv`` whose last observation can be replaced by the real one after a step,
    in the history the next request sends and in the trajectory (the next turn's prefix,
    a terminal's prompt echo, reads the last observation) and in what the domain's
    ``observe`` hook records from it. Everything else, grounding and strict mode
    included, is ``SimEnv``'s own."""

    def force(
        self, real: str, user: dict[str, str] | None, effects: dict[str, Any] | None = None
    ) -> None:
        """Make the last turn's observation ``real``. A turn the model answered nothing
        usable for never joined the history: it joins now with the real observation (its
        first request's ``user`` message), and its certain ``effects`` go to the ledger as
        they would have."""
        trajectory = self.trajectory
        if trajectory is None or not trajectory.turns:
            raise EpisodeStateError("nothing to replace: no turn was played")
        turn = trajectory.turns[-1]
        if turn.in_history:
            self._messages[-1] = contract.assistant_message(real)
        elif user is not None:
            self._messages += [user, contract.assistant_message(real)]
            turn.in_history = True
            if effects and self.grounding != "off" and self._ledger is not None:
                self._ledger.apply(effects)
        turn.observation = Observation(text=real)
        # What the ledger learns from an observation (a GUI's screen, a server's layout)
        # must come from the real one, as the next turn's history does.
        super()._observe(real, turn.action, None)

    def _observe(
        self, observation: str, action: Action | None, record: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Nothing is learned from the scored model's own answer: :meth:`force` observes
        the real one instead. Observing the guess first would let it change the ledger
        (a record it shows "whole", a refusal it did not write clearing a doubt about the
        call) before the real answer arrives, which a real episode never sees."""
        return record


@dataclass
class Settings:
    """What a row's result depends on besides the row, the model and the grounding."""

    max_tokens: int | None = 256
    temperature: float | None = None
    retries: int = 0  # format retries: bench infer makes none either

    def record(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "validation_retries": self.retries,
        }


async def play(
    replay: Replay,
    backend: WorldModel,
    grounding: str,
    *,
    model: str = "model",
    settings: Settings | None = None,
    skip: Callable[[BenchRow], bool] = lambda row: False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Play one episode in one grounding mode; one result row per scored turn, each also
    passed to ``on_row`` as soon as it is scored (rows for which ``skip`` is true are
    answered with the real observation and not returned)."""
    settings = settings or Settings()
    rows: list[dict[str, Any]] = []

    def emit(result: dict[str, Any]) -> None:
        result["settings"] = settings.record()
        result["world_model"] = backend.describe()
        rows.append(result)
        if on_row is not None:
            on_row(result)

    trajectory = replay.trajectory
    world = TeacherForced(backend)
    # the recorded prompt, unless the model was trained on the compact one
    style = getattr(backend, "prompt_style", None) or "full"
    env = TeacherForcedEnv(
        trajectory.domain,
        world,
        trajectory.scenario or None,
        system_prompt=system_prompt_of(trajectory, style=None if style == "full" else style),
        max_turns=len(replay.turns) + 1,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        validation_retries=settings.retries,
        render_known=True,  # the model's own answer is what this measures
        grounding=grounding,  # type: ignore[arg-type]
        seed=trajectory.seed,
    )
    await env.reset(trajectory.task, scenario=trajectory.scenario or None)
    stopped: str | None = None
    for number, real in enumerate(replay.turns[: replay.last], 1):
        row = replay.scored.get(number)
        scored = row is not None and not skip(row)
        if stopped is not None:
            if scored:
                emit(_failed(row, model, grounding, stopped))
            continue
        grounded = _ground(env, real)
        exact = None
        if grounded is not None and grounded.observation is not None:
            exact = not grounded.problems(real.observation.text)
        world.start_turn(None if scored else real.observation.text)
        started = time.perf_counter()
        try:
            await env.step(real.action if real.action is not None else real.action_text)
        except EpisodeStateError as exc:  # the episode ended early (a final action)
            stopped = f"the episode ended before turn {number}: {exc}"
            if scored:
                emit(_failed(row, model, grounding, stopped))
            continue
        turn = env.trajectory.turns[-1]  # type: ignore[union-attr]
        if scored:
            emit(_result(row, turn, world, model, grounding, exact, time.perf_counter() - started))
        if turn.error_type in ("action", "world_model"):
            stopped = f"turn {number}: {turn.error}"  # the history can no longer follow
            continue
        user = world.requests[0][-1] if world.requests else None
        env.force(real.observation.text, user, grounded.effects if grounded else None)
    await env.close(None)
    return rows


def _ground(env: SimEnv, real: Turn) -> Grounding | None:
    """What the domain grounds for the recorded action on the state before it (the same
    call ``SimEnv`` makes), kept to compare its exact observation with the real one."""
    if env.grounding == "off" or real.action is None or env.state is None:
        return None
    try:
        action = env.domain.coerce_action(real.action, env.scenario, env.max_action_chars)
        return env.domain.ground(action, env.state, env.scenario)
    except Exception:  # a grounding bug is SimEnv's to record; here it is just unknown
        return None


def _result(
    row: BenchRow,
    turn: Turn,
    world: TeacherForced,
    model: str,
    grounding: str,
    exact: bool | None,
    seconds: float,
) -> dict[str, Any]:
    reference = clean_observation(row.reference)
    failed = turn.error_type in ("action", "world_model")
    text = "" if turn.observation.kind == "error" else turn.observation.text
    own = world.answers[-1].observation if world.answers else None
    record = turn.grounding or {}
    out = _base(row, model, grounding)
    out.update(
        {
            "status": "failed" if failed else "ok",
            "error": turn.error,
            "observation": text,
            "model_observation": own,
            "reference": reference,
            "metrics": rule_metrics(
                text, reference, domain=row.domain, current_prompt=row.current_prompt
            ),
            "model_metrics": None
            if own is None or own == text
            else rule_metrics(own, reference, domain=row.domain, current_prompt=row.current_prompt),
            "strict": (record.get("strict") or {}).get("action"),
            "facts": len(record.get("facts") or []),
            "exact_matches_real": exact,
            "model_calls": len(world.answers),
            "prompt_chars": sum(len(m["content"]) for m in world.requests[0])
            if world.requests
            else 0,
            "prompt_tokens": turn.usage.prompt_tokens,
            "completion_tokens": turn.usage.completion_tokens,
            "seconds": round(seconds, 3),
        }
    )
    return out


def _failed(row: BenchRow, model: str, grounding: str, error: str) -> dict[str, Any]:
    out = _base(row, model, grounding)
    out.update({"status": "failed", "error": error, "metrics": None})
    return out


def _base(row: BenchRow, model: str, grounding: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "key": result_key(model, grounding, row),
        "row": row.key,
        "domain": row.domain,
        "turn_idx": row.turn_idx,
        "model": model,
        "grounding": grounding,
        "finished_at": time.time(),
    }


def result_key(model: str, grounding: str, row: BenchRow) -> str:
    return f"{model}/{grounding}/{row.key}"


async def run_devset(
    replays: Sequence[Replay],
    models: dict[str, WorldModel],
    groundings: Sequence[str],
    *,
    settings: Settings | None = None,
    finished: set[str] | frozenset[str] = frozenset(),
    writer: Any = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every replay with every model and grounding mode, one episode at a time (the
    embedded model answers one request at a time, and consecutive turns of one episode
    share their prompt prefix, which its cache reuses), each row written as soon as it
    is scored. Rows whose key is in ``finished`` are not predicted again."""
    bad = [g for g in groundings if g not in GROUNDINGS]
    if bad or not groundings:
        raise SimgymError(f"grounding must be {', '.join(GROUNDINGS)}, not {bad or 'none'}")
    out: list[dict[str, Any]] = []

    def keep(row: dict[str, Any]) -> None:
        out.append(row)
        if writer is not None:
            writer.write(row)
        if on_row is not None:
            on_row(row)

    for label, backend in models.items():
        for replay in replays:
            # The grounding modes of one episode one after another: their requests share
            # the system prompt (16 KB for mcp), which a prefix cache then reads once.
            for grounding in groundings:

                def done(row: BenchRow, label: str = label, grounding: str = grounding) -> bool:
                    return result_key(label, grounding, row) in finished

                if all(done(row) for row in replay.scored.values()):
                    continue
                await play(
                    replay,
                    backend,
                    grounding,
                    model=label,
                    settings=settings,
                    skip=done,
                    on_row=keep,
                )
    return out


# -- report -------------------------------------------------------------------------------


@dataclass
class Cell:
    """Mean metrics of one domain, model and grounding mode."""

    domain: str
    model: str
    grounding: str
    rows: int = 0
    failed: int = 0
    corrected: int = 0
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, row: dict[str, Any]) -> None:
        self.rows += 1
        metrics = row.get("metrics")
        if row.get("status") != "ok" or not metrics:
            self.failed += 1
            return
        self.corrected += row.get("strict") == "corrected"
        for name in METRICS:
            if metrics.get(name) is not None:
                self.values.setdefault(name, []).append(float(metrics[name]))

    def mean(self, name: str) -> float | None:
        values = self.values.get(name)
        return sum(values) / len(values) if values else None

    def as_dict(self) -> dict[str, Any]:
        means = {name: _round(self.mean(name)) for name in METRICS}
        counts = {f"{name}_n": len(self.values.get(name, [])) for name in METRICS}
        return {
            "domain": self.domain,
            "model": self.model,
            "grounding": self.grounding,
            "rows": self.rows,
            "failed": self.failed,
            "corrected": self.corrected,
            **means,
            **counts,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def summarize(rows: Sequence[dict[str, Any]]) -> list[Cell]:
    """Cells by domain, model and grounding (grounding in off, facts, strict order), then
    an ``all`` cell per model and grounding that averages the domains' means (each domain
    counts once, as ``bench score`` reports ``overall.macro``)."""
    cells: dict[tuple[str, str, str], Cell] = {}
    for row in rows:
        key = (row["domain"], row["model"], row["grounding"])
        cells.setdefault(key, Cell(*key)).add(row)
    order = {g: i for i, g in enumerate(GROUNDINGS)}
    models = list(dict.fromkeys(row["model"] for row in rows))
    ordered = sorted(
        cells.values(), key=lambda c: (c.domain, models.index(c.model), order[c.grounding])
    )
    overall: dict[tuple[str, str], Cell] = {}
    for cell in ordered:
        total = overall.setdefault(
            (cell.model, cell.grounding), Cell("all", cell.model, cell.grounding)
        )
        total.rows += cell.rows
        total.failed += cell.failed
        total.corrected += cell.corrected
        for name in METRICS:
            mean = cell.mean(name)
            if mean is not None:
                total.values.setdefault(name, []).append(mean)
    tail = sorted(overall.values(), key=lambda c: (models.index(c.model), order[c.grounding]))
    return ordered + tail


def report_table(cells: Sequence[Cell], title: str = "Dev-set fidelity by grounding") -> Any:
    """domain x model x grounding -> edit similarity, line F1, format, and for rows with
    a JSON observation its validity and key overlap."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=title,
        caption="edit/F1: edit similarity and line F1 with the real observation; fmt: the "
        "domain's format check; json/keys: JSON validity and key-path overlap (JSON rows "
        "only); fix: predictions strict mode corrected; all: mean of the domains",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    for name, right in (
        ("domain", False),
        ("model", False),
        ("ground", False),
        ("rows", True),
        ("edit", True),
        ("F1", True),
        ("fmt", True),
        ("json", True),
        ("keys", True),
        ("fix", True),
        ("fail", True),
    ):
        table.add_column(name, justify="right" if right else "left", no_wrap=True)
    previous = None
    for cell in cells:
        if previous is not None and cell.domain != previous:
            table.add_section()
        previous = cell.domain
        table.add_row(
            cell.domain,
            cell.model,
            cell.grounding,
            str(cell.rows),
            *(_fmt(cell.mean(name)) for name in METRICS),
            str(cell.corrected) if cell.grounding == "strict" else "-",
            str(cell.failed),
        )
    return table


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


# -- command line -------------------------------------------------------------------------


def model_label(adapter: str) -> str:
    """``none`` -> ``base``, ``auto`` -> ``shipped``, a file -> its name."""
    lowered = adapter.strip().lower()
    if lowered in ("", "none", "base"):
        return "base"
    if lowered == "auto":
        return "shipped"
    return Path(adapter).stem


def build_models(args: argparse.Namespace) -> dict[str, WorldModel]:
    import simgym

    if args.world_model != "local":
        opts = {"base_url": args.base_url, "model": args.model}
        return {args.model or args.world_model: simgym.world_model(args.world_model, **opts)}
    models: dict[str, WorldModel] = {}
    for adapter in _words(args.adapter):
        backend = simgym.world_model(
            "local", model_path=args.model_path, n_ctx=args.n_ctx, adapter=adapter
        )
        label = model_label(adapter)
        if label == "shipped" and not getattr(backend, "adapter", None):
            label = "base"  # no shipped adapter here: auto is the plain base
        models.setdefault(label, backend)
    return models


def _words(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def dataset_counts(rows: Sequence[BenchRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.domain] = counts.get(row.domain, 0) + 1
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devset", type=Path, default=DEVSET, help="the dev-set folder")
    parser.add_argument("--limit", type=int, default=20, help="rows per domain (default 20)")
    parser.add_argument("--seed", type=int, default=None, help="sample the rows at random")
    parser.add_argument("--domains", default="", help="comma list (default: all)")
    parser.add_argument("--grounding", default="off,facts,strict", help="comma list")
    parser.add_argument(
        "--adapter",
        default="auto",
        help="comma list of local adapters: none (the base), auto (the shipped default), "
        "or GGUF files; one model each",
    )
    parser.add_argument("--world-model", "-w", default="local", help="local or openai")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default=None, help="served model name (openai)")
    parser.add_argument("--model-path", default=None, help="GGUF file for the local backend")
    parser.add_argument("--n-ctx", type=int, default=LOCAL_N_CTX)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--retries", type=int, default=0, help="format retries per turn")
    parser.add_argument("--out", type=Path, default=None, help="per-row results JSONL")
    parser.add_argument("--json", type=Path, default=None, help="write the table as JSON")
    parser.add_argument("--restart", action="store_true", help="discard rows in --out")
    args = parser.parse_args(argv)

    from rich.console import Console

    from simgym.bench.store import RowWriter, prepare_resume

    console, errors = Console(), Console(stderr=True)
    groundings = _words(args.grounding)
    bad = [g for g in groundings if g not in GROUNDINGS]
    if bad or not groundings:
        parser.error(f"--grounding takes {', '.join(GROUNDINGS)}, not {args.grounding!r}")
    every = load_rows(args.devset / "rows.jsonl")
    counts = dataset_counts(every)
    errors.print(
        "dev set rows per domain: " + ", ".join(f"{d} {n}" for d, n in sorted(counts.items()))
    )
    chosen = select_rows(
        every, domains=_words(args.domains) or None, limit=args.limit, seed=args.seed
    )
    replays = plan_replays(list(read_trajectories(args.devset / "trajectories.jsonl")), chosen)
    settings = Settings(args.max_tokens, args.temperature, args.retries)
    models = build_models(args)
    finished: dict[str, dict[str, Any]] = {}
    if args.out is not None:
        if args.restart and args.out.exists():
            args.out.write_text("", encoding="utf-8")
        finished = prepare_resume(
            args.out,
            lambda r: r.get("status") == "ok" and r.get("settings") == settings.record(),
        )
        if finished:
            errors.print(f"resuming: {len(finished)} rows already in {args.out}")
    todo = len(chosen) * len(models) * len(groundings)
    errors.print(
        f"{len(chosen)} rows in {len(replays)} episodes x {len(models)} model(s) "
        f"({', '.join(models)}) x {len(groundings)} grounding modes = {todo} predictions"
    )
    started = time.perf_counter()

    def progress(row: dict[str, Any]) -> None:
        metrics = row.get("metrics") or {}
        errors.print(
            f"{row['model']}/{row['grounding']} {row['row']}: {row['status']} "
            f"edit {metrics.get('edit_similarity', '-')} strict {row.get('strict')} "
            f"({row.get('seconds', 0):.1f}s)",
            highlight=False,
        )

    async def go() -> list[dict[str, Any]]:
        writer = RowWriter(args.out) if args.out else None
        try:
            return await run_devset(
                replays,
                models,
                groundings,
                settings=settings,
                finished=set(finished),
                writer=writer,
                on_row=progress,
            )
        finally:
            if writer is not None:
                writer.close()
            for backend in models.values():
                await backend.aclose()

    rows = asyncio.run(go())
    wanted = {result_key(m, g, r) for m in models for g in groundings for r in chosen}
    results = [r for r in [*finished.values(), *rows] if r["key"] in wanted]
    cells = summarize(results)
    console.print(
        report_table(cells, title=f"Dev-set fidelity by grounding ({args.limit} rows/domain)")
    )
    errors.print(f"{len(rows)} predictions in {time.perf_counter() - started:.0f}s")
    if args.json:
        report = {
            "settings": settings.record(),
            "limit": args.limit,
            "seed": args.seed,
            "models": {label: m.describe() for label, m in models.items()},
            "devset_rows": counts,
            "cells": [c.as_dict() for c in cells],
        }
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    save(
        "grounding_devset",
        rows=[c.as_dict() for c in cells],
        summary={"limit": args.limit, "seed": args.seed, "groundings": groundings},
        notes="Dev-set turns predicted by the model under test with grounding off, facts and "
        "strict, compared with what the real environment printed (edit similarity, line F1, "
        "format, JSON validity and keys).",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
