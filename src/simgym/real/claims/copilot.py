"""Claims Copilot: the AI assistant staff talk to, and its GenAI telemetry.

The assistant turns a user's request into tool calls against the claims API. Each user
turn is an ``invoke_agent`` span; inside it, every model round trip is a ``chat`` span and
every tool call an ``execute_tool`` span (GenAI semantic conventions: ``gen_ai.tool.name``,
``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``,
``gen_ai.conversation.id``, ``error.type`` when the tool fails). A tool call is an HTTP
request made with the user's delegated token: a CLIENT span whose ``traceparent`` header
continues the trace into the API's SERVER span, so one operation shows as a GenAI span
wrapping HTTP spans of the same trace.

Which tools the model picks is scripted by the driver; the telemetry around the calls is
what a real agent framework would emit.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from simgym.real.claims.app import API_HOST, API_PORT
from simgym.real.claims.store import SimClock

AGENT_NAME = "Claims Copilot"
AGENT_ID = "asst_nwm_claims_copilot"
PROVIDER = "openai"
MODEL = "gpt-4.1-mini"
RESPONSE_MODEL = "gpt-4.1-mini-2025-04-14"
_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass(frozen=True)
class Tool:
    name: str
    method: str
    path: str  # template; {name} segments come from the arguments
    description: str


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("issue_policy", "POST", "/v1/policies", "Issue a new insurance policy to a holder."),
        Tool("get_policy", "GET", "/v1/policies/{policy_id}", "Look up a policy by its id."),
        Tool(
            "cancel_policy",
            "POST",
            "/v1/policies/{policy_id}/cancellation",
            "Cancel an active policy.",
        ),
        Tool("file_claim", "POST", "/v1/claims", "File a new claim against a policy."),
        Tool("search_claims", "GET", "/v1/claims", "List claims, optionally by status or policy."),
        Tool("get_claim", "GET", "/v1/claims/{claim_number}", "Read a claim with its assessments."),
        Tool(
            "start_review",
            "POST",
            "/v1/claims/{claim_number}/review",
            "Take a filed claim into review.",
        ),
        Tool(
            "record_assessment",
            "POST",
            "/v1/claims/{claim_number}/assessments",
            "Record the assessed amount and a recommendation for a claim under review.",
        ),
        Tool(
            "approve_claim",
            "POST",
            "/v1/claims/{claim_number}/approval",
            "Approve a claim at its current assessment's amount.",
        ),
        Tool(
            "reject_claim",
            "POST",
            "/v1/claims/{claim_number}/rejection",
            "Reject a claim under review.",
        ),
        Tool(
            "close_claim",
            "POST",
            "/v1/claims/{claim_number}/closure",
            "Close a paid or rejected claim.",
        ),
        Tool("issue_payout", "POST", "/v1/payouts", "Pay an approved claim to the payee's IBAN."),
        Tool("get_payout", "GET", "/v1/payouts/{payout_id}", "Look up a payout."),
    )
}


def split_arguments(
    tool: Tool, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(path, query, body) of a tool call."""
    path = tool.path
    rest = dict(arguments)
    for name in [seg[1:-1] for seg in tool.path.split("/") if seg.startswith("{")]:
        path = path.replace("{" + name + "}", str(rest.pop(name, "")))
    if tool.method == "GET":
        return path, {k: v for k, v in rest.items() if v is not None}, {}
    return path, {}, rest


# (method, path, query, headers, body) -> (status, response text)
Send = Callable[[str, str, dict[str, Any], dict[str, str], dict[str, Any] | None], tuple[int, str]]


class Copilot:
    """One conversation between a staff member and the assistant."""

    def __init__(
        self,
        tracer: trace.Tracer,
        clock: SimClock,
        send: Send,
        rng: random.Random,
        *,
        user_id: str,
        token: str,
        session_id: str,
    ) -> None:
        self.tracer = tracer
        self.clock = clock
        self.send = send
        self.rng = rng
        self.user_id = user_id
        self.token = token
        self.session_id = session_id
        self.conversation_id = "conv_" + self._alnum(24)
        self.context_tokens = 900 + rng.randint(0, 300)
        self._turn: trace.Span | None = None
        self._turn_usage = [0, 0]

    def _alnum(self, n: int) -> str:
        return "".join(self.rng.choice(string.ascii_letters + string.digits) for _ in range(n))

    @contextmanager
    def turn(self) -> Iterator[None]:
        """One user message and everything the assistant does about it."""
        self.clock.advance_s(8, 75)  # the user types
        self.context_tokens += self.rng.randint(15, 80)
        span = self.tracer.start_span(
            f"invoke_agent {AGENT_NAME}",
            kind=SpanKind.INTERNAL,
            start_time=self.clock.now_ns(),
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": AGENT_NAME,
                "gen_ai.agent.id": AGENT_ID,
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.request.model": MODEL,
                "gen_ai.conversation.id": self.conversation_id,
                "session.id": self.session_id,
                "user.id": self.user_id,
            },
        )
        self._turn, self._turn_usage = span, [0, 0]
        self.clock.advance_ms(3, 12)
        try:
            yield
        finally:
            self._chat("stop", self.rng.randint(40, 220))
            span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": self._turn_usage[0],
                    "gen_ai.usage.output_tokens": self._turn_usage[1],
                }
            )
            self.clock.advance_ms(1, 6)
            span.end(end_time=self.clock.now_ns())
            self._turn = None

    def _chat(self, finish: str, output_tokens: int) -> None:
        context = trace.set_span_in_context(self._turn)
        start = self.clock.now_ns()
        self.clock.advance_ms(350 + output_tokens * 9, 900 + output_tokens * 22)
        span = self.tracer.start_span(
            f"chat {MODEL}",
            context=context,
            kind=SpanKind.CLIENT,
            start_time=start,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.request.model": MODEL,
                "gen_ai.response.model": RESPONSE_MODEL,
                "gen_ai.response.id": "chatcmpl-" + self._alnum(29),
                "gen_ai.response.finish_reasons": [finish],
                "gen_ai.usage.input_tokens": self.context_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
                "gen_ai.conversation.id": self.conversation_id,
                "server.address": "api.openai.com",
                "server.port": 443,
            },
        )
        span.end(end_time=self.clock.now_ns())
        self._turn_usage[0] += self.context_tokens
        self._turn_usage[1] += output_tokens
        self.context_tokens += output_tokens
        self.clock.advance_ms(1, 4)

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
        """The model asks for one tool call; the assistant runs it against the API."""
        assert self._turn is not None, "tool calls happen inside a turn"
        tool = TOOLS[name]
        arguments_json = json.dumps(arguments, separators=(",", ":"))
        self._chat("tool_calls", 18 + len(arguments_json) // 3)
        call_id = "call_" + self._alnum(24)
        tool_span = self.tracer.start_span(
            f"execute_tool {name}",
            context=trace.set_span_in_context(self._turn),
            kind=SpanKind.INTERNAL,
            start_time=self.clock.now_ns(),
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.description": tool.description,
                "gen_ai.tool.call.arguments": arguments_json,
                "gen_ai.conversation.id": self.conversation_id,
            },
        )
        self.clock.advance_ms(0.5, 2.0)
        path, query, body = split_arguments(tool, arguments)
        url = f"https://{API_HOST}{path}" + (f"?{urlencode(query)}" if query else "")
        http_span = self.tracer.start_span(
            tool.method,
            context=trace.set_span_in_context(tool_span),
            kind=SpanKind.CLIENT,
            start_time=self.clock.now_ns(),
            attributes={
                "http.request.method": tool.method,
                "url.full": url,
                "server.address": API_HOST,
                "server.port": API_PORT,
                "network.protocol.version": "1.1",
            },
        )
        headers = {
            "authorization": f"Bearer {self.token}",
            "x-session-id": self.session_id,
            "user-agent": "claims-copilot/0.9.4 python-httpx/0.28.1",
            "x-forwarded-for": "10.42.7.15",
        }
        _PROPAGATOR.inject(headers, context=trace.set_span_in_context(http_span))
        self.clock.advance_ms(0.8, 3.0)
        status, text = self.send(
            tool.method, path, query, headers, body if tool.method != "GET" else None
        )
        self.clock.advance_ms(0.8, 3.0)
        http_span.set_attribute("http.response.status_code", status)
        if status >= 400:
            http_span.set_attribute("error.type", str(status))
            http_span.set_status(Status(StatusCode.ERROR))
        http_span.end(end_time=self.clock.now_ns())
        self.clock.advance_ms(0.3, 1.5)
        try:
            result = json.loads(text) if text else None
        except ValueError:
            result = text
        tool_span.set_attribute("gen_ai.tool.call.result", text)
        if status >= 400:
            code = result.get("code") if isinstance(result, dict) else None
            tool_span.set_attribute("error.type", code or str(status))
            detail = result.get("detail") if isinstance(result, dict) else None
            tool_span.set_status(Status(StatusCode.ERROR, detail or f"HTTP {status}"))
        tool_span.end(end_time=self.clock.now_ns())
        self.context_tokens += 20 + len(text) // 4
        return status, result
