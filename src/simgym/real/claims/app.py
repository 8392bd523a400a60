"""The claims API (FastAPI) and its server-side tracing.

Routes are resource-oriented, with actions as sub-resources (``POST
/v1/claims/{claim_number}/approval``). Callers authenticate with a bearer token; the
front end names the user's session in ``X-Session-Id``. Every refusal is an RFC 9457
``application/problem+json`` body.

:class:`ServerTracing` is a plain ASGI middleware that records one SERVER span per
request with the current HTTP, URL, user and session semantic conventions, and the
request and response bodies as ``http.request.body.content`` /
``http.response.body.content``. Span times come from the simulated clock, and a W3C
``traceparent`` header from a caller continues the caller's trace.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from simgym.real.claims.store import ApiError, Caller, ClaimsOffice, SimClock

API_HOST = "claims-api.northwind-mutual.example"
API_PORT = 443
_PROPAGATOR = TraceContextTextMapPropagator()


class ProblemResponse(JSONResponse):
    media_type = "application/problem+json"


def _caller(office: ClaimsOffice, request: Request) -> Caller:
    caller = office.authenticate(
        request.headers.get("authorization"), request.headers.get("x-session-id", "")
    )
    request.state.caller = caller
    return caller


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ApiError(
            "validation_failed",
            f"body: is not valid JSON ({exc.msg}).",
            **{"invalid-params": [{"name": "body", "reason": "is not valid JSON"}]},
        ) from exc
    if not isinstance(data, dict):
        raise ApiError(
            "validation_failed",
            "body: must be a JSON object.",
            **{"invalid-params": [{"name": "body", "reason": "must be a JSON object"}]},
        )
    return data


def create_app(office: ClaimsOffice) -> FastAPI:
    app = FastAPI(
        title="Northwind Mutual Claims API",
        version="2.3.0",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )

    @app.exception_handler(ApiError)
    async def _problem(request: Request, exc: ApiError) -> ProblemResponse:
        headers = {"WWW-Authenticate": 'Bearer realm="claims"'} if exc.status == 401 else None
        return ProblemResponse(
            exc.problem(request.url.path), status_code=exc.status, headers=headers
        )

    def created(body: dict[str, Any], location: str) -> JSONResponse:
        return JSONResponse(body, status_code=201, headers={"Location": location})

    @app.post("/v1/policies")
    async def issue_policy(request: Request):
        caller = _caller(office, request)
        record = office.issue_policy(caller, await _body(request))
        return created(record, f"/v1/policies/{record['policy_id']}")

    @app.get("/v1/policies/{policy_id}")
    async def get_policy(policy_id: str, request: Request):
        return office.get_policy(_caller(office, request), policy_id)

    @app.post("/v1/policies/{policy_id}/cancellation")
    async def cancel_policy(policy_id: str, request: Request):
        caller = _caller(office, request)
        return office.cancel_policy(caller, policy_id, await _body(request))

    @app.post("/v1/claims")
    async def file_claim(request: Request):
        caller = _caller(office, request)
        record = office.file_claim(caller, await _body(request))
        return created(record, f"/v1/claims/{record['claim_number']}")

    @app.get("/v1/claims")
    async def search_claims(
        request: Request, status: str | None = None, policy_id: str | None = None, limit: int = 20
    ):
        return office.search_claims(_caller(office, request), status, policy_id, limit)

    @app.get("/v1/claims/{claim_number}")
    async def get_claim(claim_number: str, request: Request):
        return office.get_claim(_caller(office, request), claim_number)

    @app.post("/v1/claims/{claim_number}/review")
    async def start_review(claim_number: str, request: Request):
        caller = _caller(office, request)
        return office.start_review(caller, claim_number, await _body(request))

    @app.post("/v1/claims/{claim_number}/assessments")
    async def record_assessment(claim_number: str, request: Request):
        caller = _caller(office, request)
        record = office.record_assessment(caller, claim_number, await _body(request))
        return created(record, f"/v1/claims/{claim_number}/assessments/{record['assessment_id']}")

    @app.post("/v1/claims/{claim_number}/approval")
    async def approve_claim(claim_number: str, request: Request):
        caller = _caller(office, request)
        return office.approve_claim(caller, claim_number, await _body(request))

    @app.post("/v1/claims/{claim_number}/rejection")
    async def reject_claim(claim_number: str, request: Request):
        caller = _caller(office, request)
        return office.reject_claim(caller, claim_number, await _body(request))

    @app.post("/v1/claims/{claim_number}/closure")
    async def close_claim(claim_number: str, request: Request):
        caller = _caller(office, request)
        return office.close_claim(caller, claim_number, await _body(request))

    @app.post("/v1/payouts")
    async def issue_payout(request: Request):
        caller = _caller(office, request)
        record = office.issue_payout(caller, await _body(request))
        return created(record, f"/v1/payouts/{record['payout_id']}")

    @app.get("/v1/payouts/{payout_id}")
    async def get_payout(payout_id: str, request: Request):
        return office.get_payout(_caller(office, request), payout_id)

    return app


class ServerTracing:
    """ASGI middleware: one SERVER span per request, timed by the simulated clock."""

    def __init__(self, app, tracer: trace.Tracer, clock: SimClock) -> None:
        self.app = app
        self.tracer = tracer
        self.clock = clock

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        request_body = b"".join(chunks)
        delivered = False

        async def replay():
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": request_body, "more_body": False}

        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        parent = _PROPAGATOR.extract(headers)
        start = self.clock.now_ns()
        self.clock.advance_ms(0.2, 1.2)
        response: dict[str, Any] = {"status": 500, "body": []}

        async def capture(message):
            if message["type"] == "http.response.start":
                response["status"] = message["status"]
            elif message["type"] == "http.response.body":
                response["body"].append(message.get("body", b""))
            await send(message)

        scope.setdefault("state", {})
        error: BaseException | None = None
        try:
            await self.app(scope, replay, capture)
        except BaseException as exc:  # recorded, then re-raised
            error = exc
        self.clock.advance_ms(2.0, 35.0)
        method = scope["method"]
        route = getattr(scope.get("route"), "path", None)
        status = response["status"]
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.scheme": "https",
            "url.path": scope["path"],
            "server.address": API_HOST,
            "server.port": API_PORT,
            "network.protocol.version": scope.get("http_version", "1.1"),
            "client.address": headers.get("x-forwarded-for", "10.42.0.10").split(",")[0].strip(),
            "user_agent.original": headers.get("user-agent", ""),
            "http.response.status_code": status,
        }
        if route:
            attributes["http.route"] = route
        query = scope.get("query_string", b"").decode("latin-1")
        if query:
            attributes["url.query"] = query
        caller = scope["state"].get("caller")
        if caller is not None:
            attributes["user.id"] = caller.user_id
            attributes["user.roles"] = list(caller.roles)
        if headers.get("x-session-id"):
            attributes["session.id"] = headers["x-session-id"]
        if request_body:
            attributes["http.request.body.size"] = len(request_body)
            attributes["http.request.body.content"] = request_body.decode("utf-8", "replace")
        body = b"".join(response["body"])
        attributes["http.response.body.size"] = len(body)
        if body:
            attributes["http.response.body.content"] = body.decode("utf-8", "replace")
        span = self.tracer.start_span(
            f"{method} {route}" if route else method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=attributes,
            start_time=start,
        )
        if error is not None:
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        elif status >= 500:
            span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=self.clock.now_ns())
        if error is not None:
            raise error
