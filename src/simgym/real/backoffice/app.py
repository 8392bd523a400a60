"""The back office as a JSON REST service (FastAPI), traced with OpenTelemetry.

Headers: ``X-Actor`` (who), ``X-Role`` (operator, reviewer, manager, auditor), ``X-Session``
(groups the requests of one working session), ``Idempotency-Key`` (optional, on the POSTs
that create something: a retry with the same key gets the first answer back).

Every error has one shape, ``{"error": {"code", "message", "details"}}``: 400 broken JSON,
401 missing identity, 403 role or limit, 404 unknown record or route, 405 wrong method,
409 life cycle, 413 body too large, 422 invalid fields, 500 a bug.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.exceptions import HTTPException as StarletteHTTPException

from simgym.real.backoffice.store import ApiError, Bank, Caller

logger = logging.getLogger(__name__)
MAX_BODY_BYTES = 64 * 1024
BODY_ATTRIBUTE_LIMIT = 4096
IDEMPOTENT_OPERATIONS = ("create_customer", "open_account", "create_loan", "run_kyc")
_STATUS_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    422: "validation_failed",
    500: "internal_error",
}


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


class TracingMiddleware:
    """Pure ASGI middleware: one SERVER span per HTTP request, with the HTTP semantic
    conventions, the caller and both bodies (cut at ``body_limit`` characters). It also
    refuses bodies larger than ``max_body`` bytes before the app sees them."""

    def __init__(
        self, app, provider: TracerProvider | None, *, max_body: int, body_limit: int
    ) -> None:
        self.app = app
        self.tracer = provider.get_tracer("simgym.real.backoffice") if provider else None
        self.max_body, self.body_limit = max_body, body_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])
        }
        chunks, size, too_large = [], 0, False
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            too_large = True
        else:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    break
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    too_large = True
                    break
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        body = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        status = {"code": 500}
        started = {"yes": False}
        sent: list[bytes] = []

        async def capture(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                started["yes"] = True
            elif message["type"] == "http.response.body":
                sent.append(message.get("body", b""))
            await send(message)

        method = scope["method"]
        span = None
        if self.tracer is not None:
            span = self.tracer.start_span(method, kind=SpanKind.SERVER)
        try:
            if too_large:
                payload = json.dumps(
                    error_body(
                        "body_too_large",
                        f"the request body exceeds {self.max_body} bytes",
                        limit=self.max_body,
                    )
                ).encode()
                await capture(
                    {
                        "type": "http.response.start",
                        "status": 413,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()),
                        ],
                    }
                )
                await capture({"type": "http.response.body", "body": payload})
            else:
                await self.app(scope, replay, capture)
        except Exception as exc:
            if span is not None:
                span.record_exception(exc)
                span.set_attribute("error.type", type(exc).__qualname__)
            if started["yes"]:
                raise
            # a bug, not a refusal: still one clean JSON answer, never a dropped connection
            logger.exception("unhandled error on %s %s", method, scope["path"])
            payload = json.dumps(
                error_body("internal_error", "internal error", kind=type(exc).__name__)
            ).encode()
            await capture(
                {
                    "type": "http.response.start",
                    "status": 500,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(payload)).encode()),
                    ],
                }
            )
            await capture({"type": "http.response.body", "body": payload})
        finally:
            if span is not None:
                self._finish(span, scope, headers, body, too_large, status["code"], sent)

    def _finish(self, span, scope, headers, body, too_large, code, sent) -> None:
        method, path = scope["method"], scope["path"]
        route = getattr(scope.get("route"), "path", None)
        endpoint = scope.get("endpoint")
        span.update_name(f"{method} {route}" if route else method)
        server = scope.get("server") or ("", 0)
        client = scope.get("client") or ("", 0)
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.path": path,
            "url.scheme": scope.get("scheme", "http"),
            "http.response.status_code": code,
            "network.protocol.version": scope.get("http_version", "1.1"),
            "server.address": server[0] or "",
            "server.port": server[1] or 0,
            "client.address": client[0] or "",
            "client.port": client[1] or 0,
            "http.request.body.size": len(body),
        }
        if route:
            attributes["http.route"] = route
        if scope.get("query_string"):
            attributes["url.query"] = scope["query_string"].decode("latin-1")
        if "user-agent" in headers:
            attributes["user_agent.original"] = headers["user-agent"]
        for header, name in (
            ("x-session", "backoffice.session"),
            ("x-actor", "backoffice.actor"),
            ("x-role", "backoffice.role"),
            ("idempotency-key", "backoffice.idempotency_key"),
        ):
            if header in headers:
                attributes[name] = headers[header]
        # the semantic-convention names too, which log importers read without knowing us
        for header, name in (
            ("x-session", "session.id"),
            ("x-actor", "enduser.id"),
            ("x-role", "enduser.role"),
        ):
            if header in headers:
                attributes[name] = headers[header]
        if endpoint is not None and route:
            attributes["backoffice.operation"] = endpoint.__name__
        request_text = "" if too_large else body.decode("utf-8", errors="replace")
        request_text, cut_in = _cut(request_text, self.body_limit)
        response = b"".join(sent)
        response_text, cut_out = _cut(response.decode("utf-8", errors="replace"), self.body_limit)
        attributes.update(
            {
                "backoffice.request.body": request_text,
                "backoffice.request.body.truncated": cut_in or too_large,
                "backoffice.response.body": response_text,
                "backoffice.response.body.truncated": cut_out,
                "http.response.body.size": len(response),
            }
        )
        if code >= 400:
            try:
                attributes["backoffice.error.code"] = json.loads(response)["error"]["code"]
            except (ValueError, KeyError, TypeError):
                pass
        if code >= 500:
            attributes.setdefault("error.type", str(code))
            span.set_status(Status(StatusCode.ERROR))
        span.set_attributes(attributes)
        span.end()


def _caller(request: Request) -> Caller:
    headers = request.headers
    route = getattr(request.scope.get("route"), "path", None)
    return Caller(
        headers.get("x-actor", "").strip(),
        headers.get("x-role", "").strip(),
        headers.get("x-session"),
        request.method,
        route,
        request.url.path,
    )


async def _json(request: Request, *, required: bool = True) -> Any:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise ApiError(
                422,
                "validation_failed",
                "a JSON body is required",
                fields=[{"field": "", "problem": "required"}],
            )
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(
            400, "invalid_json", "the request body is not valid JSON", problem=str(exc)[:200]
        ) from None


def create_app(
    bank: Bank | str = ":memory:",
    *,
    tracer: TracerProvider | None = None,
    max_body: int = MAX_BODY_BYTES,
    body_limit: int = BODY_ATTRIBUTE_LIMIT,
) -> FastAPI:
    """The service over ``bank`` (a :class:`Bank` or a SQLite path)."""
    bank = bank if isinstance(bank, Bank) else Bank(bank)
    app = FastAPI(
        title="simgym back office", version="1.0.0", docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.bank = bank
    app.add_middleware(TracingMiddleware, provider=tracer, max_body=max_body, body_limit=body_limit)

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, err: ApiError):
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, err: StarletteHTTPException):
        code = _STATUS_CODES.get(err.status_code, "http_error")
        return JSONResponse(
            error_body(code, str(err.detail)),
            status_code=err.status_code,
            headers=getattr(err, "headers", None),
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, err: RequestValidationError):
        fields = [
            {"field": ".".join(str(p) for p in e.get("loc", ())[1:]), "problem": e.get("msg", "")}
            for e in err.errors()
        ]
        return JSONResponse(
            error_body("validation_failed", "the request has invalid fields", fields=fields),
            status_code=422,
        )

    @app.exception_handler(Exception)
    async def _crash(_request: Request, err: Exception):
        return JSONResponse(
            error_body("internal_error", "internal error", kind=type(err).__name__), status_code=500
        )

    def answer(result: tuple[int, Any]) -> JSONResponse:
        status, body = result
        return JSONResponse(body, status_code=status)

    async def idempotent(request: Request, operation: str, call) -> JSONResponse:
        key = request.headers.get("idempotency-key")
        if key:
            stored = bank.replay(key, operation)
            if stored is not None:
                response = answer(stored)
                response.headers["Idempotent-Replayed"] = "true"
                return response
        status, body = await call()
        if key and status < 300:
            bank.remember(key, operation, status, body)
        return answer((status, body))

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.post("/customers")
    async def create_customer(request: Request):
        async def call():
            return bank.create_customer(_caller(request), await _json(request))

        return await idempotent(request, "create_customer", call)

    @app.get("/customers/{customer_id}")
    async def get_customer(customer_id: str, request: Request):
        return answer(bank.get_customer(_caller(request), customer_id))

    @app.post("/customers/{customer_id}/documents")
    async def add_documents(customer_id: str, request: Request):
        return answer(bank.add_documents(_caller(request), customer_id, await _json(request)))

    @app.post("/kyc/{customer_id}")
    async def run_kyc(customer_id: str, request: Request):
        async def call():
            await _json(request, required=False)
            return bank.run_kyc(_caller(request), customer_id)

        return await idempotent(request, "run_kyc", call)

    @app.post("/accounts")
    async def open_account(request: Request):
        async def call():
            return bank.open_account(_caller(request), await _json(request))

        return await idempotent(request, "open_account", call)

    @app.get("/accounts/{account_id}")
    async def get_account(account_id: str, request: Request):
        return answer(bank.get_account(_caller(request), account_id))

    @app.post("/loans")
    async def create_loan(request: Request):
        async def call():
            return bank.create_loan(_caller(request), await _json(request))

        return await idempotent(request, "create_loan", call)

    @app.get("/loans")
    async def list_loans(
        request: Request, status: str | None = None, customer_id: str | None = None
    ):
        return answer(bank.list_loans(_caller(request), status, customer_id))

    @app.get("/loans/{loan_id}")
    async def get_loan(loan_id: str, request: Request):
        return answer(bank.get_loan(_caller(request), loan_id))

    def mover(action: str):
        async def move(loan_id: str, request: Request):
            body = await _json(request, required=False)
            return answer(bank.move_loan(_caller(request), action, loan_id, body))

        move.__name__ = f"{action}_loan"
        return move

    for action in ("submit", "review", "approve", "reject", "withdraw", "disburse"):
        app.post(f"/loans/{{loan_id}}/{action}", name=f"{action}_loan")(mover(action))

    @app.get("/audit")
    async def get_audit(request: Request, since: int = 0, limit: int = 100):
        return answer(bank.get_audit(_caller(request), since, limit))

    return app
