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

Templates for web, os and android show the screen before the action with the fault on it
(a dialog, a notice, an error page), since the action did not get through.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from simgym.core.types import Action
from simgym.domains._gui import uitree

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
TEMPLATE_DOMAINS: tuple[str, ...] = ("mcp", "search", "terminal", "swe", "web", "os", "android")

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
_REASONS = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}

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
        params["status"] = rng.choice(tuple(_REASONS))
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
    return _INSTRUCTIONS[kind].format_map(_Blank(values))


class _Blank(dict):
    """Fills a placeholder a rule left out with a neutral word instead of failing."""

    def __missing__(self, key: str) -> str:
        return "some"


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
        render = _RENDERERS.get(domain)
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


@dataclass(frozen=True)
class Context:
    """What a template may use: the world, the action, the screen before it, parameters."""

    scenario: Any
    action: Action
    last_observation: str
    params: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)


def _failing(items: list[Any], draw: int) -> set[int]:
    """Which of a batch's items fail: some, never none, and not all when there are two+."""
    rng = random.Random(draw)
    if len(items) < 2:
        return set(range(len(items)))
    count = rng.randint(1, len(items) - 1)
    return set(rng.sample(range(len(items)), count))


# -- mcp ---------------------------------------------------------------------------------


def _mcp(kind: str, ctx: Context) -> str:
    scenario, tool = ctx.scenario, ctx.action.name or "tool"
    key = _collection_key(scenario, tool)
    error: tuple[int, str, dict[str, Any] | None] | None = None
    value: dict[str, Any] | None = None
    text = ""
    message = ctx.get("message")
    if kind == "auth_failure":
        error = (
            ctx.get("status"),
            message or "Unauthorized: the access token is invalid or has expired",
            None,
        )
    elif kind == "permission_denied":
        error = (ctx.get("status"), message or f"Forbidden: this token may not call {tool}", None)
    elif kind == "timeout":
        error = (-32001, message or f"Request timed out after {ctx.get('seconds')} seconds", None)
    elif kind == "rate_limit":
        after = ctx.get("retry_after")
        error = (
            ctx.get("status"),
            message or f"Too Many Requests: rate limit exceeded, retry after {after} seconds",
            {"retry_after": after},
        )
    elif kind == "server_error":
        status = ctx.get("status")
        error = (status, message or _REASONS.get(status, "Server Error"), None)
    elif kind == "stale_data":
        error = (
            409,
            message or "Conflict: the record changed since it was read; fetch it again and retry",
            None,
        )
    elif kind == "flaky_network":
        error = (-32000, message or f"Connection closed: {ctx.get('network_error')}", None)
    elif kind == "pagination":
        value = {
            key: [],
            "has_more": True,
            "next_cursor": ctx.get("cursor"),
            "page": 1,
            "total_pages": ctx.get("pages"),
        }
        text = (
            f"Page 1 of {ctx.get('pages')}: no items on this page. "
            f"Call {tool} again with cursor {ctx.get('cursor')} for more."
        )
    elif kind == "truncated":
        value = {
            key: [],
            "truncated": True,
            "omitted": ctx.get("omitted"),
            "message": message
            or "the result exceeded the size limit and was cut; narrow the request",
        }
        text = f"[result truncated: {ctx.get('omitted')} items omitted; narrow the request]"
    elif kind == "empty_results":
        value, text = {key: [], "total": 0}, "No results."
    elif kind == "partial_batch":
        value, text = _mcp_batch(ctx, tool)
    elif kind == "ui_dialog":
        value = {
            "status": "confirmation_required",
            "title": ctx.get("title"),
            "message": ctx.get("text"),
            "options": ctx.get("buttons"),
        }
        text = f"{ctx.get('title')}: {ctx.get('text')} Waiting for the user to confirm."
    elif kind == "slow_load":
        value = {
            "status": "pending",
            "message": f"still processing after {ctx.get('seconds')} seconds; call {tool} "
            "again later for the result",
        }
        text = f"Still processing after {ctx.get('seconds')} seconds; try again later."
    return _mcp_format(scenario.output_format, error, value, text)


def _mcp_batch(ctx: Context, tool: str) -> tuple[dict[str, Any], str]:
    items = next((v for v in ctx.action.arguments.values() if isinstance(v, list) and v), None)
    if items is None:
        message = f"{tool} was only partly applied: one of its steps failed; re-check the result"
        return {"status": "partial_failure", "message": message}, message
    failing = _failing(items, ctx.get("draw", 0))
    results = [
        {"item": item, "ok": False, "error": {"code": 500, "message": "failed to process item"}}
        if i in failing
        else {"item": item, "ok": True}
        for i, item in enumerate(items)
    ]
    value = {
        "status": "partial_failure",
        "succeeded": len(items) - len(failing),
        "failed": len(failing),
        "results": results,
    }
    lines = [f"{'FAILED' if r['ok'] is False else 'ok'}: {r['item']}" for r in results]
    return value, f"{len(failing)} of {len(items)} items failed:\n" + "\n".join(lines)


def _mcp_format(
    output_format: str,
    error: tuple[int, str, dict[str, Any] | None] | None,
    value: dict[str, Any] | None,
    text: str,
) -> str:
    if error is not None:
        code, message, data = error
        if output_format == "json":
            body: dict[str, Any] = {"code": code, "message": message}
            if data:
                body["data"] = data
            return json.dumps({"error": body}, ensure_ascii=False)
        line = f"Error {code}: {message}"
        if output_format == "mcp":
            return json.dumps({"content": [{"type": "text", "text": line}], "isError": True})
        return line
    assert value is not None
    if output_format == "json":
        return json.dumps(value, ensure_ascii=False)
    if output_format == "mcp":
        payload = json.dumps(value, ensure_ascii=False)
        return json.dumps({"content": [{"type": "text", "text": payload}], "isError": False})
    return text


def _collection_key(scenario: Any, tool: str) -> str:
    """The name a list result of ``tool`` likely has: a list in the server's state whose
    name the tool mentions (``search_customers`` -> ``customers``), else ``results``."""
    words = set(tool.lower().split("_"))
    state = getattr(scenario, "state", {}) or {}
    for name, value in state.items():
        if isinstance(value, list) and (name.lower() in words or name.lower()[:-1] in words):
            return name
    return "results"


# -- search ------------------------------------------------------------------------------

_STOP = frozenset("the and for with from what when who how are was is of in on to a an".split())


def _search(kind: str, ctx: Context) -> str:
    if ctx.action.name == "web_extractor":
        return _page(kind, ctx)
    scenario = ctx.scenario
    queries: list[str] = list(ctx.action.arguments.get("queries") or [""])
    engine = scenario.engine
    whole = {
        "auth_failure": f"{ctx.get('status')} Unauthorized: the search API key was rejected",
        "permission_denied": f"{ctx.get('status')} Forbidden: this API key may not use "
        f"{engine} search",
        "timeout": f"the search request timed out after {ctx.get('seconds')} seconds",
        "rate_limit": f"429 Too Many Requests: retry after {ctx.get('retry_after')} seconds",
        "server_error": f"{ctx.get('status')} {_REASONS.get(ctx.get('status'), 'Error')} "
        f"from {engine}",
        "flaky_network": f"{ctx.get('network_error')} while contacting {engine}",
        "ui_dialog": f"{engine} detected unusual traffic and asks to solve a CAPTCHA before "
        "showing results",
        "slow_load": f"no results after {ctx.get('seconds')} seconds; the search is still running",
    }
    if kind in whole:
        return f"Error: {ctx.get('message') or whole[kind]}"
    sections = []
    failing = _failing(queries, ctx.get("draw", 0)) if kind == "partial_batch" else set()
    for number, query in enumerate(queries):
        heading = f'## Results for "{query}"'
        if kind == "empty_results":
            body = f'No results found for "{query}".'
        elif number in failing:
            body = "Error: 503 Service Unavailable for this query"
        elif kind == "truncated" and number > 0:
            body = "Error: the response was truncated before this query's results"
        else:
            body = _result_list(kind, ctx, query)
        sections.append(f"{heading}\n{body}")
    return "\n\n".join(sections)


def _result_list(kind: str, ctx: Context, query: str) -> str:
    scenario = ctx.scenario
    limit = 1 if kind in ("pagination", "truncated") else scenario.results_per_query
    docs = _matching(scenario, query)[:limit]
    if not docs:
        return f'No results found for "{query}".'
    entries = []
    for rank, doc in enumerate(docs, 1):
        snippet = doc.snippet or doc.content.strip().split("\n")[0]
        date = doc.date
        if kind == "stale_data":
            date = scenario.current_date - dt.timedelta(days=ctx.get("age_days", 365))
            snippet = f"Cached copy. {snippet}".strip()
        if kind == "truncated":
            snippet = snippet[: max(len(snippet) // 2, 1)].rstrip() + "..."
        lines = [f"[{rank}] {doc.title}", f"URL: {doc.url}"]
        if snippet:
            lines.append(f"Snippet: {' '.join(snippet.split())}")
        if date:
            lines.append(f"Date: {date.isoformat()}")
        entries.append("\n".join(lines))
    tail = ""
    if kind == "pagination":
        tail = f"\n\nPage 1 of {ctx.get('pages')}. More results: search again for page 2."
    elif kind == "truncated":
        tail = f"\n\n[results truncated: {ctx.get('omitted')} more not shown]"
    return "\n\n".join(entries) + tail


def _matching(scenario: Any, query: str) -> list[Any]:
    """The scenario's known pages that share words with the query, best first."""
    words = {w for w in re.findall(r"\w+", query.lower()) if len(w) > 2 and w not in _STOP}
    scored = []
    for index, doc in enumerate(scenario.documents):
        text = f"{doc.title} {doc.snippet} {doc.url} {doc.content}".lower()
        score = sum(1 for w in words if w in text)
        if score:
            scored.append((-score, index, doc))
    return [doc for _, _, doc in sorted(scored, key=lambda s: s[:2])]


def _page(kind: str, ctx: Context) -> str:
    scenario, url = ctx.scenario, str(ctx.action.arguments.get("url", ""))
    doc = scenario.document(url)
    title = doc.title if doc is not None else (urlsplit(url).hostname or url)
    content = (doc.content or doc.snippet).strip() if doc is not None else ""
    errors = {
        "auth_failure": f"401 Unauthorized for URL {url}",
        "permission_denied": f"403 Forbidden for URL {url}",
        "timeout": f"timed out after {ctx.get('seconds')} seconds fetching {url}",
        "rate_limit": f"429 Too Many Requests for URL {url} (retry after "
        f"{ctx.get('retry_after')} seconds)",
        "server_error": f"{ctx.get('status')} {_REASONS.get(ctx.get('status'), 'Error')} "
        f"for URL {url}",
        "flaky_network": f"{ctx.get('network_error')} while fetching {url}",
    }
    if kind in errors:
        return f"Error: {ctx.get('message') or errors[kind]}"
    half = content[: len(content) // 2].rstrip() if content else ""
    if kind == "pagination":
        body = (half or "This article continues on the following pages.") + (
            f"\n\nPage 1 of {ctx.get('pages')} | [Next page]({url.rstrip('/')}?page=2)"
        )
    elif kind == "truncated":
        body = (half or "...") + f"\n\n[content truncated: {ctx.get('omitted')} lines omitted]"
    elif kind == "empty_results":
        body = "(This page has no readable content.)"
    elif kind == "stale_data":
        when = scenario.current_date - dt.timedelta(days=ctx.get("age_days", 365))
        body = f"> Cached copy of {url} as it was on {when.isoformat()}; the live page may " + (
            f"differ.\n\n{content or 'The cached copy holds no text.'}"
        )
    elif kind == "partial_batch":
        body = (half or "Parts of this page loaded.") + (
            "\n\n[Some sections of this page failed to load]"
        )
    elif kind == "ui_dialog":
        title = str(ctx.get("title"))
        buttons = " ".join(f"[{b}]" for b in ctx.get("buttons") or ("OK",))
        body = f"{ctx.get('text')}\n\n{buttons}"
    else:  # slow_load
        title, body = "Loading...", "The page is still loading. Please wait."
    return f"# {title}\n\n{body}"


# -- terminal and swe ---------------------------------------------------------------------


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # an unclosed quote: the shell would complain, not us
        return command.split()


def _shell(kind: str, ctx: Context, command: str) -> tuple[list[str], int, bool]:
    """A failing command's output lines, its exit code, and whether the shell's prompt
    comes back afterwards (a pager, a question or a running program keep the screen)."""
    words = _words(command)
    if words and words[0] == "sudo" and len(words) > 1:
        words = words[1:]
    prog = words[0] if words else "bash"
    args = [w for w in words[1:] if not w.startswith("-")]
    target = args[0] if args else "."
    message = ctx.get("message")
    status = ctx.get("status")
    simple = {
        "auth_failure": (message or "authentication failed: invalid or expired credentials", 1),
        "timeout": (f"error: operation timed out after {ctx.get('seconds')} seconds", 124),
        "rate_limit": (
            f"error: HTTP 429 Too Many Requests (retry after {ctx.get('retry_after')} seconds)",
            1,
        ),
        "server_error": (
            f"error: the server returned HTTP {status} {_REASONS.get(status, 'Server Error')}",
            1,
        ),
        "stale_data": (f"{target}: Stale file handle", 1),
        "flaky_network": (f"error: {ctx.get('network_error')}", 1),
    }
    if kind in simple:
        line, code = simple[kind]
        return [f"{prog}: {line}"], code, True
    if kind == "permission_denied":
        if "/" in prog:
            return [f"bash: {prog}: Permission denied"], 126, True
        return [f"{prog}: cannot access '{target}': Permission denied"], 1, True
    if kind == "pagination":
        return ["--More--"], 0, False
    if kind == "truncated":
        return [f"[... output truncated: {ctx.get('omitted')} lines omitted ...]"], 0, True
    if kind == "empty_results":
        return [], 0, True
    if kind == "partial_batch":
        if len(args) < 2:
            return [f"{prog}: warning: the operation completed only in part"], 1, True
        failing = _failing(args, ctx.get("draw", 0))
        failed = [a for i, a in enumerate(args) if i in failing]
        return [f"{prog}: cannot process '{a}': Input/output error" for a in failed], 1, True
    if kind == "ui_dialog":
        return [f"{ctx.get('title')}", f"{ctx.get('text')} [y/N] "], 0, False
    return [], 0, False  # slow_load: still running, nothing printed yet


def _terminal(kind: str, ctx: Context) -> str:
    command = "".join(k.keystrokes for k in ctx.action.keystrokes)
    typed = command.rstrip("\n").replace("\n", " ")
    lines = ctx.last_observation.rstrip("\n").splitlines()
    prompt = lines[-1].rstrip() if lines and re.search(r"[$#]\s*$", lines[-1]) else ""
    prompt = prompt or ctx.scenario.prompt().rstrip()
    body, _, back = _shell(kind, ctx, typed)
    screen = [f"{prompt} {typed}".rstrip(), *body]
    if back:
        screen.append(prompt)
    return "\n".join(screen).rstrip()  # as the world model's parsed screens are


def _swe(kind: str, ctx: Context) -> str:
    name, args = ctx.action.name or "bash", ctx.action.arguments
    if name in ("bash", "run_tests"):
        command = args.get("command") or ctx.scenario.test_command
        if kind == "pagination":
            body = [f"(output paginated: page 1 of {ctx.get('pages')}; narrow the command)"]
            return "\n".join([*body, "[exit code: 0]"])
        if kind == "ui_dialog":
            body = [f"{ctx.get('text')} [y/N] ", "Aborted: no answer (stdin is not a terminal)"]
            return "\n".join([*body, "[exit code: 1]"])
        if kind == "slow_load":
            seconds = ctx.get("seconds")
            return f"[command still running after {seconds} seconds: killed]\n[exit code: 124]"
        lines, code, _ = _shell(kind, ctx, command)
        return "\n".join([*lines, f"[exit code: {code}]"])
    path = args.get("path", ".")
    if kind == "empty_results" and name == "read_file":
        return "(empty file)"
    if kind == "empty_results" and name == "list_dir":
        return "(empty directory)"
    errors = {
        "auth_failure": "authentication failed: the workspace session expired",
        "permission_denied": f"permission denied: {path}",
        "timeout": f"timed out after {ctx.get('seconds')} seconds",
        "rate_limit": f"429 Too Many Requests (retry after {ctx.get('retry_after')} seconds)",
        "server_error": f"{ctx.get('status')} {_REASONS.get(ctx.get('status'), 'Error')}",
        "pagination": f"output too large ({ctx.get('pages')} pages); read a smaller range",
        "truncated": f"output too large ({ctx.get('omitted')} lines omitted); read a smaller range",
        "empty_results": f"nothing found at {path}",
        "stale_data": f"{path} changed on disk since it was last read; read it again",
        "partial_batch": f"the change to {path} was only partly applied",
        "flaky_network": f"lost the connection to the workspace ({ctx.get('network_error')})",
        "ui_dialog": f"the editor is waiting for an answer: {ctx.get('text')}",
        "slow_load": f"timed out after {ctx.get('seconds')} seconds waiting for the file system",
    }
    return f"Error: {ctx.get('message') or errors[kind]}"


# -- accessibility trees (web, os, android) ------------------------------------------------

_ROLES = {
    "web": {"text": "StaticText", "button": "button", "dialog": "dialog", "busy": "progressbar"},
    "os": {"text": "label", "button": "push-button", "dialog": "dialog", "busy": "progress-bar"},
    "android": {
        "text": "android.widget.TextView",
        "button": "android.widget.Button",
        "dialog": "android.widget.FrameLayout",
        "busy": "android.widget.ProgressBar",
    },
}
_UI_ERRORS = {
    "auth_failure": ("Signed out", "Your session has expired. Sign in again to continue."),
    "permission_denied": ("Permission denied", "You do not have permission to do this."),
    "timeout": ("Not responding", "The operation timed out after {seconds} seconds."),
    "rate_limit": ("Too many requests", "Please try again in {retry_after} seconds."),
    "server_error": ("Something went wrong", "Server error {status}. Try again later."),
    "flaky_network": ("No connection", "{network_error}. Check your connection and retry."),
}
_WEB_PAGES = {
    "auth_failure": ("401 Unauthorized", "Sign in is required to view this page."),
    "permission_denied": ("403 Forbidden", "You don't have permission to access this page."),
    "timeout": ("This site can't be reached", "ERR_TIMED_OUT"),
    "rate_limit": ("429 Too Many Requests", "Retry after {retry_after} seconds."),
    "server_error": ("{status} {reason}", "The server encountered an error."),
    "flaky_network": ("This site can't be reached", "ERR_CONNECTION_RESET"),
}
_NOTICES = {
    "pagination": ("Page 1 of {pages}", "Next page"),
    "truncated": ("{omitted} more results are hidden", "Show more"),
    "empty_results": ("No results found.", None),
    "stale_data": ("Last updated {age_days} days ago. This may be out of date.", "Refresh"),
    "partial_batch": ("Some changes could not be saved.", "Retry"),
}


class _Tree:
    """The screen before the action: header lines and tree lines, with room to add nodes."""

    def __init__(self, text: str) -> None:
        lines = text.strip("\n").splitlines()
        _, start = uitree.split_headers(text.strip("\n"))
        self.headers = [line for line in lines[:start] if line.strip()]
        self.lines = [line for line in lines[start:] if line.strip()]
        self.unit = "\t" if any(line.startswith("\t") for line in self.lines) else "  "
        numbers = [int(i) for i in uitree.parse_tree("\n".join(self.lines)).ids if i.isdigit()]
        self._next = max(numbers, default=0) + 1000  # far above the screen's own ids

    def new_id(self) -> str:
        self._next += 1
        return str(self._next)

    def header(self, key: str) -> str | None:
        for line in self.headers:
            name, sep, value = line.partition(":")
            if sep and name.strip().lower() == key.lower():
                return value.strip()
        return None

    def add(self, depth: int, role: str, name: str, flags: str = "", with_id: bool = True):
        node = f"[{self.new_id()}] {role} {name!r}" if with_id else f"{role} {name!r}"
        self.lines.append(self.unit * depth + node + (f" {flags}" if flags else ""))


def _ui(domain: str) -> Callable[[str, Context], str]:
    roles = _ROLES[domain]

    def render(kind: str, ctx: Context) -> str:
        tree = _Tree(ctx.last_observation)
        values = {**ctx.params, "reason": _REASONS.get(ctx.get("status"), "Error")}
        if domain == "web" and (kind in _WEB_PAGES or kind == "slow_load"):
            return _web_page(kind, ctx, tree, values)
        depth = 0 if domain == "os" or not tree.lines else 1
        if kind in _NOTICES:
            text, button = _NOTICES[kind]
            tree.add(depth, roles["text"], text.format_map(_Blank(values)), with_id=False)
            if button:
                tree.add(depth, roles["button"], button, "clickable" if domain == "android" else "")
        elif kind == "slow_load":
            tree.add(depth, roles["busy"], "Loading", "busy")
        else:
            if kind == "ui_dialog":
                title, text = str(ctx.get("title")), str(ctx.get("text"))
                buttons = list(ctx.get("buttons") or ["OK"])
            else:
                title, text = _UI_ERRORS[kind]
                text = ctx.get("message") or text.format_map(_Blank(values))
                buttons = ["Cancel", "Retry"] if kind != "permission_denied" else ["OK"]
            tree.add(depth, roles["dialog"], title, "modal focused")
            tree.add(depth + 1, roles["text"], text, with_id=False)
            for label in buttons:
                tree.add(depth + 1, roles["button"], label)
            if domain == "os":  # a dialog takes the keyboard focus
                kept = [h for h in tree.headers if not h.lower().startswith("focused window")]
                tree.headers = [f"Focused window: {title}", *kept]
        headers = tree.headers or [_default_header(domain, ctx.scenario)]
        return "\n".join([*headers, *tree.lines])

    return render


def _default_header(domain: str, scenario: Any) -> str:
    if domain == "web":
        return f"URL: {scenario.start_url}"
    if domain == "os":
        return f"Focused window: {scenario.focused}"
    return f"App: {scenario.app}"


def _web_page(kind: str, ctx: Context, tree: _Tree, values: dict[str, Any]) -> str:
    url = tree.header("URL") or ctx.scenario.start_url
    target = ctx.action.arguments.get("url") if ctx.action.name == "goto" else None
    url = target or url
    if kind == "slow_load":
        title, lines = "Loading...", ["  [2] progressbar 'Loading' busy"]
    else:
        title, text = (s.format_map(_Blank(values)) for s in _WEB_PAGES[kind])
        text = ctx.get("message") or text
        lines = [f"  [2] heading {title!r}", f"  StaticText {text!r}"]
    return "\n".join(
        [f"URL: {url}", f"Title: {title}", f"[1] RootWebArea {title!r}, focused", *lines]
    )


_RENDERERS: dict[str, Callable[[str, Context], str]] = {
    "mcp": _mcp,
    "search": _search,
    "terminal": _terminal,
    "swe": _swe,
    "web": _ui("web"),
    "os": _ui("os"),
    "android": _ui("android"),
}
