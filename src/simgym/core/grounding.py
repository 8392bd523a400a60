"""Grounding: facts come from the hidden state and from recorded experience; the world
model renders them.

Before each simulated action the environment asks its domain to *ground* the action
against the episode's hidden state ledger (:mod:`simgym.core.state`):
``domain.ground(action, state, scenario) -> Grounding | None``. A :class:`Grounding` says

* ``facts``: what the action reads, as short lines (a file's content, the working
  directory, the record a tool call fetches). They go to the world model in a
  ``**Facts:**`` block of the newest user turn, before ``**Action:**``;
* ``effects``: what the action certainly changes, as a JSON merge patch (RFC 7386) that
  simgym applies to the ledger itself after the turn (a model's ``<state_update>``
  covers only what simgym cannot know);
* ``observation``: the whole observation, when simgym can compute it exactly (``pwd``,
  ``cat`` of a known file, a record lookup). Strict mode falls back to it when the
  model's answer disagrees;
* ``expect`` / ``forbid``: text the observation must or must not contain (a listing must
  name every file; a deleted value must not come back), for strict mode's check;
* ``reshape``: for an observation the state does not decide whole, a function that
  rewrites the model's answer into the layout the state does know (a list tool's wrapper
  as the server wrote it, the fields its items show), keeping what the model said where
  the state is silent; strict mode applies it and records the model's own text.

An *experience source* (``simgym.experience``) adds the most similar recorded real
transitions as a ``**Similar recorded transitions:**`` block, the idea behind replay
buffers of real experience: the model sees how this kind of action really answered.

Modes (``SimEnv(grounding=...)``): ``"off"`` sends nothing and applies nothing;
``"facts"`` sends facts and experience and applies certain effects; ``"strict"`` also
checks each observation against the facts, asks once more with the problems named, and
then corrects it (the exact observation when there is one), recording on the turn what
it did. Earlier messages never change, so server prefix caches keep hitting; the agent
never sees facts, state or retrieved transitions.

:class:`Settler` is that stage, one per turn of :class:`simgym.SimEnv`: ``before`` grounds
the action (facts, a sandboxed run, experience, the exact answer) and ``after`` settles
the model's observation (exact, reshape, re-ask, each tried once; a broken format repaired;
then one check), both filling one typed :class:`SettleRecord` (with its
:class:`StrictRecord`), from which the turn's ``grounding`` record is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from simgym.core.execution import Run, RunResult
from simgym.core.safeload import loads_json

GroundingMode = Literal["off", "facts", "strict"]
MODES: tuple[str, ...] = ("off", "facts", "strict")
FACTS_HEADER = "**Facts:**"
EXPERIENCE_HEADER = "**Similar recorded transitions:**"
FACTS_NOTE = "(true in this world right now; the observation must agree with them)"
EXPERIENCE_NOTE = "(real answers to similar actions elsewhere; match their format, not their facts)"


@dataclass
class Grounding:
    """What the hidden state says about one action (see the module docstring)."""

    facts: list[str] = field(default_factory=list)
    effects: dict[str, Any] | None = None
    observation: str | None = None
    expect: list[str] = field(default_factory=list)
    forbid: list[str] = field(default_factory=list)
    reshape: Callable[[str], str | None] | None = None  # None: nothing to rewrite
    run: Run | None = None
    # None from settle: the run does not stand for the world (the host lacks a program)
    settle: Callable[[RunResult], Grounding | None] | None = None

    def is_empty(self) -> bool:
        return not (
            self.facts or self.effects or self.observation is not None or self.expect or self.run
        )

    def problems(self, observation: str) -> list[str]:
        """Where ``observation`` disagrees with the grounded facts (empty when it agrees)."""
        if self.observation is not None:
            if _same(observation, self.observation):
                return []
        found = []
        for text in self.expect:
            if text not in observation:
                found.append(f"the observation must show {_short(text)}")
        for text in self.forbid:
            if text and text in observation:
                found.append(f"the observation must not show {_short(text)}")
        if self.observation is not None and not found:
            found.append("the observation differs from the exact output the state determines")
        return found

    def record(self) -> dict[str, Any]:
        """The grounding as kept on a turn (``Turn.grounding``)."""
        out: dict[str, Any] = {"facts": list(self.facts)}
        if self.effects:
            out["effects"] = self.effects
        if self.observation is not None:
            out["exact"] = True
        return out


@dataclass(frozen=True)
class Experience:
    """One recorded transition: an action and the observation it really got."""

    action: str
    observation: str
    source: str = ""  # where it was recorded (file, run or log)
    score: float = 0.0  # retrieval score, higher is more similar


@runtime_checkable
class ExperienceSource(Protocol):
    """Anything that finds recorded transitions like an action (``simgym.experience``).
    Must be safe to call from many environments; it runs on the event loop's thread."""

    def similar(self, domain: str, action_text: str, *, k: int) -> Sequence[Experience]: ...


MAX_FACTS_CHARS = 4000  # a list of a thousand records must not crowd out the prompt


def facts_block(grounding: Grounding | None, max_chars: int = MAX_FACTS_CHARS) -> str | None:
    """The ``**Facts:**`` block for a user turn, or None when there is nothing to say;
    facts past ``max_chars`` are counted, not shown (the first ones come first)."""
    if grounding is None or not grounding.facts:
        return None
    lines = [f"{FACTS_HEADER} {FACTS_NOTE}"]
    used = 0
    for i, fact in enumerate(grounding.facts):
        line = fact if fact.startswith("- ") else f"- {fact}"
        if used + len(line) > max_chars and i:
            lines.append(f"- ... and {len(grounding.facts) - i} more facts of the same kind")
            break
        lines.append(line)
        used += len(line)
    return "\n".join(lines)


def experience_block(items: Sequence[Experience], max_chars: int) -> str | None:
    """The retrieved transitions as a block, best first, within ``max_chars``."""
    parts: list[str] = []
    used = 0
    for i, item in enumerate(items, 1):
        piece = (
            f"Example {i}\nAction: {item.action.strip()}\nObservation:\n{item.observation.rstrip()}"
        )
        if used + len(piece) > max_chars:
            room = max_chars - used - len("Example 1\nAction: \nObservation:\n") - 20
            if parts or room < 80:
                break
            piece = piece[: max_chars - used - 4] + " ..."
        parts.append(piece)
        used += len(piece) + 2
    if not parts:
        return None
    return f"{EXPERIENCE_HEADER} {EXPERIENCE_NOTE}\n" + "\n\n".join(parts)


def retry_note(problems: Sequence[str]) -> str:
    """The control line strict mode adds when it asks again."""
    return "Your last answer disagreed with the facts: " + "; ".join(problems) + ". Answer again."


def _same(observation: str, exact: str) -> bool:
    """Equal up to trailing blanks, or as JSON values (a pretty-printed record is right)."""
    if _normalize(observation) == _normalize(exact):
        return True
    if exact.lstrip()[:1] in ("{", "["):
        try:
            return loads_json(observation) == loads_json(exact)
        except ValueError:  # JSONDecodeError, also for a model's deep or huge output
            return False
    return False


def _normalize(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _short(text: str, limit: int = 60) -> str:
    one = text.replace("\n", "\\n")
    return repr(one if len(one) <= limit else one[: limit - 3] + "...")


# -- the settle stage: one object per environment, one typed record per turn -----------

STRICT_ACTIONS = ("accepted", "corrected", "reshaped", "reasked", "unresolved", "state")


@dataclass
class StrictRecord:
    """What strict mode did with one turn's observation (kept as ``grounding["strict"]``).

    ``action``: ``accepted`` (it agreed with the facts), ``corrected`` (replaced by the
    state's exact observation), ``reshaped`` (rewritten into the layout the state knows),
    ``reasked`` (the model, asked again, agreed), ``unresolved`` (it still disagreed:
    served and counted as a contradiction) or ``state`` (the state's answer served with
    no model call). ``first`` is the model's first text when it had ``problems``;
    ``reshaped`` the text before a rewrite; ``left`` the problems nothing resolved;
    ``repaired`` the broken text before the domain mended its format."""

    action: str
    problems: list[str] = field(default_factory=list)
    first: str | None = None
    reshaped: str | None = None
    left: list[str] | None = None
    repaired: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The record as a turn keeps it (JSON)."""
        out: dict[str, Any] = {"problems": list(self.problems)}
        if self.first is not None:
            out["first"] = self.first
        out["action"] = self.action
        if self.left is not None:
            out["left"] = list(self.left)
            out["contradiction"] = True
        if self.reshaped is not None:
            out["reshaped"] = self.reshaped
        if self.repaired is not None:
            out["repaired"] = self.repaired
        return out


@dataclass
class SettleRecord:
    """What the settle stage found and did on one turn: the grounding, the blocks the
    world model is shown, what went wrong on the way (each costs the turn that part only)
    and what strict mode did. :meth:`notes` is what the turn's ``grounding`` record adds
    to the grounding's own."""

    grounding: Grounding | None = None
    blocks: list[str] = field(default_factory=list)
    exact: str | None = None  # strict mode: the observation the state decides whole
    grounding_error: str | None = None
    execution: dict[str, Any] | None = None
    experience: list[str] | None = None
    experience_error: str | None = None
    reshape_error: str | None = None
    strict: StrictRecord | None = None

    def notes(self) -> dict[str, Any]:
        """The notes a turn keeps, in the order the stage meets them."""
        out: dict[str, Any] = {}
        for key in ("grounding_error", "execution", "experience_error", "experience"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.reshape_error is not None:
            out["reshape_error"] = self.reshape_error
        return out


@dataclass
class Settled:
    """The observation the settle stage keeps, with its model calls and format problems."""

    prediction: Any  # simgym.core.worldmodel.Prediction
    attempts: int
    problems: list[str]


Reask = Callable[[list[str]], Any]  # problems -> awaitable (Prediction | None, attempts)


class Settler:
    """The settle stage of :class:`simgym.SimEnv`: ``before(action)`` grounds the action
    (facts, a sandboxed run, retrieved experience, the exact answer); ``after(...)``
    settles the model's observation in strict mode (exact, reshape, re-ask, each tried
    once; a broken format repaired; then one check). Both fill one :class:`SettleRecord`
    per turn.

    Args:
        mode: the grounding mode.
        ground: the domain's grounding of an action on the current state (may raise).
        experience: where similar recorded transitions come from, or None.
        experience_k: how many to show.
        experience_chars: within how many characters.
        domain: the domain's name (for the experience source).
        runner: runs the commands whose inputs are all known (execution grounding).
        session: the episode's sandbox session, made on first use.
        check: the domain's format check of an observation for an action.
        repair: the domain's mending of a broken observation (None: it cannot).
    """

    def __init__(
        self,
        mode: str,
        *,
        ground: Callable[[Any], Grounding | None],
        experience: ExperienceSource | None,
        experience_k: int,
        experience_chars: int,
        domain: str,
        runner: Any,
        session: Callable[[], str],
        check: Callable[[str, Any], list[str]],
        repair: Callable[[str, Any], str | None],
    ) -> None:
        self.mode = mode
        self._ground = ground
        self.experience = experience
        self.experience_k = experience_k
        self.experience_chars = experience_chars
        self.domain = domain
        self.runner = runner
        self._session = session
        self._check = check
        self._repair = repair

    # -- before the model ----------------------------------------------------------

    async def before(self, action: Any, action_text: str, *, faulted: bool) -> SettleRecord:
        """Ground ``action`` (a faulted turn is not grounded: the fault decides), run what
        can run, and fetch experience; the record holds the blocks for the user turn."""
        record = SettleRecord()
        grounding = None if faulted else self._grounding(action, record)
        grounding = await self._execute(grounding, record)
        record.grounding = grounding
        record.blocks = self._blocks(grounding, action_text, record)
        if self.mode == "strict" and grounding is not None:
            record.exact = grounding.observation
        return record

    def _grounding(self, action: Any, record: SettleRecord) -> Grounding | None:
        if self.mode == "off" or action is None:
            return None
        try:
            grounding = self._ground(action)
        except Exception as exc:  # a grounding bug costs this turn its facts, not the episode
            record.grounding_error = f"{type(exc).__name__}: {exc}"
            return None
        return None if grounding is None or grounding.is_empty() else grounding

    async def _execute(self, grounding: Grounding | None, record: SettleRecord) -> Grounding | None:
        """Run the command the grounding asks for (execution grounding); what it did
        replaces the grounding. A run that fails leaves the grounding as it was."""
        if grounding is None or grounding.run is None or grounding.settle is None:
            return grounding
        if self.runner is None:
            return grounding
        from dataclasses import replace

        request = replace(grounding.run, session=self._session())
        try:
            result = await self.runner.run(request)
        except Exception as exc:  # a broken runner costs this turn its execution only
            result = RunResult([], -1, problem=f"{type(exc).__name__}: {exc}")
        if result.problem is not None:
            record.execution = {"ran": False, "problem": result.problem}
            return grounding
        try:
            settled = grounding.settle(result)
        except Exception as exc:
            record.execution = {"ran": False, "problem": f"{type(exc).__name__}: {exc}"}
            return grounding
        if settled is None:  # the host lacks what the scenario says the machine has
            record.execution = {
                "ran": True,
                "used": False,
                "problem": "a program the scenario has is missing here",
            }
            return grounding
        record.execution = {
            "ran": True,
            "status": result.status,
            "seconds": round(result.seconds, 4),
        }
        return settled

    def _blocks(
        self, grounding: Grounding | None, action_text: str, record: SettleRecord
    ) -> list[str]:
        blocks = [facts_block(grounding)]
        if self.mode != "off" and self.experience is not None and self.experience_k:
            try:
                found = self.experience.similar(self.domain, action_text, k=self.experience_k)
            except Exception as exc:  # a broken store costs this turn its examples only
                found = []
                record.experience_error = f"{type(exc).__name__}: {exc}"
            blocks.append(experience_block(found, self.experience_chars))
            if found:
                record.experience = [e.source or e.action[:80] for e in found]
        return [b for b in blocks if b]

    # -- after the model -----------------------------------------------------------

    async def after(
        self,
        record: SettleRecord,
        prediction: Any,
        attempts: int,
        problems: list[str],
        *,
        action: Any,
        faulted: bool,
        reask: Reask | None,
    ) -> Settled:
        """Settle the model's observation.

        Args:
            record: this turn's record (from :meth:`before`; strict mode's record goes in).
            prediction: the observation as the model (or the state, or a real world) gave it.
            attempts: model calls so far.
            problems: the format check of ``prediction``.
            action: the action (None: an invalid one, nothing to check or repair).
            faulted: the turn carries a fault (its observation is kept as asked).
            reask: asks the model once more with the problems named; None when the
                observation did not come from the model (nothing to correct).

        Returns:
            The observation kept, the model calls, and its format problems.
        """
        if reask is not None and self.mode == "strict" and record.grounding is not None:
            prediction, attempts = await self._enforce(record, prediction, attempts, reask)
            prediction = self._reshape(record, prediction)
        strict = record.strict
        known = record.exact is not None
        if known and strict is not None and strict.action in ("accepted", "corrected"):
            problems = []  # the state's own answer: the real environment's format
        elif strict is not None and (
            strict.action in ("corrected", "reasked", "unresolved") or strict.reshaped is not None
        ):
            problems = self._check(prediction.observation, action)  # of the text now kept
        if self.mode == "strict" and not faulted and action is not None and problems:
            fixed = self._mended(prediction.observation, action)
            if fixed is not None:
                broken = prediction.observation
                prediction = prediction.model_copy(update={"observation": fixed})
                problems = []  # a repair is kept only when the check finds nothing in it
                record.strict = strict or StrictRecord("accepted")
                record.strict.repaired = broken
        return Settled(prediction, attempts, problems)

    def _mended(self, observation: str, action: Any) -> str | None:
        """The domain's repair of a broken observation, if its check passes."""
        try:
            fixed = self._repair(observation, action)
        except Exception:  # a repair that fails leaves the observation as it was
            return None
        if not fixed or self._check(fixed, action):
            return None
        return fixed

    async def _enforce(
        self, record: SettleRecord, prediction: Any, attempts: int, reask: Reask
    ) -> tuple[Any, int]:
        """Check the observation against the facts. When the state determines the whole
        observation, a wrong one is corrected to it (asking again would cost a model call
        to learn what simgym already knows), and one that the domain's rewrite
        (``Grounding.reshape``) puts right is rewritten; otherwise the model is asked once
        more with the problems named, and what is left is recorded."""
        grounding = record.grounding
        assert grounding is not None
        problems = grounding.problems(prediction.observation)
        if not problems:
            record.strict = StrictRecord("accepted")
            return prediction, attempts
        strict = record.strict = StrictRecord("", problems, first=prediction.observation)
        if grounding.observation is not None:
            strict.action = "corrected"
            return prediction.model_copy(update={"observation": grounding.observation}), attempts
        if grounding.reshape is not None:
            shaped = self._shaped(record, prediction.observation)
            if shaped and not grounding.problems(shaped):
                # the rewrite resolves every problem: no second model call
                strict.action, strict.reshaped = "reshaped", prediction.observation
                return prediction.model_copy(update={"observation": shaped}), attempts
        again, more = await reask(problems)
        if again is None:  # the model answered nothing usable: the first answer stands
            again, more = prediction, 0
        attempts += more
        again = again.model_copy(update={"latency_s": prediction.latency_s + again.latency_s})
        left = grounding.problems(again.observation)
        strict.action = "reasked" if not left else "unresolved"
        if left:
            # nothing simgym knows can put it right: served as the model said it, marked
            # a contradiction on the turn and counted in the episode's metrics
            strict.left = left
        return again, attempts

    def _reshape(self, record: SettleRecord, prediction: Any) -> Any:
        """An observation the state does not decide whole is rewritten into the layout the
        state knows (``Grounding.reshape``); the model's text is recorded."""
        grounding, strict = record.grounding, record.strict
        if strict is None or grounding is None or grounding.reshape is None:
            return prediction
        if strict.action in ("corrected", "reshaped"):
            return prediction  # already the exact or the rewritten observation
        shaped = self._shaped(record, prediction.observation)
        if not shaped or shaped == prediction.observation:
            return prediction
        strict.reshaped = prediction.observation
        return prediction.model_copy(update={"observation": shaped})

    def _shaped(self, record: SettleRecord, observation: str) -> str | None:
        """``Grounding.reshape`` of ``observation``; None when it rewrites nothing."""
        assert record.grounding is not None and record.grounding.reshape is not None
        try:
            return record.grounding.reshape(observation)
        except Exception as exc:  # a domain bug costs this turn its reshaping only
            record.reshape_error = f"{type(exc).__name__}: {exc}"
            return None
