"""Northwind Mutual's insurance claims office: a second real system with its own conventions.

Policies, claims, assessments and payouts with the rules a claims back office has
(role permissions, approval limits per role stated in the refusal, the four-eyes rule,
segregation of duties, payout matching the approval, duplicate detection, refused
life-cycle transitions, validation) in :mod:`.store`; a FastAPI service over it with
RFC 9457 problem details, traced with the current OpenTelemetry semantic conventions
(:mod:`.app`, :mod:`.telemetry`); an AI assistant in front of it whose tool calls are
GenAI spans (:mod:`.copilot`); the history as OCEL 2.0 and XES (:mod:`.ocel`, :mod:`.xes`);
and a driver that plays working sessions and writes every log
(:mod:`.driver`, ``python -m simgym.real.claims``).

Needs fastapi, opentelemetry-sdk and the OTLP encoder; nothing here is imported by
``import simgym``.
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    "ClaimsOffice": "simgym.real.claims.store",
    "ApiError": "simgym.real.claims.store",
    "Caller": "simgym.real.claims.store",
    "SimClock": "simgym.real.claims.store",
    "truth": "simgym.real.claims.store",
    "create_app": "simgym.real.claims.app",
    "run_sessions": "simgym.real.claims.driver",
    "build_ocel": "simgym.real.claims.ocel",
    "write_xes": "simgym.real.claims.xes",
    "read_otlp_jsonl": "simgym.real.claims.telemetry",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(_NAMES[name]), name)
