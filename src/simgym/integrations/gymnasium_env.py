"""A simulated environment as a Gymnasium text environment.

:class:`SimgymTextEnv` puts one :class:`SimEnv` behind ``gymnasium.Env``: observations and
actions are strings, ``step`` returns the 5-tuple ``(observation, reward, terminated,
truncated, info)`` and ``reset(seed=None, options=None)`` returns ``(observation, info)``::

    env = SimgymTextEnv("mcp", world_model="local", task="Update Ben's email",
                        reward="exact")
    obs, info = env.reset(seed=0)             # info: instruction, tools, task id
    obs, reward, terminated, truncated, info = env.step('get_customer customer_id=C-1002')

or, after :func:`register_envs`, ``gymnasium.make("simgym/MCP-v0", world_model=...)``.

An action is a string: JSON (a tool call ``{"name", "arguments"}``, terminal keystrokes
``[{"keystrokes", "duration"}]``, or ``{"answer": "..."}``, which ends the episode with the
agent's answer in any domain), or the domain's short form as ``simgym play`` reads it (a
command line for terminal, ``tool {"json": ...}``, ``tool key=value`` or ``answer TEXT`` for
mcp). A dict in the same shapes works too. An action that does not parse or does not fit the
world is not an exception: it comes back as an error observation (``info["error"]``) and
counts as a turn, as it would for a real environment.

``terminated`` is the episode ending on its own (an answer, a final action); ``truncated``
is the turn limit (``max_turns``) or a failed world model. When the episode ends, the
optional ``reward`` (a :mod:`simgym.rewards` reward or spec) scores it; its value is added
to that step's reward and ``info["reward_parts"]`` holds its parts. Each finished episode
is then written to ``writer``; one left running is written, truncated, at the next reset
or at ``close()``. ``env.trajectory`` is the episode's full record.

Tasks: one task or a list (``task=``), or ``options={"task": ...}`` /
``options={"task_id": ...}`` at reset. With several tasks and no option, the reset's seed
picks one (through ``np_random``), so a seeded reset is reproducible.

Spaces: both are :class:`gymnasium.spaces.Text` over :data:`TEXT_CHARSET` (printable ASCII,
tab and newline, and the Latin, punctuation, arrow and box-drawing characters that terminal
screens and documents use). A world model may still write a character outside that set, or
more than ``max_observation_length`` characters; the observation is never altered, and
``info["outside_observation_space"]`` says so when it happens.

Needs ``gymnasium`` (``pip install 'simgym[gym]'``).
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import Domain, domain_names, get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import ActionError, SimgymError
from simgym.core.safeload import loads_json
from simgym.core.sync import run_sync
from simgym.core.types import Action, StepResult, Task, Trajectory
from simgym.core.worldmodel import WorldModel, create_world_model
from simgym.integrations.common import as_tasks, pick_task
from simgym.rewards import build_reward
from simgym.rollout.episode import conclude_episode

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as exc:  # pragma: no cover (the gym extra is installed in development)
    raise SimgymError(
        f"the Gymnasium wrapper needs gymnasium: pip install 'simgym[gym]' ({exc})"
    ) from None


def _charset() -> str:
    ranges = [
        (0x20, 0x7E),  # printable ASCII
        (0xA0, 0x17F),  # Latin-1 supplement, Latin Extended-A
        (0x2010, 0x205E),  # general punctuation: dashes, quotes, ellipsis, bullets
        (0x20A0, 0x20BF),  # currency signs
        (0x2190, 0x21FF),  # arrows
        (0x2500, 0x25FF),  # box drawing, block elements, geometric shapes
        (0x2713, 0x2718),  # check marks and crosses
    ]
    chars = [chr(c) for lo, hi in ranges for c in range(lo, hi + 1) if chr(c).isprintable()]
    return "\t\n" + "".join(chars) + "\ufffd"


TEXT_CHARSET: str = _charset()
"""The characters both spaces are declared over."""

TASK_OPTIONS = frozenset({"task", "task_id"})

_ENV_OPTIONS = frozenset(inspect.signature(SimEnv.__init__).parameters) - {
    "self",
    "domain",
    "world_model",
    "scenario",
    "writer",  # episodes are written here, after they are scored
}

# Gymnasium ids: simgym/<Name>-v0
_ID_NAMES = {"mcp": "MCP", "swe": "SWE", "os": "OS"}


class SimgymTextEnv(gymnasium.Env[str, str]):
    """A simulated environment with string observations and actions (see the module
    docstring).

    Args:
        domain: a registered domain name or a :class:`Domain`.
        world_model: a backend instance (share one across many environments) or a backend
            name (``local``, ``openai``, ``replay``); one built here is closed by ``close()``.
        scenario: the initial world (a task's own scenario replaces it for that task).
        task: a task (an instruction, a :class:`Task` or its dict) or a list of them.
        reward: a :mod:`simgym.rewards` reward or spec, scored when an episode ends.
        writer: anything with ``write(trajectory)``; every episode goes there.
        render_mode: ``"ansi"`` (``render()`` returns the last observation) or ``None``.
        max_action_length, max_observation_length: the spaces' length bounds.
        options: :class:`SimEnv` options (``max_turns``, ``seed``, ``instructions``, ...)
            and, for a named backend, its options (``base_url``, ``model``, ...).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        domain: Domain | str = "terminal",
        world_model: WorldModel | str = "local",
        *,
        scenario: dict[str, Any] | BaseModel | None = None,
        task: Any = None,
        reward: Any = None,
        writer: Any = None,
        render_mode: str | None = None,
        max_action_length: int = 4096,
        max_observation_length: int = 65536,
        **options: Any,
    ) -> None:
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise SimgymError(f"render_mode must be 'ansi' or None, not {render_mode!r}")
        self.render_mode = render_mode
        resolved = get_domain(domain) if isinstance(domain, str) else domain
        env_options = {k: v for k, v in options.items() if k in _ENV_OPTIONS}
        backend_options = {k: v for k, v in options.items() if k not in _ENV_OPTIONS}
        self.tasks = as_tasks(task, resolved.name)
        self.reward = None if reward is None else build_reward(reward)
        self.writer = writer
        self._owns_backend = isinstance(world_model, str)
        self.world_model = create_world_model(world_model, **backend_options)
        try:
            self.sim = SimEnv(resolved, self.world_model, scenario, **env_options)
        except BaseException:
            self._close_backend()
            raise
        self.action_space = spaces.Text(max_action_length, min_length=1, charset=TEXT_CHARSET)
        self.observation_space = spaces.Text(
            max_observation_length, min_length=0, charset=TEXT_CHARSET
        )
        self._concluded = True  # no episode yet
        self._closed = False
        self._last = ""

    @property
    def domain(self) -> Domain:
        return self.sim.domain

    @property
    def trajectory(self) -> Trajectory | None:
        """The current (or last) episode's record."""
        return self.sim.trajectory

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - TASK_OPTIONS)
        if unknown:
            raise SimgymError(
                f"unknown reset option(s): {', '.join(unknown)}; reset takes task and task_id"
            )
        task = self._pick(options.get("task"), options.get("task_id"))
        self._conclude("reset before the episode ended")
        first = run_sync(self.sim.reset(task, seed=seed))
        trajectory = self.sim.trajectory
        assert trajectory is not None
        trajectory.agent = {"name": "gymnasium"}
        self._concluded = False
        self._last = first.text
        info: dict[str, Any] = {
            "episode_id": trajectory.episode_id,
            "task_id": task.id,
            "instruction": task.instruction,
            "domain": self.domain.name,
            "tools": [t.to_openai() for t in self.domain.agent_tools(self.sim.scenario)],
            "action_hint": self.domain.action_hint_for(self.sim.scenario),
        }
        self._flag_space(first.text, info)
        return first.text, info

    def step(self, action: str | dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.sim.trajectory is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        if self._concluded:
            raise gymnasium.error.ResetNeeded("the episode has ended; call reset()")
        result = self._apply(action)
        reward = float(result.reward)
        # Only what a rerun reproduces: Gymnasium checks that a seeded step repeats its
        # info exactly (the episode id is in reset's info, latencies in the trajectory).
        info: dict[str, Any] = {"turn": result.info["turn"], "attempts": result.info["attempts"]}
        for key in ("error", "error_type", "format_problems"):
            if key in result.info:
                info[key] = result.info[key]
        if result.done or result.truncated:
            score = self._conclude(None)
            if score is not None:
                reward += score
                info["reward_parts"] = dict(self.sim.trajectory.reward_parts)
        text = result.observation.text
        self._last = text
        self._flag_space(text, info)
        return text, reward, result.done, result.truncated, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Write a running episode (as truncated) and close a backend built here."""
        if self._closed:
            return
        self._closed = True
        self._conclude("environment closed before the episode ended")
        self._close_backend()

    # -- internals ----------------------------------------------------------------------

    def _pick(self, task: Any, task_id: str | None) -> Task:
        # several served tasks: np_random picks, so a seeded reset is reproducible
        return pick_task(
            self.tasks, self.domain.name, task, task_id, lambda n: int(self.np_random.integers(n))
        )

    def _apply(self, action: str | dict[str, Any]) -> StepResult:
        try:
            read = _read_action(self.domain, self.sim.scenario, action)
        except ActionError as exc:
            return self.sim.reject(_as_text(action), str(exc))
        if isinstance(read, _Answer):
            return run_sync(self.sim.finish(read.text))
        return run_sync(self.sim.step(read))

    def _conclude(self, reason: str | None) -> float | None:
        """End the episode (as truncated with ``reason`` if it is running), score it and
        write it, once; the reward's value, or ``None`` without a reward."""
        trajectory = self.sim.trajectory
        if self._concluded or trajectory is None:
            return None
        self._concluded = True
        result = run_sync(
            conclude_episode(self.sim, reward=self.reward, writer=self.writer, reason=reason)
        )
        return None if result is None else result.value

    def _flag_space(self, text: str, info: dict[str, Any]) -> None:
        if not self.observation_space.contains(text):
            info["outside_observation_space"] = True

    def _close_backend(self) -> None:
        if self._owns_backend:
            self._owns_backend = False
            run_sync(self.world_model.aclose())


def register_envs() -> list[str]:
    """Register ``simgym/<Domain>-v0`` with Gymnasium for every registered domain (e.g.
    ``simgym/Terminal-v0``, ``simgym/MCP-v0``); returns the ids. Safe to call twice."""
    ids = []
    for name in domain_names():
        env_id = f"simgym/{_ID_NAMES.get(name, name.title())}-v0"
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point=f"{__name__}:SimgymTextEnv",
                kwargs={"domain": name},
            )
        ids.append(env_id)
    return ids


# -- helpers ------------------------------------------------------------------------------


class _Answer:
    def __init__(self, text: str) -> None:
        self.text = text


def _read_action(domain: Domain, scenario: BaseModel, action: Any) -> _Answer | Action | Any:
    """What to do with an agent's action: answer, or step with it (JSON and dicts go to
    SimEnv as they are; it reports their problems). Raises :class:`ActionError`."""
    if isinstance(action, str):
        stripped = action.strip()
        if stripped[:1] not in ("{", "["):
            try:
                return domain.parse_input(action, scenario)
            except ValueError as exc:  # ActionError, and shlex's unclosed quotes
                raise ActionError(str(exc)) from None
        try:
            value = loads_json(stripped)  # an agent's deep or huge JSON: not an exception
        except json.JSONDecodeError:
            return action  # SimEnv says what is wrong with it
        return _answer(value) or action
    if isinstance(action, dict):
        return _answer(action) or action
    if isinstance(action, Action):
        return action
    raise ActionError(f"an action is a string or a dict, not {type(action).__name__}")


def _answer(value: Any) -> _Answer | None:
    if not isinstance(value, dict) or "answer" not in value:
        return None
    if set(value) != {"answer"} or not isinstance(value["answer"], str):
        raise ActionError('an answer is {"answer": "..."} (a string) and nothing else')
    return _Answer(value["answer"])


def _as_text(action: Any) -> str:
    if isinstance(action, str):
        return action
    try:
        return json.dumps(action, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(action)
