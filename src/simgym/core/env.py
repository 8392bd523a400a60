"""``SimEnv``: a gym-style environment whose observations come from a world model.

One episode is ``reset(task)`` then ``step(action)`` until ``done`` or ``truncated``. The
environment keeps the world model's message history (see :mod:`simgym.core.contract`),
validates each action before the model sees it, checks the model's output against the
domain's format and retries, and records every turn in a :class:`Trajectory`. Nothing
that goes wrong inside an episode raises: a bad action becomes an error observation, a
failed world model ends the episode with the error recorded. Only misuse (step before
reset) and bad configuration (unknown domain, invalid scenario) raise.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from simgym.core import contract
from simgym.core.domain import Domain, get_domain
from simgym.core.errors import ActionError, EpisodeStateError, ScenarioError, WorldModelError
from simgym.core.execution import CommandRunner, resolve_runner
from simgym.core.grounding import (
    MODES,
    ExperienceSource,
    Grounding,
    GroundingMode,
    Settler,
    SettleRecord,
    StrictRecord,
    retry_note,
)
from simgym.core.state import STATE_INSTRUCTIONS, PatchError, StateLedger, StateUpdate
from simgym.core.types import (
    Action,
    Observation,
    StepResult,
    Task,
    Trajectory,
    Turn,
    new_id,
)
from simgym.core.worldmodel import ActionExecutor, LiveWorld, Messages, Prediction, WorldModel

if TYPE_CHECKING:
    from simgym.core.sync import SyncEnv

RewardFn = Callable[[Trajectory, Turn], float]

# Signs that a model wrote the next turn of the conversation instead of one observation.
_RUNAWAY_MARKERS = ("### Turn ", contract.ACTION_HEADER)


class Perturbation(Protocol):
    """A fault decided for one turn (``simgym.perturb`` has the library). ``mode`` is
    ``"template"`` (simgym writes the observation, no world-model call) or ``"control"``
    (an instruction to the world model for this turn)."""

    mode: str

    def instruction(self, domain: str) -> str: ...

    def observation(
        self, domain: str, scenario: Any, action: Action, last_observation: str
    ) -> str: ...

    def record(self) -> dict[str, Any]: ...


class PerturbationPlan(Protocol):
    """Decides each turn's fault; decisions must depend only on the arguments, so that
    reruns repeat them and one plan can serve many environments at once."""

    def decide(
        self,
        *,
        domain: str,
        scenario: Any,
        turn_index: int,
        action: Action,
        history: Sequence[Turn],
        episode: int | str | None,
    ) -> Perturbation | None: ...


class SimEnv:
    """A simulated environment for one domain, driven by a world model.

    Args:
        domain: a registered domain name or a :class:`Domain`.
        world_model: a backend instance (share one across many environments).
        scenario: the default initial world; a task's own ``scenario`` overrides it.
        max_turns: steps before the episode is truncated.
        seed: base seed; episode ``k`` uses ``seed + k`` unless ``reset`` is given one.
        system_prompt: a ready system prompt (e.g. a benchmark sample's ``system_str``);
            ``system_prompt_file``: a template file replacing the domain's own.
        prompt_style: which of the domain's own templates to fill, ``"full"`` or
            ``"compact"`` (:data:`simgym.core.domain.PROMPT_STYLES`). Default: the
            backend's ``prompt_style`` (the one its adapter was trained on), else full.
        instructions: control instructions for the whole episode (in the system prompt).
        validation_retries: extra world-model calls when the output fails the domain's
            format check; the last answer is kept and its problems recorded.
        max_action_chars: actions larger than this are rejected.
        writer: anything with ``write(trajectory)``; each finished episode goes there.
        reward_fn: ``fn(trajectory, turn) -> float`` called after every step.
        perturbations: a fault plan (``simgym.perturb.Perturbations``); it is asked about
            every valid, non-final action, and the fault it picks is recorded on the turn.
        context: ``"history"`` (the Qwen-AgentWorld contract: every earlier turn is sent)
            or ``"state"`` (the hidden state plus the last ``context_turns`` turns, so the
            prompt stays bounded however long the episode runs).
        state_updates: ask the world model for a ``<state_update>`` patch after each
            observation and apply it to the hidden state ledger (default: on in ``state``
            context, off in ``history``). The ledger is kept either way and ends up in
            ``trajectory.final_state``; without updates it stays as the scenario seeded it.
        grounding: ``"off"``, ``"facts"`` or ``"strict"`` (:mod:`simgym.core.grounding`):
            facts the action reads go to the world model with the action, certain
            effects go to the ledger, and strict mode checks and corrects observations.
            Default: the backend's ``default_grounding`` (``strict`` for the embedded
            model), else ``"off"``.
        render_known: in strict mode, whether the world model still renders an observation
            that the state determines whole (``pwd``, ``cat`` of a known file, a record
            lookup). False: simgym answers it without a model call (the turn records
            ``strict.action == "state"``), which is what strict mode would keep anyway.
            Default: the backend's ``render_known``, else True (a benchmark of the model
            wants to see its answers).
        execution: how commands whose every input the state knows are run for real
            (:mod:`simgym.core.execution`): ``"sandbox"`` (default: a throwaway
            bubblewrap sandbox, where this host can make one; a one-line notice and the
            model otherwise), ``"off"``, or a runner object.
        experience: recorded real transitions to retrieve from (``simgym.experience``);
            the ``experience_k`` most similar ones, within ``experience_chars``
            characters, are shown with each action (not with ``grounding="off"``). An
            object with ``similar(domain, action_text, k=)`` (:class:`ExperienceSource`);
            open a store file first (``simgym.experience.open_store(path)``): the
            environment opens no files of its own.
    """

    def __init__(
        self,
        domain: Domain | str,
        world_model: WorldModel,
        scenario: dict[str, Any] | BaseModel | None = None,
        *,
        max_turns: int = 30,
        seed: int | None = None,
        system_prompt: str | None = None,
        system_prompt_file: str | Path | None = None,
        instructions: str | None = None,
        validation_retries: int = 1,
        max_action_chars: int = 16_000,
        max_tokens: int | None = None,
        temperature: float | None = None,
        writer: Any = None,
        reward_fn: RewardFn | None = None,
        perturbations: PerturbationPlan | None = None,
        context: Literal["history", "state"] = "history",
        context_turns: int = 4,
        state_updates: bool | None = None,
        grounding: GroundingMode | None = None,
        experience: ExperienceSource | None = None,
        experience_k: int = 3,
        experience_chars: int = 1200,
        render_known: bool | None = None,
        prompt_style: str | None = None,
        execution: str | CommandRunner | None = "sandbox",
    ) -> None:
        if context not in ("history", "state"):
            raise ValueError(f"context must be 'history' or 'state', not {context!r}")
        self.domain = get_domain(domain) if isinstance(domain, str) else domain
        self.world_model = world_model
        # what kind of backend this is, asked once: a runtime protocol check walks the
        # protocol's members each time, and a step would otherwise ask twice
        self._live = isinstance(world_model, LiveWorld)
        self._executes = isinstance(world_model, ActionExecutor)
        self.default_scenario = self.domain.scenario(scenario)
        self.max_turns = max_turns
        self.seed = seed
        self.system_prompt_override = system_prompt
        self.prompt_style = prompt_style or getattr(world_model, "prompt_style", None) or "full"
        self._template = self.domain.prompt_template(system_prompt_file, style=self.prompt_style)
        self.instructions = instructions
        self.validation_retries = validation_retries
        self.max_action_chars = max_action_chars
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.writer = writer
        self.reward_fn = reward_fn
        self.perturbations = perturbations
        self.context = context
        self.context_turns = max(0, context_turns)
        self.state_updates = (context == "state") if state_updates is None else state_updates
        mode = grounding or getattr(world_model, "default_grounding", None) or "off"
        if mode not in MODES:
            raise ValueError(f"grounding must be one of {', '.join(MODES)}, not {mode!r}")
        self.grounding: GroundingMode = mode  # type: ignore[assignment]
        default_render = getattr(world_model, "render_known", None)
        self.render_known = (
            render_known if render_known is not None else default_render is not False
        )
        self.experience = _experience_source(experience)
        self.experience_k = max(0, experience_k)
        self.experience_chars = experience_chars
        self.runner = None if self._executes else resolve_runner(execution)
        self._run_session: str | None = None  # the runner's warm sandbox of this episode
        # an environment dropped mid-episode takes its sandbox with it (no event loop
        # needed: the runner's forget is synchronous)
        self._open_runs: list[str] = []
        forget = getattr(self.runner, "forget", None)
        if forget is not None:
            weakref.finalize(self, _forget_runs, forget, self._open_runs)
        self._ledger: StateLedger | None = None
        self._episodes = itertools.count()
        self._trajectory: Trajectory | None = None
        self._scenario: BaseModel = self.default_scenario
        self._messages: Messages = []
        self._episode_seed: int | None = None
        self._finished = True
        self._started = False  # the world model's start_episode hook ran and needs ending

    # -- public API -----------------------------------------------------------------

    @property
    def trajectory(self) -> Trajectory | None:
        """The current (or last) episode's record."""
        return self._trajectory

    @property
    def messages(self) -> Messages:
        """The world model's message history so far (system prompt first)."""
        return list(self._messages)

    @property
    def scenario(self) -> BaseModel:
        return self._scenario

    @property
    def state(self) -> dict[str, Any] | None:
        """The episode's hidden state (a copy); never part of what the agent sees."""
        return None if self._ledger is None else json.loads(json.dumps(self._ledger.state))

    async def reset(
        self,
        task: Task | str | dict[str, Any] | None = None,
        *,
        scenario: dict[str, Any] | BaseModel | None = None,
        seed: int | None = None,
    ) -> Observation:
        """Start a new episode and return its first observation.

        An unfinished earlier episode is closed as truncated and written, not dropped.
        """
        self._close_episode(truncate=True, error="reset before the episode ended")
        await self._release()
        task = Task.coerce(task, self.domain.name)
        if scenario is not None:
            self._scenario = self.domain.scenario(scenario)
        elif task.scenario:
            self._scenario = self.domain.scenario(task.scenario)
        else:
            self._scenario = self.default_scenario
        episode = next(self._episodes)
        if seed is None and self.seed is not None:
            seed = self.seed + episode
        self._episode_seed = seed
        system = self.system_prompt_override or self.domain.system_prompt(
            self._scenario, template=self._template, instructions=self.instructions
        )
        try:
            self._ledger = StateLedger(
                self.domain.initial_state(self._scenario), self.domain.state_schema
            )
        except PatchError as exc:
            raise ScenarioError(f"{self.domain.name}: {exc}") from None
        if self.state_updates:
            system = f"{system.rstrip()}\n\n{STATE_INSTRUCTIONS}"
        self._messages = [{"role": "system", "content": system}]
        first_text = self.domain.initial_observation(self._scenario)
        if self._live:  # a real world: built, its first screen
            shown = await self.world_model.start_episode(self._scenario, task)
            first_text = first_text if shown is None else shown
            self._started = True
        first = Observation(text=first_text, kind="initial")
        self._trajectory = Trajectory(
            episode_id=new_id("ep-"),
            task=task,
            domain=self.domain.name,
            scenario=self._scenario.model_dump(mode="json"),
            world_model=self.world_model.describe(),
            seed=seed,
            system_prompt=system,
            initial_observation=first,
        )
        self._finished = False
        return first

    async def step(
        self, action: Action | dict[str, Any] | str | list, *, control: str | None = None
    ) -> StepResult:
        """Apply one action. ``control`` is a hidden instruction to the world model for
        this turn only (the agent never sees it; the trajectory records it)."""
        trajectory = self._require_episode()
        index = len(trajectory.turns) + 1
        try:
            parsed = self.domain.coerce_action(action, self._scenario, self.max_action_chars)
        except ActionError as exc:
            if not getattr(self._scenario, "simulate_invalid_actions", False):
                return self._finish_turn(_rejected_turn(index, action, str(exc)), None, "action")
            parsed, action_text = None, _raw_text(action)
        else:
            action_text = self.domain.render_action(parsed, self._scenario)
        result = await self._simulate(index, parsed, action_text, control)
        await self._release()
        return result

    async def _simulate(
        self, index: int, parsed: Action | None, action_text: str, control: str | None
    ) -> StepResult:
        trajectory = self._trajectory
        assert trajectory is not None
        if parsed is not None and parsed.kind == "text" and self.domain.is_final(parsed):
            return self._answer_turn(index, parsed, action_text)

        fault = self._perturbation(index, parsed)
        if fault is not None and fault.mode != "template":
            control = "\n".join(c for c in (control, fault.instruction(self.domain.name)) if c)
        settler = self._settler()
        settle = await settler.before(parsed, action_text, faulted=fault is not None)
        blocks = settle.blocks
        history_turns = (len(self._messages) - 1) // 2
        user = contract.user_message(
            history_turns + 1,
            action_text,
            instruction=trajectory.task.instruction if history_turns == 0 else None,
            control=control,
            grounding=blocks,
        )
        request = self._request(user, history_turns, action_text, control, blocks)
        record = fault.record() if fault is not None else None
        if fault is not None and fault.mode == "template" and parsed is not None:
            return self._templated_turn(index, parsed, action_text, user, control, fault)
        known = settle.exact is not None
        reask = None
        try:
            if self._executes:
                # a real world runs the action itself: no prompt to parse, no second try
                prediction = await self.world_model.run_turn(action_text)
                attempts, problems = 1, self._check(prediction, parsed)
                if not prediction.observation.strip():
                    raise _NoObservation("the real environment returned no observation")
            elif known and not self.render_known:
                assert settle.exact is not None
                prediction = Prediction(observation=settle.exact, model="state")
                attempts, problems = 0, []
                settle.strict = StrictRecord("state")
            else:
                # When strict mode knows the whole answer, a format retry would only
                # re-roll what the correction replaces anyway, and an empty answer is no
                # error: it is corrected like any other wrong one.
                prediction, attempts, problems = await self._predict(
                    request,
                    parsed,
                    self._last_observation(),
                    tries=1 if known else None,
                    allow_empty=bool(known),
                )
                reask = self._reasker(request, parsed)
            settled = await settler.after(
                settle,
                prediction,
                attempts,
                problems,
                action=parsed,
                faulted=fault is not None,
                reask=reask,
            )
            prediction, attempts, problems = settled.prediction, settled.attempts, settled.problems
        except WorldModelError as exc:
            turn = Turn(
                index=index,
                action=parsed,
                action_text=action_text,
                control=control,
                observation=_error_observation(str(exc)),
                error=str(exc),
                in_history=False,
                perturbation=record,
            )
            # A model that answered, but with nothing usable, may do better next turn; a
            # model that cannot be reached ends the episode.
            kind = "empty_output" if isinstance(exc, _NoObservation) else "world_model"
            return self._finish_turn(turn, parsed, kind)

        observation = Observation(text=prediction.observation, metadata=dict(prediction.metadata))
        self._messages.append(user)
        self._messages.append(contract.assistant_message(prediction.observation))
        update, grounded = self._commit(prediction, parsed, settle)
        turn = Turn(
            index=index,
            action=parsed,
            action_text=action_text,
            observation=observation,
            reasoning=prediction.reasoning,
            raw=prediction.raw,
            latency_s=prediction.latency_s,
            usage=prediction.usage,
            attempts=attempts,
            format_problems=problems,
            control=control,
            perturbation=record,
            state_patch=update.patch if update else None,
            state_error=update.error if update else None,
            grounding=grounded,
        )
        return self._finish_turn(turn, parsed, None)

    def _request(
        self,
        user: dict[str, str],
        history_turns: int,
        action_text: str,
        control: str | None,
        blocks: list[str] | None = None,
    ) -> Messages:
        """The messages sent for this turn. History mode: all of them. State mode: the
        system prompt, the recent turns, and the action with the current state, so the
        prompt does not grow with the episode.

        The window holds between k and 2k - 1 turns (k = ``context_turns``) and moves k
        turns at a time: consecutive requests then share everything up to the newest
        turn as a prefix, which server prefix caches reuse, where a window sliding by one
        turn would change right after the system prompt on every request."""
        if self.context == "history":
            return [*self._messages, user]
        assert self._ledger is not None and self._trajectory is not None
        k = self.context_turns
        start = ((history_turns - k) // k) * k if k and history_turns >= k else 0
        recent = self._messages[1 + 2 * start :] if k else []
        stated = contract.user_message(
            history_turns + 1,
            action_text,
            instruction=self._trajectory.task.instruction,
            control=control,
            state=self._ledger.render(),
            grounding=blocks or (),
        )
        return [self._messages[0], *recent, stated]

    # -- grounding (see simgym.core.grounding) ----------------------------------------

    def _settler(self) -> Settler:
        """This turn's settle stage (:class:`simgym.core.grounding.Settler`), over the
        environment's settings as they are now."""
        return Settler(
            self.grounding,
            ground=self._domain_ground,
            experience=self.experience,
            experience_k=self.experience_k,
            experience_chars=self.experience_chars,
            domain=self.domain.name,
            runner=self.runner,
            session=self._session,
            check=lambda text, action: self._check(Prediction(observation=text), action),
            repair=lambda text, action: self.domain.repair(text, action, self._scenario),
        )

    def _domain_ground(self, action: Action) -> Grounding | None:
        """The domain's grounding of ``action`` on the current state (the settle stage
        records what it raises)."""
        if self._ledger is None:
            return None
        return self.domain.ground(action, self._ledger.state, self._scenario)

    def _session(self) -> str:
        """The episode's sandbox session for execution grounding, made on first use."""
        if self._run_session is None:
            self._run_session = new_id("run-")
            self._open_runs.append(self._run_session)
        return self._run_session

    def _reasker(self, request: Messages, action: Action | None) -> Callable[..., Any]:
        """Strict mode's second ask: the same request with the problems named."""

        async def reask(problems: list[str]) -> tuple[Prediction | None, int]:
            retry = [*request[:-1], _with_control(request[-1], retry_note(problems))]
            try:
                again, more, _ = await self._predict(
                    retry, action, self._last_observation(), tries=1
                )
            except _NoObservation:
                return None, 0
            return again, more

        return reask

    def _commit(
        self, prediction: Prediction, action: Action | None, settle: SettleRecord
    ) -> tuple[StateUpdate | None, dict[str, Any] | None]:
        """The turn's changes to the hidden state, written once: the model's own update,
        the certain effects, and what the observation showed are staged on a copy of the
        ledger in that order, and the episode's ledger takes the result in one write.
        Returns the model update's outcome and the turn's grounding record."""
        ledger = self._ledger
        if ledger is None:
            record = self._grounding_record(settle)
            return None, self._observe(prediction.observation, action, record)
        staged = copy.copy(ledger)  # apply and update build new states: the ledger keeps its own
        self._ledger = staged
        try:
            update = self._apply_update(prediction)
            record = self._grounding_record(settle)
            record = self._observe(prediction.observation, action, record)
        finally:
            self._ledger = ledger
        ledger.state = staged.state  # the turn's one write
        return update, record

    def _grounding_record(self, settle: SettleRecord) -> dict[str, Any] | None:
        """Apply certain effects to the (staged) ledger and say on the turn what grounding
        did."""
        grounding = settle.grounding
        record = grounding.record() if grounding is not None else {}
        if grounding is not None and grounding.effects and self._ledger is not None:
            applied = self._ledger.apply(grounding.effects)
            if not applied.applied:
                record["effects_error"] = applied.error
        record.update(settle.notes())
        if settle.strict is not None:
            record["strict"] = settle.strict.as_dict()
        return record or None

    def _observe(
        self, observation: str, action: Action | None, record: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Let the domain record what the observation showed (a GUI's new screen is the
        observation itself, known only after the turn)."""
        if self.grounding == "off" or action is None or self._ledger is None:
            return record
        try:
            patch = self.domain.observe(observation, action, self._ledger.state)
        except Exception as exc:  # a domain bug costs the ledger this update only
            return {**(record or {}), "observe_error": f"{type(exc).__name__}: {exc}"}
        if not patch:
            return record
        applied = self._ledger.apply(patch)
        note = {"observed": sorted(patch)} if applied.applied else {"observe_error": applied.error}
        return {**(record or {}), **note}

    def _apply_update(self, prediction: Prediction) -> StateUpdate | None:
        if not self.state_updates or self._ledger is None:
            return None
        return self._ledger.update(prediction.state_update)

    async def finish(self, answer: str) -> StepResult:
        """End the episode with the agent's final answer, in any domain (a terminal agent
        has no "answer" keystroke). Nothing is simulated; the answer is recorded as the
        last turn and on the trajectory, for rewards to check."""
        trajectory = self._require_episode()
        result = self._answer_turn(len(trajectory.turns) + 1, Action.say(answer), answer)
        await self._release()
        return result

    def reject(self, raw: Any, message: str) -> StepResult:
        """Record an action that failed before it reached this environment (an adapter's
        own parser refused it) the way an invalid action is recorded: an error
        observation, counted toward ``max_turns``, kept in the trajectory."""
        trajectory = self._require_episode()
        turn = _rejected_turn(len(trajectory.turns) + 1, raw, message)
        return self._finish_turn(turn, None, "action")

    async def close(
        self, reason: str | None = "environment closed before the episode ended"
    ) -> None:
        """Write an unfinished episode as truncated, with ``reason`` as its error (``None``
        when stopping early is expected, as when a script runs out of actions). The shared
        world model stays open."""
        self._close_episode(truncate=True, error=reason)
        await self._release()

    def sync(self) -> SyncEnv:
        """A blocking view of this environment (one background event loop for all)."""
        from simgym.core.sync import SyncEnv

        return SyncEnv(self)

    # -- internals ------------------------------------------------------------------

    async def _release(self) -> None:
        """Let a real executor tear its world down once the episode is over."""
        if self._finished and self._run_session is not None and self.runner is not None:
            session, self._run_session = self._run_session, None
            self._open_runs.remove(session)
            await self.runner.close(session)
        if self._started and self._finished:
            self._started = False
            if self._live:
                await self.world_model.end_episode()

    def _perturbation(self, index: int, action: Action | None) -> Perturbation | None:
        """This turn's fault, if the plan picks one. Invalid and final actions are left
        alone: the first never reach the world, the second end the episode."""
        trajectory = self._trajectory
        if self.perturbations is None or action is None or trajectory is None:
            return None
        if self.domain.is_final(action):
            return None
        return self.perturbations.decide(
            domain=self.domain.name,
            scenario=self._scenario,
            turn_index=index,
            action=action,
            history=trajectory.turns,
            episode=trajectory.task.id if self._episode_seed is None else self._episode_seed,
        )

    def _templated_turn(
        self,
        index: int,
        action: Action,
        action_text: str,
        user: dict[str, str],
        control: str | None,
        fault: Perturbation,
    ) -> StepResult:
        """A turn whose observation simgym writes itself. It joins the history like any
        other, so the world model knows in later turns that it happened."""
        text = fault.observation(self.domain.name, self._scenario, action, self._last_observation())
        self._messages += [user, contract.assistant_message(text)]
        grounded = self._observe(text, action, None)
        turn = Turn(
            index=index,
            action=action,
            action_text=action_text,
            observation=Observation(text=text),
            control=control,
            perturbation=fault.record(),
            grounding=grounded,
        )
        return self._finish_turn(turn, action, None)

    def _require_episode(self) -> Trajectory:
        if self._trajectory is None:
            raise EpisodeStateError("call reset() before step()")
        if self._finished:
            raise EpisodeStateError("the episode has ended; call reset() to start another")
        return self._trajectory

    def _last_observation(self) -> str:
        assert self._trajectory is not None
        for turn in reversed(self._trajectory.turns):
            if turn.in_history:
                return turn.observation.text
        first = self._trajectory.initial_observation
        return first.text if first else ""

    async def _predict(
        self,
        messages: Messages,
        action: Action | None,
        last_observation: str,
        tries: int | None = None,
        allow_empty: bool = False,
    ) -> tuple[Prediction, int, list[str]]:
        prefix = (
            self.domain.observation_prefix(action, self._scenario, last_observation)
            if action is not None
            else ""
        )
        prediction: Prediction | None = None
        problems: list[str] = []
        attempts = 0
        for attempt in range(self.validation_retries + 1 if tries is None else tries):
            attempts = attempt + 1
            seed = None if self._episode_seed is None else self._episode_seed * 1000 + attempt
            prediction = await self.world_model.predict(
                messages,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=seed,
                prefix=prefix or None,
            )
            problems = self._check(prediction, action)
            if not problems:
                break
        assert prediction is not None
        if not prediction.observation.strip() and not allow_empty:
            raise _NoObservation(f"world model returned no observation in {attempts} attempt(s)")
        return prediction, attempts, problems

    def _check(self, prediction: Prediction, action: Action | None) -> list[str]:
        text = prediction.observation
        if not text.strip():
            return ["empty observation"]
        problems = []
        if action is not None:  # an invalid action's output has no format to check
            problems = list(self.domain.check_observation(text, action, self._scenario))
        if any(marker in text for marker in _RUNAWAY_MARKERS):
            problems.append("the world model wrote further conversation turns")
        return problems

    def _answer_turn(self, index: int, action: Action, action_text: str) -> StepResult:
        assert self._trajectory is not None
        self._trajectory.answer = action.text or ""
        turn = Turn(
            index=index,
            action=action,
            action_text=action_text,
            observation=Observation(text="", metadata={"final_answer": True}),
            in_history=False,
        )
        return self._finish_turn(turn, action, None, final=True)

    def _finish_turn(
        self, turn: Turn, action: Action | None, error_type: str | None, *, final: bool = False
    ) -> StepResult:
        trajectory = self._trajectory
        assert trajectory is not None
        turn.error_type = error_type  # type: ignore[assignment]
        trajectory.turns.append(turn)
        if self.reward_fn is not None:
            turn.reward = float(self.reward_fn(trajectory, turn))
        trajectory.total_reward += turn.reward
        done = final or (action is not None and error_type is None and self.domain.is_final(action))
        truncated = not done and (error_type == "world_model" or turn.index >= self.max_turns)
        info: dict[str, Any] = {
            "episode_id": trajectory.episode_id,
            "turn": turn.index,
            "latency_s": turn.latency_s,
            "attempts": turn.attempts,
        }
        if turn.error:
            info["error"] = turn.error
            info["error_type"] = error_type
        if turn.format_problems:
            info["format_problems"] = turn.format_problems
        if error_type == "world_model":
            trajectory.error = turn.error
        if done or truncated:
            trajectory.done, trajectory.truncated = done, truncated
            self._close_episode()
        return StepResult(
            observation=turn.observation,
            reward=turn.reward,
            done=done,
            truncated=truncated,
            info=info,
        )

    def _close_episode(self, *, truncate: bool = False, error: str | None = None) -> None:
        trajectory = self._trajectory
        if trajectory is None or self._finished:
            return
        if truncate:
            trajectory.truncated = True
            trajectory.error = trajectory.error or error
        trajectory.finished_at = time.time()
        trajectory.world_model = self.world_model.describe()  # settings resolved by now
        trajectory.metrics = _metrics(trajectory)
        live = getattr(self.world_model, "live_state", None)
        state = live() if callable(live) else None
        if state is not None:
            # a real world: what it holds now, not the ledger simgym kept beside it
            trajectory.final_state = state
            trajectory.metrics["state_source"] = "live"
        elif self._ledger is not None:
            trajectory.final_state = self._ledger.state
        self._finished = True
        if self.writer is not None:
            self.writer.write(trajectory)


def _experience_source(source: object) -> ExperienceSource | None:
    """The experience source, checked: a path is refused with the call that opens it (core
    imports nothing above it, so the caller, such as the command line, opens the store)."""
    if source is None or isinstance(source, ExperienceSource):
        return source
    if isinstance(source, (str, Path)):
        raise TypeError(
            f"experience takes a store object, not the path {str(source)!r}: open it with "
            "simgym.experience.open_store(path, readonly=True)"
        )
    raise TypeError(
        "experience takes an object with similar(domain, action_text, k=), "
        f"not {type(source).__name__}"
    )


def _with_control(message: dict[str, str], note: str) -> dict[str, str]:
    """``message`` (a user turn) with one more control line just before its action."""
    content = message["content"]
    head, sep, tail = content.rpartition(contract.ACTION_HEADER)
    if not sep:
        return {**message, "content": f"{content}\n\n**Control instruction:** {note}"}
    return {**message, "content": f"{head}**Control instruction:** {note}\n\n{sep}{tail}"}


class _NoObservation(WorldModelError):
    """The world model answered, but every attempt was empty after parsing."""


def _error_observation(message: str) -> Observation:
    return Observation(text=f"[simgym error] {message}", kind="error", error=message)


def _raw_text(raw: Any) -> str:
    """An action that failed validation, as text for the world model or the record."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Action):
        return raw.model_dump_json(exclude_defaults=True)
    try:
        return json.dumps(raw, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(raw)


def _rejected_turn(index: int, raw: Any, message: str) -> Turn:
    preview = _raw_text(raw)
    return Turn(
        index=index,
        action=raw if isinstance(raw, Action) else None,
        action_text=preview[:2000],
        observation=_error_observation(message),
        error=message,
        in_history=False,
    )


def _metrics(trajectory: Trajectory) -> dict[str, Any]:
    turns = trajectory.turns
    return {
        "turns": len(turns),
        "errors": sum(1 for t in turns if t.error),
        "format_problems": sum(1 for t in turns if t.format_problems),
        "perturbed": sum(1 for t in turns if t.perturbation),
        "prompt_tokens": sum(t.usage.prompt_tokens for t in turns),
        "completion_tokens": sum(t.usage.completion_tokens for t in turns),
        "latency_s": round(sum(t.latency_s for t in turns), 6),
        # how each observation came about (grounding): exact from the state, run for
        # real, rendered by the model; and model answers that still contradict the
        # state's facts after strict mode asked again (served, and counted here)
        "from_state": sum(1 for t in turns if _strict(t) == "state"),
        "executed": sum(
            1
            for t in turns
            if (t.grounding or {}).get("execution", {}).get("ran")
            and (t.grounding or {}).get("execution", {}).get("used", True)
        ),
        "contradictions": sum(1 for t in turns if _strict(t) == "unresolved"),
    }


def _forget_runs(forget: Callable[[str], None], sessions: list[str]) -> None:
    for session in sessions:
        forget(session)
    sessions.clear()


def _strict(turn: Turn) -> str | None:
    strict = (turn.grounding or {}).get("strict")
    return strict.get("action") if isinstance(strict, dict) else None
