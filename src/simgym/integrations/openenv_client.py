"""The OpenEnv client for simgym's OpenEnv server (:mod:`simgym.integrations.openenv_server`).

A subclass of OpenEnv's own :class:`~openenv.core.EnvClient`: it keeps one WebSocket
session (one simulated world) per client and speaks the typed simgym actions::

    async with SimgymEnvClient(base_url="http://127.0.0.1:8000") as env:
        first = await env.reset(task="Free some disk space")
        result = await env.step(SimgymAction(text="df -h"))
        result = await env.step({"answer": "removed /var/log/old"})   # ends the episode

or, blocking, ``with SimgymEnvClient(base_url=...).sync() as env: env.reset()``. ``step``
also takes an action's dict or a string (taken as ``text``).

Needs ``openenv-core`` (``pip install 'simgym[openenv]'``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from simgym.integrations.openenv_server import (
    SimgymAction,
    SimgymObservation,
    SimgymState,
)

__all__ = [
    "SimgymAction",
    "SimgymEnvClient",
    "SimgymObservation",
    "SimgymState",
    "with_token",
]


class SimgymEnvClient(EnvClient[SimgymAction, SimgymObservation, SimgymState]):
    """A session with a simulated world served by :func:`serve_openenv`.

    ``reset(seed=..., episode_id=..., task=..., task_id=...)`` starts an episode; the
    observation's ``done`` ends it (``truncated`` says when it was cut short). A server
    error (a bad reset option, an unknown task id) raises ``RuntimeError`` with the
    server's message; an invalid action is an observation of kind ``error``.

    ``token``: the server's token (``simgym serve --token``). OpenEnv's client opens its
    WebSocket with no way to add headers, so the token goes in the URL's user info, which
    is sent as HTTP Basic authentication; the server accepts it there as well.
    """

    def __init__(self, base_url: str, *, token: str | None = None, **options: Any) -> None:
        super().__init__(with_token(base_url, token) if token else base_url, **options)

    def _step_payload(self, action: SimgymAction | dict[str, Any] | str) -> dict[str, Any]:
        return SimgymAction.of(action).model_dump(exclude_none=True, exclude_defaults=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SimgymObservation]:
        fields = dict(payload.get("observation") or {})
        done = bool(payload.get("done", False))
        reward = payload.get("reward")
        observation = SimgymObservation(**fields, done=done, reward=reward)
        return StepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload: dict[str, Any]) -> SimgymState:
        return SimgymState.model_validate(payload)


def with_token(base_url: str, token: str) -> str:
    """``base_url`` carrying ``token`` as its user info (``http://simgym:TOKEN@host:port``),
    the form a simgym server accepts from clients that cannot set headers."""
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    host = parts.netloc.rpartition("@")[2]
    netloc = f"simgym:{quote(token, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
