"""Search: a research agent queries a web search engine and opens pages; the world model
plays the engine, its index and the pages behind it.

Actions are tool calls (free text is the agent's final answer and is not simulated):

* ``{"name": "web_search", "arguments": {"queries": ["q1", "q2"]}}`` with 1 to 5 non-empty
  queries (``{"query": "q"}`` is accepted and normalized to ``queries``);
* ``{"name": "web_extractor", "arguments": {"url": "https://...", "goal": "..."}}`` with an
  http(s) URL and an optional goal (what the agent wants from the page).

``search`` and ``visit`` (the names some deep-research agents use) are read as aliases.

Observation of ``web_search``: for each query, in order, a heading and ranked results::

    ## Results for "python 3.13 release date"
    [1] Python Release Python 3.13.0 | Python.org
    URL: https://www.python.org/downloads/release/python-3130/
    Snippet: Python 3.13.0 is the newest major release of the Python programming language.
    Date: 2024-10-07

    [2] ...

Ranks count from 1 within each query, at most ``results_per_query`` of them; ``Snippet``
and ``Date`` (``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``) may be missing. A query with no
hits has the line ``No results found for "QUERY".`` under its heading.

Observation of ``web_extractor``: the page as markdown, a title heading first::

    # What's New In Python 3.13
    ...the page text...

or one error line such as ``Error: 404 Not Found for URL https://...``. Either tool may
also fail as a whole with an ``Error: ...`` line (rate limit, timeout). The structural
words (``Results for``, ``URL:``, ``No results found``, ``Error:``) stay English whatever
the scenario's language; titles, snippets and pages use it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator

from simgym.core.domain import Demonstration, Domain, ScenarioBase, register_domain
from simgym.core.errors import ActionError
from simgym.core.safeload import loads_json
from simgym.core.state import STRING_LIST, object_schema
from simgym.core.types import Action, ToolSpec
from simgym.domains.search_ground import (
    RESULTS_HEADING,
    Result,
    ground_search,
    observe_search,
    results_section,
    results_sections,
)

MAX_QUERIES = 5

WEB_SEARCH = ToolSpec(
    name="web_search",
    description="Search the web. Give 1-5 queries; for each you get ranked results with "
    "title, URL, snippet and date.",
    parameters={
        "type": "object",
        "properties": {
            "queries": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 500},
                "minItems": 1,
                "maxItems": MAX_QUERIES,
                "description": "search queries, run independently",
            }
        },
        "required": ["queries"],
        "additionalProperties": False,
    },
)
WEB_EXTRACTOR = ToolSpec(
    name="web_extractor",
    description="Open a web page and return its content as markdown.",
    parameters={
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "an http or https URL"},
            "goal": {"type": "string", "description": "what to look for on the page"},
        },
        "required": ["url"],
        "additionalProperties": False,
    },
)
TOOLS = (WEB_SEARCH, WEB_EXTRACTOR)
# Names that other deep-research agents give the same two tools.
ALIASES = {"search": "web_search", "visit": "web_extractor"}


def tools() -> list[ToolSpec]:
    """The tools a search agent is given (``[t.to_openai() for t in tools()]``)."""
    return list(TOOLS)


def _url_problem(url: str) -> str | None:
    """Why ``url`` is not a fetchable http(s) URL, or None."""
    if not url or any(c.isspace() for c in url):
        return f"URL must be non-empty and contain no spaces, got {url!r}"
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        return f"URL must start with http:// or https://, got {url!r}"
    if not parts.hostname:
        return f"URL has no host: {url!r}"
    return None


def url_key(url: str) -> str:
    """A URL compared loosely: scheme and host case, a trailing slash and ``www.``."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower().removeprefix("www.")
    path = parts.path.rstrip("/")
    return f"{host}{path}" + (f"?{parts.query}" if parts.query else "")


class SearchDocument(BaseModel):
    """A page the engine's index certainly holds."""

    url: str
    title: str
    date: dt.date | None = None
    snippet: str = ""
    content: str = Field("", description="the page's text as markdown")

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        problem = _url_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class SearchScenario(ScenarioBase):
    """The web as a search agent sees it: engine, today's date, known pages and facts."""

    engine: str = "Google"
    current_date: dt.date = Field(dt.date(2025, 6, 2), description="the world's today")
    results_per_query: int = Field(5, ge=1, le=20)
    language: str = Field("en", min_length=1, description="language of results and pages")
    documents: list[SearchDocument] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list, description="true statements in this world")

    @field_validator("documents")
    @classmethod
    def _unique(cls, documents: list[SearchDocument]) -> list[SearchDocument]:
        keys = [url_key(d.url) for d in documents]
        repeated = sorted(
            {d.url for d, k in zip(documents, keys, strict=True) if keys.count(k) > 1}
        )
        if repeated:
            raise ValueError(f"document URLs must be unique: {repeated}")
        return documents

    def tools(self) -> list[ToolSpec]:
        return tools()

    def document(self, url: str) -> SearchDocument | None:
        key = url_key(url)
        return next((d for d in self.documents if url_key(d.url) == key), None)


# -- actions ---------------------------------------------------------------------------


def _search_arguments(args: dict[str, Any]) -> dict[str, Any]:
    args = dict(args)
    if "query" in args:
        if "queries" in args:
            raise ActionError("web_search takes 'queries' or 'query', not both")
        args["queries"] = args.pop("query")
    if isinstance(args.get("queries"), str):
        args["queries"] = [args["queries"]]
    if isinstance(args.get("queries"), list) and len(args["queries"]) > MAX_QUERIES:
        raise ActionError(
            f"web_search takes at most {MAX_QUERIES} queries per call, got {len(args['queries'])}"
        )
    WEB_SEARCH.check_arguments(args)
    # Engines ignore runs of whitespace; one line per query keeps the headings intact.
    queries = [" ".join(q.split()) for q in args["queries"]]
    blank = [str(i) for i, q in enumerate(queries, 1) if not q]
    if blank:
        raise ActionError(f"web_search: query {', '.join(blank)} is blank")
    return {"queries": queries}


def _extractor_arguments(args: dict[str, Any]) -> dict[str, Any]:
    args = dict(args)
    url = args.get("url")
    if isinstance(url, list):  # the `visit` form passes a list of URLs
        if len(url) != 1:
            raise ActionError(f"web_extractor opens one URL per call, got {len(url)}")
        args["url"] = url[0]
    WEB_EXTRACTOR.check_arguments(args)
    problem = _url_problem(args["url"].strip())
    if problem:
        raise ActionError(f"web_extractor: {problem}")
    result = {"url": args["url"].strip()}
    if args.get("goal", "").strip():
        result["goal"] = args["goal"].strip()
    return result


def _validate(action: Action, scenario: SearchScenario | None) -> Action:
    if action.kind == "text":
        return action  # the agent's final answer
    if action.kind != "tool_call":
        raise ActionError(
            'the search domain takes tool calls: {"name": "web_search", "arguments": '
            '{"queries": [...]}} or {"name": "web_extractor", "arguments": {"url": ...}}'
        )
    name = ALIASES.get(action.name or "", action.name)
    if name == WEB_SEARCH.name:
        return Action.tool_call(name, _search_arguments(action.arguments))
    if name == WEB_EXTRACTOR.name:
        return Action.tool_call(name, _extractor_arguments(action.arguments))
    raise ActionError(
        f"unknown tool {action.name!r}: the search domain has web_search and web_extractor"
    )


def _render(action: Action, scenario: SearchScenario) -> str:
    if action.kind == "text":
        return action.text or ""
    return json.dumps({"name": action.name, "arguments": action.arguments}, ensure_ascii=False)


def _parse_input(line: str, scenario: SearchScenario) -> Action:
    """``search q1 | q2``, ``open URL goal words``, ``answer TEXT``, a JSON tool call,
    or a tool name followed by JSON arguments."""
    stripped = line.strip()
    if stripped.startswith("{"):
        return Action.parse(stripped)
    word, _, rest = stripped.partition(" ")
    rest = rest.strip()
    if word == "answer":
        return Action.say(rest)
    if word == "search":
        queries = [q.strip() for q in rest.split("|") if q.strip()]
        if not queries:
            raise ActionError("type: search QUERY | ANOTHER QUERY ...")
        return Action.tool_call(WEB_SEARCH.name, {"queries": queries})
    if word == "open":
        url, _, goal = rest.partition(" ")
        if not url:
            raise ActionError("type: open URL, then optionally what to look for")
        args = {"url": url, **({"goal": goal.strip()} if goal.strip() else {})}
        return Action.tool_call(WEB_EXTRACTOR.name, args)
    if word in (WEB_SEARCH.name, WEB_EXTRACTOR.name, *ALIASES) and rest.startswith("{"):
        try:
            return Action.tool_call(word, loads_json(rest))
        except json.JSONDecodeError as exc:
            raise ActionError(f"arguments are not valid JSON: {exc}") from None
    raise ActionError(
        "type `search QUERY | QUERY`, `open URL GOAL`, `answer TEXT` or a JSON tool call"
    )


def _canonical(action: Action) -> Action | None:
    """The validated form of a tool call, or None (also for calls that do not validate,
    which the benchmark may still hand to the check)."""
    try:
        action = _validate(action, None)
    except ActionError:
        return None
    return action if action.kind == "tool_call" else None


# -- observations ----------------------------------------------------------------------


_ENTRY = re.compile(r"^\[(\d+)\]\s*(.*)$")
_FIELD = re.compile(r"^(URL|Snippet|Date)\s*:\s*(.*)$", re.IGNORECASE)
_NO_RESULTS = re.compile(r"^no results\b", re.IGNORECASE)
_ERROR = re.compile(r"^Error:\s*\S")
_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
_PAGE_TITLE = re.compile(r"^#{1,6}\s+\S")
_TAGS = ("<predicted_observation>", "</predicted_observation>", "<think>", "</think>")


@dataclass
class _Result:
    rank: int
    title: str
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class _Section:
    query: str
    lines: list[str] = field(default_factory=list)


def _norm(query: str) -> str:
    return " ".join(query.split()).casefold()


def _sections(lines: list[str]) -> tuple[list[str], list[_Section]]:
    """Split a results page at its headings; returns (lines before the first, sections)."""
    before, found = results_sections(lines)
    return before, [_Section(query, lines[1:]) for query, lines in found]


def _check_section(section: _Section, scenario: SearchScenario | None) -> list[str]:
    where = f'results for "{section.query}"'
    results: list[_Result] = []
    no_results = failed = False
    for raw in section.lines:
        line = raw.strip()
        if not line:
            continue
        entry, fld = _ENTRY.match(line), _FIELD.match(line)
        if entry:
            results.append(_Result(int(entry.group(1)), entry.group(2).strip()))
        elif results and fld:
            results[-1].fields.setdefault(fld.group(1).lower(), fld.group(2).strip())
        elif _NO_RESULTS.match(line):
            no_results = True
        elif not results and _ERROR.match(line):
            failed = True  # this one query failed (timeout, quota)
        elif not results:
            return [f"{where}: text before the first result: {line[:60]!r}"]
        # other lines inside a result: a snippet that wrapped onto more lines
    if failed and not results:
        return []
    if not results:
        return [] if no_results else [f"{where}: no results and no 'No results found' line"]
    problems = [f"{where}: both results and a 'No results' line"] if no_results else []
    ranks = [r.rank for r in results]
    if ranks != list(range(1, len(ranks) + 1)):
        problems.append(f"{where}: ranks {ranks} do not count from 1")
    limit = scenario.results_per_query if scenario is not None else None
    # No slack: the engine is asked for this many results and never returns more.
    if limit is not None and len(results) > limit:
        problems.append(f"{where}: {len(results)} results, more than results_per_query ({limit})")
    for result in results:
        problems.extend(_check_result(result, where, scenario))
    return problems


def _is_date(stamp: str) -> bool:
    """``YYYY-MM-DD``, or ``YYYY-MM`` / ``YYYY`` for pages dated only that precisely."""
    if not _DATE.match(stamp):
        return False
    try:
        dt.date.fromisoformat((stamp + "-01-01")[:10])
    except ValueError:
        return False
    return True


def _check_result(result: _Result, where: str, scenario: SearchScenario | None) -> list[str]:
    label = f"{where}: result [{result.rank}]"
    problems = [] if result.title else [f"{label} has no title"]
    url = result.fields.get("url")
    if url is None:
        problems.append(f"{label} has no URL line")
    elif _url_problem(url):
        problems.append(f"{label}: {_url_problem(url)}")
    stamp = result.fields.get("date")
    if stamp:
        if not _is_date(stamp):
            problems.append(f"{label}: date {stamp!r} is not YYYY-MM-DD")
        elif scenario is not None and stamp > scenario.current_date.isoformat()[: len(stamp)]:
            problems.append(f"{label} is dated {stamp}, after today ({scenario.current_date})")
    return problems


def _check_search(text: str, queries: list[str], scenario: SearchScenario | None) -> list[str]:
    lines = text.strip().splitlines()
    if _ERROR.match(lines[0].strip()):
        return []  # the engine failed as a whole
    before, sections = _sections(lines)
    if not sections:
        return ['no `## Results for "QUERY"` heading']
    problems = []
    if before:
        problems.append(f"text before the first results heading: {before[0].strip()[:60]!r}")
    if len(sections) != len(queries):
        problems.append(f"{len(sections)} results sections for {len(queries)} queries")
    for number, (section, query) in enumerate(zip(sections, queries, strict=False), 1):
        if _norm(section.query) != _norm(query):
            problems.append(f'section {number} is for "{section.query}", expected "{query}"')
    for section in sections:
        problems.extend(_check_section(section, scenario))
    return problems


def _check_page(text: str) -> list[str]:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if _ERROR.match(lines[0]):
        return []
    if RESULTS_HEADING.match(lines[0]):
        return ["search results where a page was expected"]
    if not _PAGE_TITLE.match(lines[0]):
        return [f"the page does not start with a markdown title heading: {lines[0][:60]!r}"]
    if len(lines) < 2:
        return ["the page has a title but no content"]
    return []


def _check(text: str, action: Action, scenario: SearchScenario | None) -> list[str]:
    if not text.strip():
        return ["empty observation"]
    call = _canonical(action)
    if call is None:
        return []  # a final answer or an invalid call: nothing to compare with
    problems = [f"stray tag {tag} in the observation" for tag in _TAGS if tag in text]
    if call.name == WEB_SEARCH.name:
        problems.extend(_check_search(text, call.arguments["queries"], scenario))
    else:
        problems.extend(_check_page(text))
    return problems


_ANY_URL = re.compile(r"https?://[^\s)\]>\"']+")
_FIELD_NAMES = ("url", "snippet", "date")


def _loose_entries(lines: list[str]) -> list[Result]:
    """The entries of a results list the model wrote loosely: each ``[n] title`` line and
    the lines after it, its URL wherever the entry names one (a ``URL:`` line first), its
    snippet from a ``Snippet:`` line or else the entry's other text; an entry that names
    no URL is no result and is left out."""
    blocks: list[tuple[str, list[str]]] = []
    for raw in lines:
        line = raw.strip()
        entry = _ENTRY.match(line)
        if entry:
            blocks.append((entry.group(2).strip(), []))
        elif blocks and line and not RESULTS_HEADING.match(line):
            blocks[-1][1].append(line)
    out = []
    for title, body in blocks:
        fields = {}
        for line in body:
            name, _, value = line.partition(":")
            if name.strip().lower() in _FIELD_NAMES and value.strip():
                fields.setdefault(name.strip().lower(), value.strip())
        urls = _ANY_URL.findall(fields.get("url", "") or " ".join([title, *body]))
        title = _ANY_URL.sub("", title).strip(" :-|") or (urls[0] if urls else "")
        if not urls or not title:
            continue
        other = [ln for ln in body if ln.partition(":")[0].strip().lower() not in _FIELD_NAMES]
        snippet = fields.get("snippet") or " ".join(" ".join(other).split())[:200]
        date = fields.get("date", "")
        out.append(Result(title, urls[0], snippet, date if _is_date(date) else ""))
    return out


def _repair(text: str, action: Action, scenario: SearchScenario | None) -> str | None:
    """Strict mode's mending of an answer in a layout the engine never writes, keeping
    what the model wrote where the layout allows. A results page: one section per query,
    in the call's order, with only the entries that name a URL, ranked from 1 and at most
    ``results_per_query`` (a section left with none says so, as the engine does). A page
    fetch answered with a results list: the first entry's title and snippet as the page.
    None when there is nothing to mend with."""
    call = _canonical(action)
    if call is None or not text.strip() or _ERROR.match(text.strip()):
        return None
    lines = text.strip().splitlines()
    if call.name == WEB_SEARCH.name:
        limit = scenario.results_per_query if scenario is not None else None
        _, sections = results_sections(lines)
        found: dict[str, list[Result]] = {}
        for query, section in sections:
            found.setdefault(_norm(query), _loose_entries(section[1:]))
        if not found:
            return None  # no results page at all: nothing of the model's to keep
        queries = call.arguments["queries"]
        return "\n\n".join(results_section(q, found.get(_norm(q), [])[:limit]) for q in queries)
    first_line = lines[0].strip()
    if _PAGE_TITLE.match(first_line) and not RESULTS_HEADING.match(first_line):
        return None  # already a page
    titles = [m.group(2).strip() for m in map(_ENTRY.match, lines) if m and m.group(2).strip()]
    if not titles:
        return None
    entries = _loose_entries(lines)
    title = entries[0].title if entries else _ANY_URL.sub("", titles[0]).strip(" :-|")
    body = (entries[0].snippet if entries else "").strip(" …") or title
    return f"# {title}\n\n{body}"


def _prefix(action: Action, scenario: SearchScenario, last_observation: str) -> str:
    """What the tool's output certainly starts with: the first results heading, or the
    title of a page the scenario describes."""
    if action.kind != "tool_call":
        return ""
    if action.name == WEB_SEARCH.name:
        return f'## Results for "{action.arguments["queries"][0]}"\n'
    known = scenario.document(action.arguments.get("url", ""))
    return f"# {known.title}\n" if known is not None else ""


# -- prompt ----------------------------------------------------------------------------


def _document_block(number: int, doc: SearchDocument) -> str:
    lines = [f"{number}. {doc.title}", f"   URL: {doc.url}"]
    if doc.date:
        lines.append(f"   Date: {doc.date.isoformat()}")
    if doc.snippet:
        lines.append(f"   Snippet: {doc.snippet}")
    if doc.content.strip():
        # Indented under its entry, so the page's own headings and code fences stay part
        # of the page instead of ending the prompt's list.
        lines.append("   Page text:")
        lines.extend(f"      {line}".rstrip() for line in doc.content.strip().splitlines())
    return "\n".join(lines)


def _slots(scenario: SearchScenario) -> dict[str, str]:
    facts = [f"- {fact}" for fact in scenario.facts]
    if scenario.notes:
        facts.append(f"- {scenario.notes}")
    documents = [_document_block(i, d) for i, d in enumerate(scenario.documents, 1)]
    return {
        "engine": scenario.engine,
        "current_date": scenario.current_date.isoformat(),
        "language": scenario.language,
        "results_per_query": str(scenario.results_per_query),
        "facts": "\n".join(facts) if facts else "- Nothing beyond the pages below.",
        "documents": "\n\n".join(documents) if documents else "None listed.",
    }


def _initial(scenario: SearchScenario) -> str:
    return (
        f"Web search via {scenario.engine}. Today is {scenario.current_date.isoformat()}. "
        f"Tools: web_search (1-{MAX_QUERIES} queries, up to {scenario.results_per_query} "
        "results each), web_extractor (open a URL, get the page as markdown)."
    )


def _default() -> dict[str, Any]:
    return {
        "engine": "Google",
        "current_date": "2025-06-02",
        "results_per_query": 5,
        "documents": [
            {
                "url": "https://www.python.org/downloads/release/python-3130/",
                "title": "Python Release Python 3.13.0 | Python.org",
                "date": "2024-10-07",
                "content": "Release date: Oct. 7, 2024\n\nNew in 3.13: a new interactive "
                "interpreter, an experimental free-threaded build and an experimental JIT.",
            },
        ],
        "facts": ["Python 3.13.3 is the latest release; 3.14 is in beta until October 2025."],
    }


DEMONSTRATIONS = (
    Demonstration(
        action='{"name": "web_search", "arguments": {"queries": ["node 22 release", '
        '"node 22 recall"]}}',
        observation='## Results for "node 22 release"\n'
        "[1] Node v22.0.0 (Current) | Node.js\n"
        "URL: https://nodejs.org/en/blog/release/v22.0.0\n"
        "Snippet: Node.js 22 was released on April 24, 2024.\n"
        "Date: 2024-04-24\n\n"
        "[2] Node.js - Wikipedia\n"
        "URL: https://en.wikipedia.org/wiki/Node.js\n"
        "Snippet: A cross-platform JavaScript runtime.\n\n"
        '## Results for "node 22 recall"\n'
        'No results found for "node 22 recall".',
        note="two queries",
    ),
    Demonstration(
        action='{"name": "web_extractor", "arguments": {"url": '
        '"https://en.wikipedia.org/wiki/Node.js", "goal": "first release"}}',
        observation="# Node.js\n\nNode.js is a cross-platform JavaScript runtime.\n\n"
        "## History\nRyan Dahl first released Node.js in 2009.",
    ),
)

SEARCH = register_domain(
    Domain(
        name="search",
        family="search",
        description="A web search engine and page fetcher for research agents.",
        scenario_model=SearchScenario,
        prompt_file=Path(__file__).parent / "prompts" / "search.md",
        validate_action=_validate,
        render_action=_render,
        initial_observation=_initial,
        check_observation=_check,
        repair=_repair,
        parse_input=_parse_input,
        prompt_slots=_slots,
        is_final=lambda action: action.kind == "text",
        observation_prefix=_prefix,
        default_scenario=_default,
        demonstrations=DEMONSTRATIONS,
        action_hint='{"name": "web_search", "arguments": {"queries": ["..."]}}, '
        '{"name": "web_extractor", "arguments": {"url": "https://..."}}, or text to answer',
        example_tasks=(
            "When was Python 3.13.0 released, and what are its main new features?",
            "Is the free-threaded build of Python 3.13 enabled by default?",
        ),
        agent_tools=lambda scenario: scenario.tools(),
        initial_state=lambda s: {"facts": list(s.facts)},
        ground=ground_search,
        observe=observe_search,
        state_schema=object_schema(required=["facts"], facts=STRING_LIST),
    )
)
