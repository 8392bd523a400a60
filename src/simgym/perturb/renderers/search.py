"""Search fault templates: result pages with errors, no hits, cached or cut-short results,
and the same faults on a fetched page (``web_extractor``)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import urlsplit

from simgym.perturb.renderers._base import REASONS, Context, failing_items

_STOP = frozenset("the and for with from what when who how are was is of in on to a an".split())


def render_search(kind: str, ctx: Context) -> str:
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
        "server_error": f"{ctx.get('status')} {REASONS.get(ctx.get('status'), 'Error')} "
        f"from {engine}",
        "flaky_network": f"{ctx.get('network_error')} while contacting {engine}",
        "ui_dialog": f"{engine} detected unusual traffic and asks to solve a CAPTCHA before "
        "showing results",
        "slow_load": f"no results after {ctx.get('seconds')} seconds; the search is still running",
    }
    if kind in whole:
        return f"Error: {ctx.get('message') or whole[kind]}"
    sections = []
    failing = failing_items(queries, ctx.get("draw", 0)) if kind == "partial_batch" else set()
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
        "server_error": f"{ctx.get('status')} {REASONS.get(ctx.get('status'), 'Error')} "
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
