"""Perturbation plans: which fault strikes which turn, reproducibly.

A :class:`Perturbations` plan is a seed and a list of :class:`Rule` objects. On each turn
with a valid, non-final action, the environment asks the plan to :meth:`~Perturbations.decide`;
the first rule whose schedule matches and whose probability draw succeeds gives the turn's
:class:`~simgym.perturb.faults.Fault`. Every draw comes from a random generator seeded by
(plan seed, episode seed, turn number, rule number), so a rerun of the same episodes meets
the same faults, episodes running side by side do not disturb each other, and the plan
itself holds no state (one plan serves any number of environments).

A plan is written as a dict, or a YAML/JSON file holding one::

    seed: 7
    rules:
      - fault: rate_limit          # or a list of kinds: one is drawn each time
        probability: 0.2
        tools: [search_customers]  # only these tools (terminal: the command's program)
      - fault: auth_failure
        mode: control              # the world model writes it; default: template
        after_successes: 3         # after 3 successful calls since this rule last struck
        max_per_episode: 1
      - fault: timeout
        turns: [2, 5]              # only on these turns (1-based)
      - fault: server_error
        every: 4                   # every 4th matching call
        params: {status: 503}

``simgym.make(..., perturbations=load_perturbations("faults.yaml"))`` turns it on.
"""

from __future__ import annotations

import hashlib
import json
import random
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from simgym.core.errors import SimgymError
from simgym.core.safeload import load_yaml, read_text
from simgym.core.types import Action, Turn
from simgym.perturb.faults import (
    ALL_KINDS,
    CONTROL_ONLY,
    Fault,
    FaultMode,
    check_params,
    fault_params,
    has_template,
)


class PerturbationError(SimgymError):
    """A perturbation spec that cannot be read or makes no sense."""


class Rule(BaseModel):
    """One kind of fault and when it strikes. All schedule conditions must hold."""

    model_config = ConfigDict(extra="forbid")

    fault: str | list[str] = Field(description="a fault kind, or several to draw one from")
    mode: FaultMode = "template"
    probability: float = Field(1.0, ge=0.0, le=1.0)
    turns: list[int] | None = Field(None, description="only on these turn numbers (1-based)")
    every: int | None = Field(None, ge=1, description="only on every k-th matching call")
    after_successes: int | None = Field(
        None, ge=0, description="only once this many matching calls succeeded since it last struck"
    )
    tools: list[str] | None = Field(None, description="only for actions with these names")
    domains: list[str] | None = Field(None, description="only in these domains")
    max_per_episode: int | None = Field(None, ge=1)
    params: dict[str, Any] = Field(default_factory=dict, description="fixed fault parameters")
    name: str | None = None

    @field_validator("fault")
    @classmethod
    def _known(cls, value: str | list[str]) -> str | list[str]:
        kinds = [value] if isinstance(value, str) else value
        if not kinds:
            raise ValueError("give at least one fault kind")
        unknown = [k for k in kinds if k not in ALL_KINDS]
        if unknown:
            raise ValueError(f"unknown fault {unknown[0]!r}; known: {', '.join(ALL_KINDS)}")
        return value

    @field_validator("turns")
    @classmethod
    def _positive(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(t < 1 for t in value):
            raise ValueError("turn numbers count from 1")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        for kind in self.kinds:
            check_params(kind, self.params)
            if kind in CONTROL_ONLY and self.mode == "template":
                raise ValueError(f"fault {kind!r} has no template; give it mode: control")
        return self

    @property
    def kinds(self) -> list[str]:
        return [self.fault] if isinstance(self.fault, str) else list(self.fault)

    def applies_to(self, domain: str, name: str | None) -> bool:
        if self.domains is not None and domain not in self.domains:
            return False
        return self.tools is None or name in self.tools


class Perturbations(BaseModel):
    """A seeded fault plan (see the module docstring); pass it as ``perturbations=``."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    rules: list[Rule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> Perturbations:
        names = [self.rule_name(i) for i in range(len(self.rules))]
        if len(set(names)) != len(names):
            raise ValueError(f"rule names must be unique: {names}")
        return self

    def rule_name(self, index: int) -> str:
        return self.rules[index].name or f"rule{index + 1}"

    def decide(
        self,
        *,
        domain: str,
        scenario: Any,
        turn_index: int,
        action: Action,
        history: Sequence[Turn],
        episode: int | str | None,
    ) -> Fault | None:
        """The fault for turn ``turn_index`` (1-based), or None. ``history`` is the
        episode's earlier turns; ``episode`` its seed (or another stable identity)."""
        name = action_name(action)
        for index, rule in enumerate(self.rules):
            if not rule.applies_to(domain, name):
                continue
            label = self.rule_name(index)
            if not _scheduled(rule, label, domain, turn_index, history):
                continue
            rng = _rng(self.seed, episode, turn_index, index)
            if rng.random() >= rule.probability:
                continue
            kind = rule.kinds[0] if len(rule.kinds) == 1 else rng.choice(rule.kinds)
            params = fault_params(kind, rng, rule.params)
            mode, note = rule.mode, ""
            if mode == "template" and not has_template(domain, kind):
                mode, note = "control", f"no {kind} template for domain {domain!r}"
            return Fault(kind=kind, mode=mode, params=params, rule=label, note=note)
        return None

    def scaled(self, factor: float) -> Perturbations:
        """The same plan with every probability multiplied by ``factor`` (capped at 1)."""
        if factor < 0:
            raise PerturbationError(f"scale factor must be 0 or more, got {factor}")
        rules = [
            r.model_copy(update={"probability": min(1.0, r.probability * factor)})
            for r in self.rules
        ]
        return self.model_copy(update={"rules": rules})


def action_name(action: Action) -> str | None:
    """What a rule's ``tools`` filter matches: a tool call's name, a terminal command's
    program (``sudo`` skipped), or None for free text."""
    if action.kind == "tool_call":
        return action.name
    if action.kind == "keystrokes":
        typed = "".join(k.keystrokes for k in action.keystrokes).strip()
        try:
            words = shlex.split(typed)
        except ValueError:
            words = typed.split()
        if words[:1] == ["sudo"]:
            words = words[1:]
        return words[0] if words else None
    return action.name


def _calls(rule: Rule, domain: str, history: Sequence[Turn]) -> list[Turn]:
    """Earlier turns that were calls this rule would consider (rejected actions and final
    answers never reached the world)."""
    return [
        t
        for t in history
        if t.action is not None
        and t.error_type != "action"
        and not t.observation.metadata.get("final_answer")
        and rule.applies_to(domain, action_name(t.action))
    ]


def _scheduled(
    rule: Rule, label: str, domain: str, turn_index: int, history: Sequence[Turn]
) -> bool:
    if rule.turns is not None and turn_index not in rule.turns:
        return False
    calls = _calls(rule, domain, history)
    if rule.every is not None and (len(calls) + 1) % rule.every:
        return False
    struck = [i for i, t in enumerate(calls) if (t.perturbation or {}).get("rule") == label]
    if rule.max_per_episode is not None and len(struck) >= rule.max_per_episode:
        return False
    if rule.after_successes is not None:
        since = calls[struck[-1] + 1 :] if struck else calls
        successes = sum(1 for t in since if not t.error and not t.perturbation)
        if successes < rule.after_successes:
            return False
    return True


def _rng(seed: int, episode: int | str | None, turn: int, rule: int) -> random.Random:
    """A generator for one (plan, episode, turn, rule): stable across processes, unlike
    ``hash()``, which Python salts per process for strings."""
    key = json.dumps([seed, episode, turn, rule]).encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def load_perturbations(spec: Perturbations | dict | list | str | Path) -> Perturbations:
    """A plan from a :class:`Perturbations`, a dict (``{"seed", "rules"}``, or one rule),
    a list of rules, or the path of a YAML/JSON file holding any of those."""
    if isinstance(spec, Perturbations):
        return spec
    source = "perturbation spec"
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        if not path.is_file():
            raise PerturbationError(f"perturbation file not found: {path}")
        source = str(path)
        try:
            spec = load_yaml(read_text(path))
        except yaml.YAMLError as exc:
            raise PerturbationError(f"{source}: not valid YAML/JSON: {exc}") from None
    if isinstance(spec, list):
        spec = {"rules": spec}
    elif isinstance(spec, dict) and "fault" in spec:
        spec = {"rules": [spec]}
    if not isinstance(spec, dict):
        raise PerturbationError(
            f"{source}: expected a mapping with 'rules' or a list of rules, "
            f"got {type(spec).__name__}"
        )
    try:
        return Perturbations.model_validate(spec)
    except ValidationError as exc:
        raise PerturbationError(f"invalid {source}:\n{exc}") from None
