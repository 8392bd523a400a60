"""The fault library: what can go wrong in each domain, written as the domain writes it.

A fault kind (``rate_limit``, ``timeout``, ...) reaches an episode in one of two modes:

* ``control``: one instruction telling the world model what goes wrong on this turn; the
  model writes the observation (works in every domain, richest, not deterministic);
* ``template``: simgym writes the observation itself, in the domain's own format (an MCP
  JSON error or ``isError`` envelope, a shell error line and a fresh prompt, a results page
  with no hits, a dialog on top of an accessibility tree), deterministically and without
  calling the world model.

A :class:`Fault` is one decided fault: its kind, mode and parameters, drawn once by the
perturbation plan so that a rerun with the same seeds writes the same bytes
(:func:`fault_params` draws them). A rule may fix any of them: ``status``,
``retry_after``, ``seconds``, ``pages``, ``cursor``, ``omitted``, ``age_days``,
``network_error``, ``title`` / ``text`` / ``buttons`` (a dialog), ``message`` (replaces
the error text where a template has one) and ``instruction`` (replaces the control text).

:mod:`simgym.perturb.renderers` writes the ``template`` observations.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from simgym.core.types import Action
from simgym.perturb.renderers import REASONS, RENDERERS, Blank, Context

FAULT_KINDS: tuple[str, ...] = (
    "auth_failure",
    "permission_denied",
    "timeout",
    "rate_limit",
    "server_error",
    "pagination",
    "truncated",
    "empty_results",
    "stale_data",
    "partial_batch",
    "flaky_network",
    "ui_dialog",
    "slow_load",
)
# Kinds that only make sense as an instruction: the world model writes the observation.
CONTROL_ONLY: tuple[str, ...] = ("noise",)
ALL_KINDS: tuple[str, ...] = FAULT_KINDS + CONTROL_ONLY
TEMPLATE_DOMAINS: tuple[str, ...] = tuple(RENDERERS)  # mcp, search, terminal, swe, web, os, android

FaultMode = Literal["template", "control"]

DESCRIPTIONS: dict[str, str] = {
    "auth_failure": "credentials rejected as invalid or expired (401)",
    "permission_denied": "the caller may not do this (403, EACCES)",
    "timeout": "no answer within the time limit",
    "rate_limit": "too many requests (429) with a retry-after delay",
    "server_error": "the service fails internally (500, 502, 503)",
    "pagination": "only a first page comes back; the rest needs follow-up calls",
    "truncated": "the result is cut short; part of it is missing",
    "empty_results": "the action succeeds and finds nothing",
    "stale_data": "out-of-date or conflicting data (a cache, a changed record)",
    "partial_batch": "some items of a batch succeed, others fail",
    "flaky_network": "the connection drops (reset, unreachable, DNS)",
    "ui_dialog": "an unexpected dialog or prompt gets in the way",
    "slow_load": "the result is still loading when the screen is read",
    "noise": "distracting but harmless extra output (control mode only)",
}

_INSTRUCTIONS: dict[str, str] = {
    "auth_failure": "This action fails authentication: the credentials it relies on are "
    "rejected as invalid or expired ({status} Unauthorized). Show only that error, exactly as "
    "this environment reports it; nothing else happens and no state changes.",
    "permission_denied": "This action is not permitted for the current user or token "
    "(permission denied, {status} Forbidden). Show only that error as this environment "
    "reports it; no state changes.",
    "timeout": "This action times out after {seconds} seconds without a result. Show the "
    "timeout error as this environment reports it; no state changes.",
    "rate_limit": "The service rejects this action because of rate limiting ({status} Too "
    "Many Requests) and asks to retry after {retry_after} seconds. Show that error as this "
    "environment reports it; no state changes.",
    "server_error": "The service behind this action fails with an internal error ({status}). "
    "Show that error as this environment reports it; no state changes.",
    "pagination": "The result is paginated: show only the first page (a few items) with a "
    "continuation marker (page 1 of {pages}, next cursor '{cursor}'), so that the rest needs "
    "follow-up calls.",
    "truncated": "The result is cut short: show only the first part of what this action "
    "returns, then make clear that the rest (about {omitted} more lines or items) was "
    "truncated.",
    "empty_results": "This action succeeds but finds nothing: show an empty result (no items, "
    "no matches, no output) in the usual format.",
    "stale_data": "The result comes from an out-of-date copy about {age_days} days old: show "
    "plausible values as they were then, which may disagree with the current state of the "
    "world. The action itself succeeds.",
    "partial_batch": "If this action does several things at once (several items, queries or "
    "files), some succeed and the others fail with an error each; show which is which. If it "
    "does one thing, it is applied only partly and says so.",
    "flaky_network": "The network connection drops during this action ({network_error}). "
    "Show the network error this environment would show; no state changes.",
    "ui_dialog": "An unexpected dialog appears in front of everything, titled '{title}' and "
    "saying: {text} (buttons: {button_list}). Show the screen with this dialog on top; it "
    "must be dismissed before anything else can be done.",
    "slow_load": "The response is slow: after {seconds} seconds this action's result is still "
    "loading. Show the state while it is loading (a spinner, a progress bar, a blank or "
    "partial screen, or no output yet), not the final result.",
    "noise": "Besides the correct result, include a little realistic but irrelevant or "
    "distracting output (unrelated items, warnings, log lines), in the usual format.",
}

NETWORK_ERRORS = (
    "Connection reset by peer",
    "Network is unreachable",
    "Temporary failure in name resolution",
)
DIALOGS: tuple[tuple[str, str, tuple[str, str]], ...] = (
    (
        "Cookies on this site",
        "We use cookies to run this service. Accept all cookies?",
        ("Reject all", "Accept all"),
    ),
    (
        "Update available",
        "A new version is ready to install. Restart now to update?",
        ("Later", "Restart now"),
    ),
    (
        "Session expiring",
        "Your session ends in 60 seconds. Stay signed in?",
        ("Sign out", "Stay signed in"),
    ),
    ("Allow notifications?", "Let this app send you notifications?", ("Don't allow", "Allow")),
    ("Rate this app", "Enjoying the app? Take a moment to rate it.", ("Not now", "Rate")),
)

# Parameters a rule may set, with the type each must have.
PARAM_TYPES: dict[str, type | tuple[type, ...]] = {
    "status": int,
    "retry_after": int,
    "seconds": (int, float),
    "pages": int,
    "cursor": str,
    "omitted": int,
    "age_days": int,
    "draw": int,
    "network_error": str,
    "title": str,
    "text": str,
    "buttons": list,
    "message": str,
    "instruction": str,
}


def fault_params(
    kind: str, rng: random.Random, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The parameters of one fault, drawn from ``rng``; ``overrides`` win. The draws happen
    whatever the overrides, so a rule's other draws do not shift when one is fixed."""
    if kind not in ALL_KINDS:
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(ALL_KINDS)}")
    params: dict[str, Any] = {}
    if kind in ("auth_failure", "permission_denied"):
        params["status"] = 401 if kind == "auth_failure" else 403
    elif kind in ("timeout", "slow_load"):
        params["seconds"] = rng.choice((10, 30, 60))
    elif kind == "rate_limit":
        params.update(status=429, retry_after=rng.randint(5, 60))
    elif kind == "server_error":
        params["status"] = rng.choice(tuple(REASONS))
    elif kind == "pagination":
        params.update(pages=rng.randint(2, 5), cursor=f"{rng.getrandbits(32):08x}")
    elif kind == "truncated":
        params["omitted"] = rng.randint(10, 500)
    elif kind == "stale_data":
        params["age_days"] = rng.randint(30, 900)
    elif kind == "partial_batch":
        params["draw"] = rng.getrandbits(32)
    elif kind == "flaky_network":
        params["network_error"] = rng.choice(NETWORK_ERRORS)
    elif kind == "ui_dialog":
        title, text, buttons = rng.choice(DIALOGS)
        params.update(title=title, text=text, buttons=list(buttons))
    params.update(overrides or {})
    return params


def check_params(kind: str, params: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` for a parameter no fault knows or of the wrong type."""
    for key, value in params.items():
        expected = PARAM_TYPES.get(key)
        if expected is None:
            raise ValueError(
                f"fault {kind!r}: unknown parameter {key!r}; known: {', '.join(PARAM_TYPES)}"
            )
        if isinstance(value, bool) or not isinstance(value, expected):
            raise ValueError(f"fault {kind!r}: parameter {key!r} has the wrong type: {value!r}")
    if "buttons" in params and not all(isinstance(b, str) for b in params["buttons"]):
        raise ValueError(f"fault {kind!r}: buttons must be a list of strings")


def has_template(domain: str, kind: str) -> bool:
    """Whether simgym can write this fault's observation itself in ``domain``."""
    return domain in TEMPLATE_DOMAINS and kind in FAULT_KINDS


def control_instruction(kind: str, params: Mapping[str, Any]) -> str:
    """The instruction that asks the world model to produce this fault on this turn."""
    if params.get("instruction"):
        return str(params["instruction"])
    buttons = params.get("buttons") or ("OK",)
    values = {"button_list": ", ".join(buttons), **params}
    return _INSTRUCTIONS[kind].format_map(Blank(values))


@dataclass(frozen=True)
class Fault:
    """One fault decided for one turn (the environment's ``Perturbation``)."""

    kind: str
    mode: FaultMode
    params: dict[str, Any] = field(default_factory=dict)
    rule: str = ""
    note: str = ""  # why the mode differs from the rule's, if it does

    def instruction(self, domain: str) -> str:
        return control_instruction(self.kind, self.params)

    def observation(self, domain: str, scenario: Any, action: Action, last_observation: str) -> str:
        """The templated observation, in ``domain``'s format."""
        render = RENDERERS.get(domain)
        if render is None or self.kind not in FAULT_KINDS:
            raise ValueError(f"no template for fault {self.kind!r} in domain {domain!r}")
        return render(self.kind, Context(scenario, action, last_observation, self.params))

    def record(self) -> dict[str, Any]:
        """What the trajectory keeps: ``{"fault", "mode", "rule", **params}``."""
        record: dict[str, Any] = {"fault": self.kind, "mode": self.mode}
        if self.rule:
            record["rule"] = self.rule
        if self.note:
            record["note"] = self.note
        record.update({k: v for k, v in self.params.items() if k not in ("instruction",)})
        return record
