"""Conformance checks a domain or a backend runs against simgym's contract, the way
Gymnasium's ``check_env`` does for an environment: :func:`check_domain` and
:func:`check_backend`. A plugin's own tests call them (``simgym.check_domain("mydomain")``);
simgym's tests call them on every built-in.

Each check collects every problem it finds and raises one :class:`ConformanceError`
that lists them all, each saying what is missing and where, so a plugin author fixes
them in one pass.
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema

from simgym.core.domain import FAMILIES, PROMPT_STYLES, Domain, ScenarioBase, get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import ConformanceError, SimgymError
from simgym.core.sync import run_sync
from simgym.core.types import Observation, ToolSpec
from simgym.core.worldmodel import Prediction, WorldModel, backend_factory

# What a prompt template must hold: the tag the answer is parsed from, and the slots
# simgym fills on every domain (a compact prompt, for a small trained model, may leave
# the demonstrations out: every prompt token costs time before the first answer token).
_PROMPT_MUSTS = {
    "full": ("<predicted_observation>", "$control", "$demonstrations"),
    "compact": ("<predicted_observation>", "$control"),
}
MIN_DEMONSTRATIONS = 2


class _Echo:
    """A world model that answers every turn with one fixed observation (a domain's first
    demonstration), so an episode can run with no model at all."""

    name = "conformance"

    def __init__(self, observation: str) -> None:
        self.observation = observation or "ok"

    async def predict(self, messages: Any, **options: Any) -> Prediction:
        text = f"<predicted_observation>\n{self.observation}\n</predicted_observation>"
        return Prediction.from_raw(text, model=self.name)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    async def aclose(self) -> None:
        return None


def check_domain(domain: str | Domain, *, actions: Sequence[str] = ()) -> Domain:
    """Check that a domain keeps simgym's contract: a description and action hint, a
    known family, a scenario model built on :class:`~simgym.ScenarioBase` whose default
    scenario validates (strictly), prompt templates (full and compact) that hold
    ``<predicted_observation>``, ``$control`` and ``$demonstrations`` and whose slots the
    scenario fills, at least two demonstrations, a non-empty first observation, an
    initial state that is JSON and fits ``state_schema``, agent tools as ``ToolSpec``
    s; then an episode resets and, for each of ``actions``, steps without error (the
    world model's part played by a stub that repeats the first demonstration).

    Args:
        domain: a registered name (built-in, or an installed plugin's entry point) or a
            :class:`~simgym.Domain` object.
        actions: lines as a person types them in ``simgym play``, each parsed with the
            domain's ``parse_input`` and stepped, grounding on (``facts``).

    Returns:
        The domain, when it conforms.

    Raises:
        ConformanceError: listing every problem found.
        UnknownDomainError: no domain has that name.
        PluginError: the plugin that declares it failed to load.
    """
    dom = get_domain(domain) if isinstance(domain, str) else domain
    if not isinstance(dom, Domain):
        raise ConformanceError(f"{domain!r} is a {type(dom).__name__}, not a simgym.Domain")
    problems: list[str] = []
    if isinstance(domain, str) and dom.name != domain:
        problems.append(f"registered as {domain!r} but named {dom.name!r}")
    if not dom.description.strip():
        problems.append("description is empty: say in one line what the environment is")
    if not dom.action_hint.strip():
        problems.append("action_hint is empty: show how an action looks")
    if dom.family not in ("", *FAMILIES):
        problems.append(f"family {dom.family!r} is not one of {', '.join(FAMILIES)} (or '')")
    if not (isinstance(dom.scenario_model, type) and issubclass(dom.scenario_model, ScenarioBase)):
        problems.append("scenario_model must be a subclass of simgym.ScenarioBase")
        raise _failed(dom, problems)
    if len(dom.demonstrations) < MIN_DEMONSTRATIONS:
        problems.append(
            f"{len(dom.demonstrations)} demonstration(s); at least {MIN_DEMONSTRATIONS} "
            "worked turns (action and observation) are needed, a small model copies them"
        )
    try:
        scenario = dom.scenario(dom.default_scenario(), strict=True)
    except SimgymError as exc:
        problems.append(f"the default scenario does not validate: {exc}")
        raise _failed(dom, problems) from None
    problems += _prompt_problems(dom, scenario)
    problems += _call_problems(dom, scenario)
    if not problems:
        problems += _episode_problems(dom, scenario, actions)
    if problems:
        raise _failed(dom, problems)
    return dom


def _failed(dom: Domain, problems: list[str]) -> ConformanceError:
    listed = "\n".join(f"  - {p}" for p in problems)
    return ConformanceError(f"domain {dom.name!r} does not conform:\n{listed}")


def _prompt_problems(dom: Domain, scenario: Any) -> list[str]:
    problems = []
    if not Path(dom.prompt_file).is_file():
        return [f"prompt_file {str(dom.prompt_file)!r} does not exist"]
    for style in PROMPT_STYLES:
        where = dom.prompt_file if style == "full" else "the compact prompt"
        template = dom.prompt_template(style=style)
        if style != "full" and template == dom.prompt_template():
            continue  # no prompt of this style: the full one stands in, checked above
        missing = [m for m in _PROMPT_MUSTS[style] if m not in template]
        if missing:
            problems.append(f"{where} lacks {', '.join(missing)}")
        prompt = dom.system_prompt(scenario, style=style)
        unfilled = [s for s in string.Template(template).get_identifiers() if f"${s}" in prompt]
        if unfilled:
            problems.append(
                f"{where}: slots the default scenario leaves unfilled: {', '.join(unfilled)} "
                "(prompt_slots must return them)"
            )
    return problems


def _call_problems(dom: Domain, scenario: Any) -> list[str]:
    """The domain's functions on its default scenario: each must answer, with the type
    the contract says."""
    problems = []
    first = _call(problems, "initial_observation", dom.initial_observation, scenario)
    if first is not None and (not isinstance(first, str) or not first.strip()):
        problems.append("initial_observation must return the first screen as non-empty text")
    tools = _call(problems, "agent_tools", dom.agent_tools, scenario)
    if tools is not None and not all(isinstance(t, ToolSpec) for t in tools):
        problems.append("agent_tools must return a list of simgym.ToolSpec")
    state = _call(problems, "initial_state", dom.initial_state, scenario)
    if state is not None:
        if not isinstance(state, dict):
            problems.append("initial_state must return a dict (the hidden state ledger)")
        else:
            try:
                json.dumps(state)
            except (TypeError, ValueError) as exc:
                problems.append(f"initial_state is not JSON: {exc}")
            if dom.state_schema is not None:
                try:
                    jsonschema.validate(state, dom.state_schema)
                except jsonschema.SchemaError as exc:
                    problems.append(f"state_schema is not a JSON Schema: {exc.message}")
                except jsonschema.ValidationError as exc:
                    problems.append(f"initial_state does not fit state_schema: {exc.message}")
    return problems


def _call(problems: list[str], what: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # a check reports a domain's bug; it does not raise it
        problems.append(f"{what}(default scenario) raised {type(exc).__name__}: {exc}")
        return None


def _episode_problems(dom: Domain, scenario: Any, actions: Sequence[str]) -> list[str]:
    """Reset an episode and step each action, with a stub world model."""
    demo = dom.demonstrations[0].observation if dom.demonstrations else ""
    env = SimEnv(dom, _Echo(demo), scenario, grounding="facts", validation_retries=0)
    return run_sync(_run_episode(dom, env, scenario, actions))


async def _run_episode(
    dom: Domain, env: SimEnv, scenario: Any, actions: Sequence[str]
) -> list[str]:
    problems: list[str] = []
    try:
        first = await env.reset("conformance check")
    except Exception as exc:  # noqa: BLE001  (reported as the domain's problem)
        return [f"an episode could not reset: {type(exc).__name__}: {exc}"]
    try:
        if not isinstance(first, Observation) or not first.text.strip():
            problems.append("reset gave no first observation")
        for line in actions:
            try:
                action = dom.parse_input(line, env.scenario)
            except SimgymError as exc:
                problems.append(f"parse_input({line!r}) refused it: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001
                problems.append(f"parse_input({line!r}) raised {type(exc).__name__}: {exc}")
                continue
            result = await env.step(action)
            turn = env.trajectory.turns[-1] if env.trajectory and env.trajectory.turns else None
            if turn is not None and turn.error:
                problems.append(f"step {line!r} failed: {turn.error}")
            notes = (turn.grounding or {}) if turn is not None else {}
            for key in ("grounding_error", "effects_error", "observe_error"):
                if notes.get(key):
                    problems.append(f"step {line!r}: {key.replace('_', ' ')}: {notes[key]}")
            if result.done or result.truncated:
                break
    finally:
        await env.close()
    return problems


def check_backend(
    name: str,
    *,
    options: dict[str, Any] | None = None,
    domain: str | Domain | None = None,
    actions: Sequence[str] = (),
) -> dict[str, Any]:
    """Check that a world-model backend keeps the contract: its name resolves (a plugin's
    entry point loads), its factory builds it from ``options``, it has ``name``,
    ``predict``, ``describe`` and ``aclose``, and ``describe()`` is a JSON object; with
    ``domain``, an episode of that domain's default scenario runs on it, one step per
    line of ``actions``, and every observation is non-empty and no error.

    Args:
        name: a backend name (built-in, or an installed plugin's ``simgym.worldmodels``
            entry point).
        options: keyword options for the backend's factory.
        domain: a domain to run an episode in (a name or a Domain).
        actions: lines as typed in ``simgym play``, stepped in that episode.

    Returns:
        The backend's ``describe()``.

    Raises:
        ConformanceError: listing every problem found.
        PluginError: the plugin that declares it failed to load.
    """
    factory = backend_factory(name)
    try:
        backend = factory(**(options or {}))
    except Exception as exc:  # noqa: BLE001
        raise ConformanceError(
            f"backend {name!r} could not be built from options {sorted(options or {})}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    problems: list[str] = []
    try:
        if not isinstance(backend, WorldModel):
            missing = [
                m for m in ("name", "predict", "describe", "aclose") if not hasattr(backend, m)
            ]
            problems.append(f"not a simgym.WorldModel: it lacks {', '.join(missing)}")
        description = (
            _call(problems, "describe", backend.describe) if hasattr(backend, "describe") else None
        )
        if description is not None:
            try:
                json.dumps(description)
            except (TypeError, ValueError) as exc:
                problems.append(f"describe() is not JSON: {exc}")
            if not isinstance(description, dict):
                problems.append("describe() must return a dict (recorded on every trajectory)")
        if domain is not None and not problems:
            problems += run_sync(_backend_episode(backend, domain, actions))
    finally:
        close = getattr(backend, "aclose", None)
        if close is not None:
            run_sync(close())
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise ConformanceError(f"backend {name!r} does not conform:\n{listed}")
    return description  # type: ignore[return-value]


async def _backend_episode(backend: Any, domain: str | Domain, actions: Sequence[str]) -> list[str]:
    dom = get_domain(domain) if isinstance(domain, str) else domain
    env = SimEnv(dom, backend, validation_retries=0)
    problems: list[str] = []
    try:
        first = await env.reset("conformance check")
        if not first.text.strip():
            problems.append(f"the {dom.name} episode's first observation is empty")
        for line in actions:
            result = await env.step(dom.parse_input(line, env.scenario))
            if result.observation.kind == "error" or not result.observation.text.strip():
                problems.append(f"step {line!r} gave no observation: {result.observation.text!r}")
            if result.done or result.truncated:
                break
    except Exception as exc:  # noqa: BLE001  (reported as the backend's problem)
        problems.append(f"the {dom.name} episode failed: {type(exc).__name__}: {exc}")
    finally:
        await env.close()
    return problems
