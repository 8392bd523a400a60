"""``bench consistency``: does a world model keep a fact straight over n turns?

A probe is one short episode about one fact (a file in ``terminal`` and ``swe``, a record
in ``mcp``). At turn ``k`` the fact is created, changed or deleted; at turn ``k + n`` it is
looked at again (``cat``, ``read_file``, ``get_record``), and a rule checks what the
observation shows: the newest value and not the one before it, or a not-found error and
not the deleted value. Values are random tokens from the seed (``teal-4821``), so a model
cannot pass by guessing. The same probes run in both context modes of :class:`SimEnv`:
``history`` (every earlier turn is sent) and ``state`` (the hidden state ledger plus the
last few turns), so the two can be compared pair by pair.

Which turns the model under test writes: only the change at turn ``k`` and the look at
turn ``k + n``. Everything else is written by rule, not by the model: the turn before
``k`` (creating the old value that a change or delete acts on, or an unrelated command)
and the ``n - 1`` filler turns in between (``pwd``, ``echo check-17``, reading an
unrelated record or setting). Those scripted observations are correct and leave the fact
alone; when the system prompt asks for hidden-state updates they carry the right patch
(``{}`` for fillers). This keeps the benchmark affordable (two model calls per probe,
whatever ``n`` is) while the model still sees ``n`` turns of realistic activity between
the change and the look; it measures memory of the fact, not the model's skill at
simulating the fillers (strict mode may add a call: it asks again when the state does
not determine the whole observation). A model that cannot fit the history into its
context (the embedded model has 4096 tokens; its backend drops the oldest turns) loses
the change at large ``n`` in ``history`` mode: that is the drift ``state`` mode is meant
to fix, and the report shows it as measured.

In ``state`` mode the hidden state is only as good as the patches the model wrote at
turn ``k``, so each row also says whether the ledger held the fact right just before the
look (``ledger_ok``): a failure with a wrong ledger is a bad patch, one with a right
ledger is a model that ignored the state it was shown. The report's prompt tokens are the
probe turn's ``usage.prompt_tokens`` as the backend counts them (the local backend adds
the second request it makes to write the ``<state_update>``), and the JSON report's
``probe_request_chars`` is the size of the messages simgym sent, the same measure for
every backend. Format retries
are off by default (``retries=0``): a retry re-rolls the answer and doubles the cost.

Grounding (:mod:`simgym.core.grounding`) is a second dimension: each probe runs with each
``SimEnv(grounding=...)`` mode asked for (``off``, ``facts``, ``strict``), so the report
shows a model on its own beside the same model with simgym's facts. With grounding on,
the domain computes what the change at turn ``k`` certainly does and applies it to the
hidden state itself, and the look at ``k + n`` is sent with the facts the state holds;
the scripted turns are written so that the effects simgym computes for them are the same
as their scripted patches (``echo value > file`` creates the same file either way), and
a scripted turn that strict mode would re-ask or correct is a bug in the probes, counted
in the row (``scripted_strict``). The look is still written by the model under test, but
in ``strict`` mode simgym may correct it to the exact observation the state determines:
the row keeps what strict mode did (``probe.strict``: accepted, reasked, corrected or
unresolved) and whether the model's own last answer passed (``model_passed``), and the
report counts the passes that came from corrections. With grounding on, the ledger is
kept by simgym in both context modes, so ``ledger_ok`` is reported for ``history`` too
(once a turn was grounded).

Rows (one per probe, context mode and grounding) go to a JSONL file as they finish; a
rerun with the same settings skips the finished ones and reruns those that ended in a
model error. Row keys are ``domain/mode/n5/p0`` with grounding off (the keys of rows
written before grounding existed, which read back as ``off``) and
``domain/mode+strict/n5/p0`` with it on.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgym.core import contract
from simgym.core.domain import get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.grounding import MODES as GROUNDING_MODES
from simgym.core.state import STATE_CLOSE, STATE_OPEN
from simgym.core.worldmodel import Messages, Prediction, WorldModel

SCHEMA = "simgym.bench.consistency/1"
OPS = ("create", "change", "delete")
MODES = ("history", "state")
GROUNDINGS = GROUNDING_MODES  # off, facts, strict
DEFAULT_GROUNDINGS = ("off", "strict")
DEFAULT_GAPS = (5, 20, 50)
MUTATION_TURN = 2  # turn k: turn 1 is scripted (the old value, or an unrelated command)

# Value tokens: a word and four digits, e.g. "teal-4821" (30 x 9000 choices).
_WORDS = (
    "teal amber coral olive ivory slate plum jade ochre rust cobalt mint lilac sand "
    "pearl onyx maple cedar birch fern moss dune ember frost harbor quartz sable tulip "
    "willow zinc"
).split()


# -- probes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scripted:
    """An observation written by rule: ``text``, after the command echo a terminal shows
    (``echo``; the environment's own echo prefix is used when it gives one), plus the
    hidden-state patch the turn makes."""

    text: str
    patch: dict[str, Any] = field(default_factory=dict)
    echo: str | None = None

    def observation(self, prefix: str) -> str:
        if self.echo is None:
            return self.text
        return (prefix or self.echo) + self.text


@dataclass(frozen=True)
class Step:
    """One action of a probe episode; ``scripted`` is None when the model under test
    writes the observation."""

    role: str  # setup | mutate | filler | probe
    action: Any
    scripted: Scripted | None = None


@dataclass(frozen=True)
class Probe:
    """One fact, one change to it at turn ``k``, one look at turn ``k + gap``."""

    domain: str
    op: str  # create | change | delete
    gap: int
    index: int
    fact: str  # the file path or record id
    current: str | None  # what the look must show (None: the fact must be gone)
    previous: str | None  # what it must not show (the overwritten or deleted value)
    seed: int
    steps: tuple[Step, ...]

    @property
    def mutation_turn(self) -> int:
        return MUTATION_TURN

    @property
    def probe_turn(self) -> int:
        return MUTATION_TURN + self.gap

    def key(self, mode: str, grounding: str = "off") -> str:
        return f"{self.domain}/{label(mode, grounding)}/n{self.gap}/p{self.index}"


def label(mode: str, grounding: str = "off") -> str:
    """``history`` or ``history+strict``: a context mode and a grounding mode together.
    Grounding off keeps the plain mode name, so keys written before grounding existed
    still name the same runs."""
    return mode if grounding == "off" else f"{mode}+{grounding}"


def row_grounding(row: dict[str, Any]) -> str:
    """A row's grounding mode; rows written before grounding existed ran without it."""
    return row.get("grounding") or "off"


@dataclass(frozen=True)
class ProbeDomain:
    """How to probe one domain: the world, and the actions (and scripted answers) that
    create, change, delete and look at a fact, plus unrelated filler actions."""

    name: str
    scenario: dict[str, Any]
    instruction: str
    fact: Callable[[str], str]  # random id -> file path / record id
    setup: Callable[[str, str], tuple[Any, Scripted]]  # create the old value, by rule
    mutate: Callable[[str, str, str | None, str | None], Any]  # (op, fact, new, old)
    look: Callable[[str], Any]
    filler: Callable[[int], tuple[Any, Scripted]]  # turn number -> unrelated action
    locate: Callable[[dict[str, Any], str], Any]  # the fact in a hidden state, or None
    missing: re.Pattern[str]  # what a not-found error looks like


def _value(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}-{rng.randrange(1000, 10000)}"


def generate_probes(
    domains: Sequence[str],
    gaps: Sequence[int] = DEFAULT_GAPS,
    probes: int = 3,
    seed: int = 0,
) -> list[Probe]:
    """``probes`` probes for each domain and gap, ops cycling create, change, delete
    (terminal starts at create, mcp at change, swe at delete).
    The same seed gives the same probes (ids, values, actions). Repeats are ignored."""
    domains, gaps = list(dict.fromkeys(domains)), list(dict.fromkeys(gaps))
    if not domains or not gaps:
        raise SimgymError("name at least one domain and one gap")
    unknown = [d for d in domains if d not in PROBE_DOMAINS]
    if unknown:
        raise SimgymError(
            f"no consistency probes for {', '.join(unknown)}; available: {', '.join(PROBE_DOMAINS)}"
        )
    bad = [g for g in gaps if not isinstance(g, int) or g < 1]
    if bad:
        raise SimgymError(f"gaps must be whole numbers of turns >= 1, not {bad}")
    if probes < 1:
        raise SimgymError("--probes must be at least 1")
    out = []
    for name in domains:
        spec = PROBE_DOMAINS[name]
        # Each domain starts the cycle at another op, so that one probe per cell still
        # covers all three ops across the domains.
        offset = list(PROBE_DOMAINS).index(name)
        for gap in gaps:
            for index in range(probes):
                rng = random.Random(f"{seed}/{name}/{gap}/{index}")
                op = OPS[(index + offset) % len(OPS)]
                out.append(_probe(spec, op, gap, index, rng))
    return out


def _probe(spec: ProbeDomain, op: str, gap: int, index: int, rng: random.Random) -> Probe:
    fact = spec.fact(f"{rng.randrange(16**4):04x}")
    old = _value(rng)
    new = _value(rng)
    while new.split("-")[0] == old.split("-")[0]:  # old and new never share a word
        new = _value(rng)
    episode_seed = rng.randrange(2**31)
    if op == "create":
        first = spec.filler(1)
        current, previous = new, None
    else:
        first = spec.setup(fact, old)
        current, previous = (new, old) if op == "change" else (None, old)
    steps = [Step("setup", first[0], first[1])]
    steps.append(Step("mutate", spec.mutate(op, fact, current, previous)))
    for turn in range(MUTATION_TURN + 1, MUTATION_TURN + gap):
        action, scripted = spec.filler(turn)
        steps.append(Step("filler", action, scripted))
    steps.append(Step("probe", spec.look(fact)))
    return Probe(spec.name, op, gap, index, fact, current, previous, episode_seed, tuple(steps))


# -- scoring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str


def score_observation(probe: Probe, text: str | None, error: str | None = None) -> Verdict:
    """Was the fact reported as it should be? A present fact: the newest value is shown,
    the one before it is not, and there is no not-found error. A deleted fact: a
    not-found error and no trace of the deleted value."""
    if error:
        return Verdict(False, f"no observation: {error}")
    if not text or not text.strip():
        return Verdict(False, "no observation: empty")
    missing = PROBE_DOMAINS[probe.domain].missing.search(text) is not None
    shows_previous = probe.previous is not None and _mentions(text, probe.previous)
    if probe.current is None:  # deleted
        if shows_previous:
            return Verdict(False, f"the deleted value {probe.previous} came back")
        if not missing:
            return Verdict(False, "no not-found error for the deleted fact")
        return Verdict(True, "reported missing")
    shows_current = _mentions(text, probe.current)
    if shows_previous:
        both = " alongside the new one" if shows_current else ""
        return Verdict(False, f"shows the old value {probe.previous}{both}")
    if not shows_current:
        if missing:
            return Verdict(False, "reported missing, but it exists")
        return Verdict(False, f"the value {probe.current} is not shown")
    if missing:
        return Verdict(False, "shows the value but also a not-found error")
    return Verdict(True, f"shows {probe.current}")


def _mentions(text: str, value: str) -> bool:
    """``value`` appears as a whole token (``teal-4821`` is not in ``teal-48210``)."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text) is not None


def ledger_agrees(probe: Probe, state: dict[str, Any] | None) -> bool | None:
    """Does the hidden state hold the fact as it should before the look (None: no
    state)? In ``state`` mode this separates a bad patch from a model that ignored the
    state it was shown."""
    if state is None:
        return None
    found = PROBE_DOMAINS[probe.domain].locate(state, probe.fact)
    if probe.current is None:
        return found is None
    text = found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
    return (
        found is not None
        and probe.current in text
        and (probe.previous is None or probe.previous not in text)
    )


def _find(mapping: Any, name: str) -> Any:
    """The value under ``name`` or under a key that ends with ``/name`` (a model may
    write a file's path relative or absolute)."""
    if not isinstance(mapping, dict):
        return None
    if mapping.get(name) is not None:
        return mapping[name]
    tail = "/" + name.rsplit("/", 1)[-1]
    for key, value in mapping.items():
        if isinstance(key, str) and (key.endswith(tail) or key == tail[1:]) and value is not None:
            return value
    return None


# -- the world model wrapper ----------------------------------------------------------------


class ScriptedTurns:
    """A world model that answers scripted turns itself and forwards the others to the
    model under test. Set :attr:`script` before each step (None: forward). One per
    episode; the backend it wraps is shared and closed by its owner."""

    def __init__(self, inner: WorldModel) -> None:
        self.inner = inner
        self.name = inner.name
        # Forwarded so that a SimEnv built without ``grounding=`` acts as on the backend
        # itself; the benchmark passes its grounding mode explicitly anyway.
        self.default_grounding = getattr(inner, "default_grounding", None)
        self.render_known = getattr(inner, "render_known", None)
        self.script: Scripted | None = None
        self.request_chars = 0  # size of the last request forwarded to the model
        self.answers: list[str] = []  # observations the model wrote, for the row

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction:
        if self.script is None:
            self.request_chars = sum(len(m["content"]) for m in messages)
            prediction = await self.inner.predict(
                messages, max_tokens=max_tokens, temperature=temperature, seed=seed, prefix=prefix
            )
            self.answers.append(prediction.observation)
            return prediction
        text = self.script.observation(prefix or "")
        raw = f"{contract.OPEN_TAG}\n{text}\n{contract.CLOSE_TAG}"
        if messages and STATE_OPEN in messages[0]["content"]:  # the prompt asks for updates
            raw += f"\n{STATE_OPEN}{json.dumps(self.script.patch)}{STATE_CLOSE}"
        return Prediction.from_raw(raw, model="scripted")

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    async def aclose(self) -> None:
        return None


# -- running --------------------------------------------------------------------------------


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
    from simgym.bench.store import prepare_resume, read_rows

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


# -- report ---------------------------------------------------------------------------------


@dataclass
class Cell:
    """Results for one domain, gap, context mode and grounding mode."""

    domain: str
    gap: int
    mode: str
    grounding: str = "off"
    passed: int = 0
    total: int = 0
    errors: int = 0
    corrected: int = 0  # passes whose look strict mode corrected (simgym's, not the model's)
    by_op: dict[str, list[int]] = field(default_factory=dict)  # op -> [passed, total]
    ledger_ok: int = 0
    ledger_total: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    request_chars: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def label(self) -> str:
        return label(self.mode, self.grounding)

    def as_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "gap": self.gap,
            "mode": self.mode,
            "grounding": self.grounding,
            "passed": self.passed,
            "total": self.total,
            "pass_rate": round(self.rate, 4),
            "corrected": self.corrected,
            "errors": self.errors,
            "by_op": self.by_op,
            "ledger_ok": self.ledger_ok if self.ledger_total else None,
            "ledger_total": self.ledger_total,
            "probe_prompt_tokens": _mean(self.prompt_tokens),
            "probe_request_chars": _mean(self.request_chars),
        }


def _mean(values: list[int]) -> int | None:
    return round(sum(values) / len(values)) if values else None


def summarize(rows: Sequence[dict[str, Any]]) -> list[Cell]:
    """One cell per domain, gap, mode and grounding, in that order (so a mode's
    grounding-off row sits right above its grounded rows)."""
    cells: dict[tuple[str, int, str, str], Cell] = {}
    for row in rows:
        key = (row["domain"], row["gap"], row["mode"], row_grounding(row))
        cell = cells.setdefault(key, Cell(*key))
        cell.total += 1
        cell.passed += bool(row["passed"])
        cell.errors += row.get("status") == "error"
        probe = row.get("probe") or {}
        cell.corrected += bool(row["passed"]) and probe.get("strict") == "corrected"
        counts = cell.by_op.setdefault(row["op"], [0, 0])
        counts[0] += bool(row["passed"])
        counts[1] += 1
        if row.get("ledger_ok") is not None:
            cell.ledger_total += 1
            cell.ledger_ok += bool(row["ledger_ok"])
        if probe.get("prompt_tokens"):
            cell.prompt_tokens.append(probe["prompt_tokens"])
        if probe.get("request_chars"):
            cell.request_chars.append(probe["request_chars"])
    order = {name: i for i, name in enumerate(PROBE_DOMAINS)}
    return sorted(
        cells.values(),
        key=lambda c: (
            order.get(c.domain, len(order)),
            c.domain,
            c.gap,
            MODES.index(c.mode),
            GROUNDINGS.index(c.grounding) if c.grounding in GROUNDINGS else len(GROUNDINGS),
        ),
    )


def report_table(cells: Sequence[Cell], title: str = "World-state consistency") -> Any:
    """A rich table: pass rate by domain, gap n, context mode and grounding (off on the
    row above strict), with the passes strict mode corrected, the passes per op, the
    hidden state's agreement and the probe turn's prompt tokens. Compact enough for an
    80-column terminal at the default three probes a cell."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=title,
        caption="ground: grounding mode; fix: passes whose look strict mode corrected to "
        "the exact observation; new/chg/del: passes per op; ledger: hidden state right at "
        "the look; tok: probe prompt tokens (backend's count; the JSON report has the "
        "request size in characters too)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    for name, right in COLUMNS:
        table.add_column(name, justify="right" if right else "left", no_wrap=True)
    previous: tuple[str, int, str] | None = None
    for cell in cells:
        ops = [
            f"{cell.by_op[op][0]}/{cell.by_op[op][1]}" if op in cell.by_op else "-" for op in OPS
        ]
        ledger = f"{cell.ledger_ok}/{cell.ledger_total}" if cell.ledger_total else "-"
        tokens = _mean(cell.prompt_tokens)
        group = (cell.domain, cell.gap, cell.mode)
        if previous is not None and group[:2] != previous[:2]:
            table.add_section()
        previous = group
        table.add_row(
            cell.domain,
            str(cell.gap),
            cell.mode,
            cell.grounding,
            f"{cell.passed}/{cell.total}",
            f"{100 * cell.rate:.0f}%",
            str(cell.corrected) if cell.grounding == "strict" else "-",
            *ops,
            ledger,
            "-" if tokens is None else str(tokens),
            str(cell.errors),
        )
    return table


# (header, right-aligned); "tok" is the probe turn's prompt tokens as the backend counts
# them, "fix" the corrected passes.
COLUMNS = (
    ("domain", False),
    ("n", True),
    ("mode", False),
    ("ground", False),
    ("pass", True),
    ("rate", True),
    ("fix", True),
    ("new", True),
    ("chg", True),
    ("del", True),
    ("ledger", True),
    ("tok", True),
    ("err", True),
)


def mode_totals(cells: Sequence[Cell]) -> dict[str, tuple[int, int]]:
    """``label -> (passed, total)`` over all cells, the label being the context mode
    (``history``) with grounding off and ``history+strict`` with it on."""
    totals: dict[str, list[int]] = {}
    for cell in cells:
        t = totals.setdefault(cell.label, [0, 0])
        t[0] += cell.passed
        t[1] += cell.total
    return {name: (p, n) for name, (p, n) in totals.items()}


def corrected_totals(cells: Sequence[Cell]) -> dict[str, int]:
    """``label -> passes strict mode corrected`` (only grounded labels)."""
    out: dict[str, int] = {}
    for cell in cells:
        if cell.grounding != "off":
            out[cell.label] = out.get(cell.label, 0) + cell.corrected
    return out


# -- the probed domains -------------------------------------------------------------------

# terminal: a file under the home directory, written with echo, removed with rm, read
# with cat.
_T_PROMPT = "user@devbox:~$"
_T_HOME = "/home/user"


def _t_scripted(command: str, output: str = "", patch: dict[str, Any] | None = None) -> Scripted:
    body = f"{output}\n{_T_PROMPT}" if output else _T_PROMPT
    return Scripted(body, patch or {}, echo=f"{_T_PROMPT} {command}\n")


def _t_setup(path: str, value: str) -> tuple[Any, Scripted]:
    command = f'echo "{value}" > {path}'
    return command, _t_scripted(command, patch={"files": {path: value + "\n"}})


def _t_mutate(op: str, path: str, new: str | None, old: str | None) -> Any:
    return f"rm {path}" if op == "delete" else f'echo "{new}" > {path}'


def _t_filler(turn: int) -> tuple[Any, Scripted]:
    command, output = [
        (f"echo check-{turn}", f"check-{turn}"),
        ("pwd", _T_HOME),
        ("whoami", "user"),
        (f"cat {_T_HOME}/notes.txt", "remember the milk"),
        ("hostname", "devbox"),
    ][turn % 5]
    return command, _t_scripted(command, output)


TERMINAL_PROBES = ProbeDomain(
    name="terminal",
    scenario={
        "user": "user",
        "hostname": "devbox",
        "files": {f"{_T_HOME}/notes.txt": "remember the milk\n", f"{_T_HOME}/projects/": ""},
        "programs": ["python3", "git", "vim"],
    },
    instruction="Keep short notes in files in the home directory.",
    fact=lambda rid: f"{_T_HOME}/probe-{rid}.txt",
    setup=_t_setup,
    mutate=_t_mutate,
    look=lambda path: f"cat {path}",
    filler=_t_filler,
    locate=lambda state, path: _find(state.get("files"), path),
    missing=re.compile(r"no such file or directory", re.IGNORECASE),
)


# mcp: a record in a small record store, behind create/update/delete/get tools.
def _tool(name: str, description: str, /, **properties: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {k: {"type": "string", "description": v} for k, v in properties.items()},
            "required": list(properties),
        },
    }


# Collections are lists of records with an id field, the shape simgym's mcp grounding
# (simgym.domains.mcp_ground) reads: it then knows what each record tool certainly does.
_M_SETTINGS = {"region": "eu-west-1", "retention_days": "30", "owner": "ops-team"}
_M_FIRST = {"id": "R-0001", "value": "first note"}


def _m_call(name: str, /, **arguments: str) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _m_setup(rid: str, value: str) -> tuple[Any, Scripted]:
    result = {"id": rid, "value": value, "status": "created"}
    # The whole list, as a merge patch must give it and as grounding computes it.
    records = [_M_FIRST, {"id": rid, "value": value}]
    return _m_call("create_record", id=rid, value=value), Scripted(
        json.dumps(result), {"records": records}
    )


def _record(records: Any, rid: str) -> Any:
    """Record ``rid`` of a collection kept as a list of records (the scenario's shape) or
    as a map by id (a model's patch may write either)."""
    if isinstance(records, dict):
        return records.get(rid)
    if isinstance(records, list):
        return next((r for r in records if isinstance(r, dict) and r.get("id") == rid), None)
    return None


def _m_mutate(op: str, rid: str, new: str | None, old: str | None) -> Any:
    if op == "delete":
        return _m_call("delete_record", id=rid)
    tool = "create_record" if op == "create" else "update_record"
    return _m_call(tool, id=rid, value=new or "")


def _m_filler(turn: int) -> tuple[Any, Scripted]:
    kind = turn % 4
    if kind == 0:
        return _m_call("ping", message=f"check-{turn}"), Scripted(
            json.dumps({"pong": f"check-{turn}"})
        )
    if kind == 3:
        return _m_call("get_record", id="R-0001"), Scripted(
            json.dumps({"id": "R-0001", "value": "first note"})
        )
    name = list(_M_SETTINGS)[kind - 1]
    return _m_call("get_setting", name=name), Scripted(
        json.dumps({"name": name, "value": _M_SETTINGS[name]})
    )


MCP_PROBES = ProbeDomain(
    name="mcp",
    scenario={
        "server_name": "records",
        "description": "A small record store: records by id, and a few server settings.",
        "tools": [
            _tool("create_record", "Create a record with this id and value.", id="", value=""),
            _tool("update_record", "Replace the value of an existing record.", id="", value=""),
            _tool("delete_record", "Delete a record.", id="record id"),
            _tool("get_record", "Fetch one record by id.", id="record id"),
            _tool("get_setting", "Read one server setting.", name="setting name"),
            _tool("ping", "Check the server is up; echoes the message.", message=""),
        ],
        "state": {
            "records": [_M_FIRST],
            "settings": [{"name": k, "value": v} for k, v in _M_SETTINGS.items()],
        },
        "output_format": "json",
    },
    instruction="Keep the team's records up to date.",
    fact=lambda rid: f"R-{rid}",
    setup=_m_setup,
    mutate=_m_mutate,
    look=lambda rid: _m_call("get_record", id=rid),
    filler=_m_filler,
    locate=lambda state, rid: _record(state.get("records"), rid),
    missing=re.compile(
        # a record reported as deleted is reported absent, as a 404 would be
        r"not[ _-]?found|\b404\b|does not exist|doesn't exist|no such|no record|\bdeleted\b|"
        r"\bremoved\b",
        re.IGNORECASE,
    ),
)


# swe: a file in the repository, written with write_file, changed with edit_file, removed
# with bash rm, read with read_file.
def _s_call(name: str, /, **arguments: str) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _s_setup(path: str, value: str) -> tuple[Any, Scripted]:
    return _s_call("write_file", path=path, content=value + "\n"), Scripted(
        f"Created {path} (1 lines)", {"files": {path: value + "\n"}}
    )


def _s_mutate(op: str, path: str, new: str | None, old: str | None) -> Any:
    if op == "create":
        return _s_call("write_file", path=path, content=f"{new}\n")
    if op == "change":
        return _s_call("edit_file", path=path, old_str=old or "", new_str=new or "")
    return _s_call("bash", command=f"rm {path}")


def _s_filler(turn: int) -> tuple[Any, Scripted]:
    kind = turn % 4
    if kind == 0:
        return _s_call("bash", command=f"echo check-{turn}"), Scripted(
            f"check-{turn}\n[exit code: 0]"
        )
    if kind == 1:
        return _s_call("bash", command="pwd"), Scripted("/workspace/repo\n[exit code: 0]")
    if kind == 2:
        return _s_call("read_file", path="README.md"), Scripted(
            "     1  # notes-demo\n     2  A tiny demo repository."
        )
    return _s_call("bash", command="git branch --show-current"), Scripted("main\n[exit code: 0]")


SWE_PROBES = ProbeDomain(
    name="swe",
    scenario={
        "repo": "acme/notes-demo",
        "language": "python",
        "runtime": "Python 3.11.9",
        "files": {
            "README.md": "# notes-demo\nA tiny demo repository.\n",
            "src/app.py": 'print("notes")\n',
            "notes/": "",
        },
    },
    instruction="Keep scratch notes in the notes/ folder while you work.",
    fact=lambda rid: f"notes/probe-{rid}.txt",
    setup=_s_setup,
    mutate=_s_mutate,
    look=lambda path: _s_call("read_file", path=path),
    filler=_s_filler,
    locate=lambda state, path: _find(state.get("files"), path),
    missing=re.compile(r"not found|no such file|does not exist", re.IGNORECASE),
)

PROBE_DOMAINS: dict[str, ProbeDomain] = {
    spec.name: spec for spec in (TERMINAL_PROBES, MCP_PROBES, SWE_PROBES)
}
