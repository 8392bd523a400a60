"""A small bank's back office: the real system a simulated twin is measured against.

Customers, accounts, KYC checks and loan applications with an approval life cycle, roles,
validation and an append-only audit log (:mod:`.store`); a FastAPI service over it traced
with OpenTelemetry into OTLP/JSON files (:mod:`.app`, :mod:`.telemetry`); its history as an
OCEL 2.0 log (:mod:`.ocel`); and a driver that plays randomized operator sessions against
it and writes all the logs (:mod:`.driver`, ``python -m simgym.real.backoffice``).

Needs the ``logs`` extra (fastapi, uvicorn, opentelemetry-sdk, the OTLP encoder); nothing
here is imported by ``import simgym``.
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    "Bank": "simgym.real.backoffice.store",
    "ApiError": "simgym.real.backoffice.store",
    "Caller": "simgym.real.backoffice.store",
    "create_app": "simgym.real.backoffice.app",
    "run_sessions": "simgym.real.backoffice.driver",
    "build_ocel": "simgym.real.backoffice.ocel",
    "tracer_provider": "simgym.real.backoffice.telemetry",
    "read_otlp_jsonl": "simgym.real.backoffice.telemetry",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(_NAMES[name]), name)
