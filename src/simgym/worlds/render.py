"""A fictional world as the web and as an MCP server.

Pages: every row becomes one markdown page on the world's site: a title heading, a
summary sentence, a ``## Key facts`` table with every attribute (references as links to
the target's page) and, for each relation pointing at the row, a list of the rows that
point at it (a maker's phones). Pages state nothing the world does not hold;
:func:`check_pages` reads the facts back from the markdown and compares.

Search: :func:`search_scenario` turns a chosen set of pages (a task's relevant rows and
a few neighbours) into a :class:`~simgym.domains.search.SearchScenario` whose facts and
documents tell the simulated engine what is true, sized to fit a world-model prompt.

MCP: :func:`mcp_scenario` serves the tables behind list/search/get/update tools, with the
rows as the server's hidden state, keyed ``{table: {key: row}}`` so that a JSON Merge
Patch can change one field of one record.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from simgym.core.contract import action_text_of
from simgym.domains.mcp import MCPScenario
from simgym.domains.search import SearchDocument, SearchScenario
from simgym.worlds.generate import World, WorldError
from simgym.worlds.themes import Attr, Entity, slug

Ref = tuple[str, Any]  # (table, key) of one row
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")

DEFAULT_MAX_CHARS = 60_000  # about 15k tokens of world in one prompt


# -- pages ----------------------------------------------------------------------------


def page_url(world: World, table: str, row: dict[str, Any]) -> str:
    return f"{world.base_url}/{table}/{slug(world.label(table, row))}"


def _values(world: World, entity: Entity, row: dict[str, Any]) -> dict[str, str]:
    return {a.name: world.display(entity.table, a, row[a.name]) for a in entity.attrs}


def _cell(world: World, attr: Attr, value: Any, shown: str) -> str:
    if attr.kind == "ref" and attr.ref is not None:
        target = world.row(attr.ref, value)
        return f"[{shown}]({page_url(world, attr.ref, target)})"
    return shown


def render_page(world: World, table: str, key: Any) -> SearchDocument:
    """The page of one row."""
    entity = world.schema.entity(table)
    row = world.row(table, key)
    shown = _values(world, entity, row)
    label = world.label(table, row)
    lines = [entity.summary.format(**shown), "", "## Key facts", "| Field | Value |", "|---|---|"]
    lines.extend(
        f"| {a.label} | {_cell(world, a, row[a.name], shown[a.name])} |" for a in entity.attrs
    )
    view = world.view()
    for child, attr, parent in world.schema.relations():
        if parent.table != table:
            continue
        rows = view.children(child.table, attr.name, row[entity.key.name])
        lines.extend(["", f"## {child.plural.capitalize()} ({attr.label})"])
        lines.append(
            f"{len(rows)} {child.plural if len(rows) != 1 else child.singular} list "
            f"{label} as their {attr.label}:"
        )
        for item in rows:
            lines.append(_list_item(world, child, item))
    summary = lines[0]
    content = "\n".join(lines)
    # Last updated recently, and never before the newest date the page states.
    rng = random.Random(f"{world.theme}:{world.seed}:page:{table}:{key}")
    updated = (world.today - dt.timedelta(days=rng.randint(1, 90))).isoformat()
    updated = max([updated, *_DATE.findall(content)])
    return SearchDocument(
        url=page_url(world, table, row),
        title=f"{label} – {entity.singular.capitalize()} | {world.name}",
        date=dt.date.fromisoformat(updated),
        snippet=summary if len(summary) <= 240 else summary[:237] + "...",
        content=content,
    )


def _list_item(world: World, entity: Entity, row: dict[str, Any]) -> str:
    item = f"- [{world.label(entity.table, row)}]({page_url(world, entity.table, row)})"
    if entity.brief is not None:
        attr = entity.attr(entity.brief)
        item += f" — {attr.label}: {world.display(entity.table, attr, row[attr.name])}"
    return item


def render_pages(world: World, refs: Iterable[Ref] | None = None) -> list[SearchDocument]:
    """Pages of ``refs`` (every row when None), in the order given."""
    if refs is None:
        refs = all_refs(world)
    return [render_page(world, table, key) for table, key in refs]


def all_refs(world: World) -> list[Ref]:
    return [
        (entity.table, row[entity.key.name])
        for entity in world.schema.entities
        for row in world.tables[entity.table]
    ]


def row_facts(world: World, table: str, key: Any, attrs: Sequence[str] | None = None) -> list[str]:
    """Plain statements about one row, one per attribute (``attrs``: only these)."""
    entity = world.schema.entity(table)
    row = world.row(table, key)
    label = world.label(table, row)
    chosen = [entity.attr(a) for a in attrs] if attrs is not None else list(entity.attrs)
    return [
        f"The {entity.singular} {label}: {a.label} is {world.display(table, a, row[a.name])}."
        for a in chosen
        if a.name != entity.name.name
    ]


# -- reading pages back ---------------------------------------------------------------

_LINK = re.compile(r"\[([^\]]*)\]\(([^)]*)\)")
_ROW = re.compile(r"^\|\s*(.*?)\s*\|\s*(.*?)\s*\|$")
_NUMBER = re.compile(r"\d+(?:[.-]\d+)*")


def read_key_facts(content: str) -> dict[str, str]:
    """The ``## Key facts`` table of a page as {field label: value text}, links unwrapped."""
    facts: dict[str, str] = {}
    inside = False
    for line in content.splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## Key facts"
            continue
        match = _ROW.match(line.strip()) if inside else None
        if match and match.group(1) not in ("Field", "---"):
            facts[match.group(1)] = _LINK.sub(r"\1", match.group(2))
    return facts


def read_lists(content: str) -> dict[str, list[tuple[str, str]]]:
    """The relation sections of a page: {heading: [(linked name, url), ...]}."""
    lists: dict[str, list[tuple[str, str]]] = {}
    heading = None
    for line in content.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
            if heading != "Key facts":
                lists[heading] = []
        elif heading in lists and line.startswith("- "):
            match = _LINK.search(line)
            if match:
                lists[heading].append((match.group(1), match.group(2)))
    return lists


def check_pages(world: World, refs: Iterable[Ref] | None = None) -> list[str]:
    """Render pages and read them back: every key fact, listed row and number in the
    summary must be the world's, and no page may predate what it states; one line per
    disagreement."""
    problems: list[str] = []
    urls: dict[str, Ref] = {}
    view = world.view()
    for table, key in refs if refs is not None else all_refs(world):
        entity = world.schema.entity(table)
        row = world.row(table, key)
        page = render_page(world, table, key)
        where = f"page of {table}[{key}]"
        if page.url in urls:
            problems.append(f"{where}: URL {page.url} also used by {urls[page.url]}")
        urls[page.url] = (table, key)
        shown = _values(world, entity, row)
        expected = {a.label: shown[a.name] for a in entity.attrs}
        found = read_key_facts(page.content)
        if found != expected:
            wrong = sorted(
                k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k)
            )
            problems.append(f"{where}: key facts disagree on {wrong}")
        allowed = {n for value in shown.values() for n in _NUMBER.findall(value)}
        stray = [n for n in _NUMBER.findall(page.content.split("\n")[0]) if n not in allowed]
        if stray:
            problems.append(f"{where}: the summary states {stray}, not in the row")
        stated = _DATE.findall(page.content)
        if (
            page.date is None
            or page.date > world.today
            or any(d > page.date.isoformat() for d in stated)
        ):
            problems.append(f"{where}: dated {page.date}, before a date it states or after today")
        lists = read_lists(page.content)
        for child, attr, parent in world.schema.relations():
            if parent.table != table:
                continue
            heading = f"{child.plural.capitalize()} ({attr.label})"
            rows = view.children(child.table, attr.name, row[entity.key.name])
            want = [(world.label(child.table, r), page_url(world, child.table, r)) for r in rows]
            if lists.get(heading) != want:
                problems.append(f"{where}: the {heading} list differs from the world")
    return problems


# -- search ---------------------------------------------------------------------------


def world_facts(world: World) -> list[str]:
    """Statements about the world as a whole (what it is, how many rows of each kind)."""
    counts = ", ".join(f"{len(world.tables[e.table])} {e.plural}" for e in world.schema.entities)
    return [
        f"{world.base_url} is {world.description}",
        f"It has one page per record: {counts}. Today is {world.today.isoformat()}.",
    ]


def search_scenario(
    world: World,
    refs: Iterable[Ref] | None = None,
    *,
    facts: Sequence[str] = (),
    results_per_query: int = 8,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> dict[str, Any]:
    """A search scenario holding the pages of ``refs`` (every row when None) and the
    given facts; raises :class:`WorldError` when it would exceed ``max_chars`` of text."""
    refs = list(refs) if refs is not None else all_refs(world)
    documents = render_pages(world, _unique(refs))
    host = world.base_url.split("://", 1)[1]
    scenario = {
        "engine": "Google",
        "current_date": world.today.isoformat(),
        "results_per_query": results_per_query,
        "language": "en",
        "facts": [*world_facts(world), *facts],
        "documents": [d.model_dump(mode="json", exclude_defaults=True) for d in documents],
        "notes": (
            f"Everything about {world.name} and its records is fictional and exists only on "
            f"{host}. Searches about these names find the listed pages (and other {host} "
            "pages that agree with them); no other site knows them, and no page gives "
            "other values for them."
        ),
    }
    SearchScenario.model_validate(scenario)  # a broken page fails here, not in an episode
    size = len(json.dumps(scenario, ensure_ascii=False))
    if size > max_chars:
        raise WorldError(
            f"the search scenario holds {len(documents)} pages, {size} characters, more than "
            f"max_chars={max_chars}; choose fewer pages (a task's relevant rows) or raise "
            "the limit"
        )
    return scenario


def _unique(refs: Iterable[Ref]) -> list[Ref]:
    seen: set[Ref] = set()
    kept = []
    for ref in refs:
        if ref not in seen:
            seen.add(ref)
            kept.append(ref)
    return kept


# -- MCP ------------------------------------------------------------------------------


def _schema(attr: Attr) -> dict[str, Any]:
    if attr.kind == "choice":
        return {"enum": list(attr.choices)}
    if attr.kind in ("int", "float"):
        schema: dict[str, Any] = {"type": "integer" if attr.kind == "int" else "number"}
        if attr.lo is not None:
            schema["minimum"] = attr.lo
        if attr.hi is not None:
            schema["maximum"] = attr.hi
        return schema
    if attr.kind == "date":
        return {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
    return {"type": "string", "minLength": 1}


def updatable(entity: Entity) -> list[Attr]:
    """Attributes an update tool may change: plain values no rule or total depends on."""
    return [
        a
        for a in entity.attrs
        if a.mutable and a.derive is None and a.kind not in ("key", "name", "ref")
    ]


def mcp_tools(world: World, tables: Sequence[str]) -> list[dict[str, Any]]:
    """list/search/get (and update, where something may change) tools per table."""
    tools: list[dict[str, Any]] = []
    for table in tables:
        entity = world.schema.entity(table)
        key = entity.key
        filters = {
            a.name: {
                "type": "string",
                "description": f"only {entity.plural} whose {a.label} has this "
                f"{world.schema.entity(a.ref or '').key.label}",
            }
            for a in entity.refs()
        }
        filters["limit"] = {"type": "integer", "minimum": 1, "maximum": 50, "default": 20}
        filters["offset"] = {"type": "integer", "minimum": 0, "default": 0}
        tools.append(
            _tool(
                f"list_{table}",
                f"List {entity.plural}, {filters['limit']['default']} per page, optionally "
                "filtered; returns the records and the total count.",
                filters,
                [],
            )
        )
        if entity.name is not key:
            tools.append(
                _tool(
                    f"search_{table}",
                    f"Find {entity.plural} whose {entity.name.label} contains the query "
                    "(case-insensitive).",
                    {"query": {"type": "string", "minLength": 1}},
                    ["query"],
                )
            )
        tools.append(
            _tool(
                f"get_{slug(entity.singular).replace('-', '_')}",
                f"Fetch one {entity.singular} by its {key.label}.",
                {key.name: {"type": "string", "description": key.label}},
                [key.name],
            )
        )
        changeable = updatable(entity)
        if changeable:
            changes = {
                "type": "object",
                "properties": {a.name: {**_schema(a), "description": a.label} for a in changeable},
                "additionalProperties": False,
                "minProperties": 1,
            }
            tools.append(
                _tool(
                    f"update_{slug(entity.singular).replace('-', '_')}",
                    f"Change fields of one {entity.singular}; returns the updated record.",
                    {key.name: {"type": "string"}, "changes": changes},
                    [key.name, "changes"],
                )
            )
    return tools


def _tool(
    name: str, description: str, props: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    return {"name": name, "description": description, "parameters": parameters}


def mcp_state(
    world: World,
    tables: Sequence[str] | None = None,
    focus: Iterable[Ref] = (),
    *,
    extra_rows: int | None = None,
    seed: int | str = 0,
) -> dict[str, dict[str, dict[str, Any]]]:
    """The server's records, ``{table: {key: row}}`` without derived columns (the server
    computes nothing the agent could not). With ``extra_rows``, each table holds the
    ``focus`` rows, up to that many others drawn with ``seed``, and every row they refer
    to in the tables served, so no reference dangles."""
    schema = world.schema
    tables = list(tables) if tables is not None else [e.table for e in schema.entities]
    for table in tables:
        schema.entity(table)  # an unknown table fails here
    if extra_rows is None:
        chosen = {t: {r[schema.entity(t).key.name] for r in world.tables[t]} for t in tables}
    else:
        chosen = _choose_rows(world, tables, list(focus), extra_rows, seed)
    state: dict[str, dict[str, dict[str, Any]]] = {}
    for table in tables:
        entity = schema.entity(table)
        keep = [a.name for a in entity.attrs if a.derive is None]
        state[table] = {
            row[entity.key.name]: {name: row[name] for name in keep}
            for row in world.tables[table]
            if row[entity.key.name] in chosen[table]
        }
    return state


def _choose_rows(
    world: World, tables: list[str], focus: list[Ref], extra: int, seed: int | str
) -> dict[str, set[Any]]:
    schema = world.schema
    rng = random.Random(f"{world.theme}:{world.seed}:mcp:{seed}")
    chosen: dict[str, set[Any]] = {t: set() for t in tables}
    for table, key in focus:
        if table in chosen:
            chosen[table].add(key)
    for table in tables:
        key = schema.entity(table).key.name
        others = [r[key] for r in world.tables[table] if r[key] not in chosen[table]]
        chosen[table].update(rng.sample(others, min(extra, len(others))))
    # Close under references, parents after children (tables refer only to earlier ones).
    for entity in reversed(schema.entities):
        if entity.table not in chosen:
            continue
        for attr in entity.refs():
            if attr.ref in chosen:
                for key in sorted(chosen[entity.table]):
                    chosen[attr.ref].add(world.row(entity.table, key)[attr.name])
    return chosen


def mcp_scenario(
    world: World,
    tables: Sequence[str] | None = None,
    focus: Iterable[Ref] = (),
    *,
    extra_rows: int | None = None,
    seed: int | str = 0,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> dict[str, Any]:
    """An MCP scenario serving ``tables`` (all when None); see :func:`mcp_state` for
    which rows. Raises :class:`WorldError` past ``max_chars`` of state and tools."""
    tables = list(tables) if tables is not None else [e.table for e in world.schema.entities]
    state = mcp_state(world, tables, focus, extra_rows=extra_rows, seed=seed)
    keys = ", ".join(f"{world.schema.entity(t).key.label} for {t}" for t in tables)
    scenario = {
        "server_name": f"{slug(world.name)}-records",
        "description": f"Records of {world.description} Records are keyed by ID ({keys}); "
        f"list tools page through results; today is {world.today.isoformat()}.",
        "tools": mcp_tools(world, tables),
        "state": state,
        "output_format": "json",
    }
    MCPScenario.model_validate(scenario)
    size = len(json.dumps(scenario, ensure_ascii=False))
    if size > max_chars:
        rows = sum(len(v) for v in state.values())
        raise WorldError(
            f"the MCP scenario holds {rows} records, {size} characters, more than "
            f"max_chars={max_chars}; serve fewer tables, sample rows (extra_rows) or raise "
            "the limit"
        )
    return scenario


# -- a rules-based world model --------------------------------------------------------


def world_oracle(world: World, *, results_per_query: int = 5) -> Callable[[list[Any]], str]:
    """A deterministic world model for one world (wrap it in ``simgym.FunctionWorldModel``):
    it answers ``web_search``/``web_extractor`` from the world's pages and the MCP tools of
    :func:`mcp_tools` from its records, with no model at all. Updates come back as the
    changed record plus a ``<state_update>`` merge patch, so the hidden state follows them.
    For tests, baselines and checking that a task's answer can be reached."""
    pages: dict[str, SearchDocument] = {}
    by_url: dict[str, SearchDocument] = {}

    def page_list() -> list[SearchDocument]:
        if not pages:  # rendered on first use: a few hundred pages take ~0.1 s
            for table, key in all_refs(world):
                doc = render_page(world, table, key)
                pages[f"{table}:{key}"] = doc
                by_url[doc.url] = doc
        return list(pages.values())

    def predict(messages: list[Any]) -> str:
        call = json.loads(action_text_of(messages[-1]["content"]))
        name, args = call.get("name", ""), call.get("arguments", {})
        if name == "web_search":
            text = "\n\n".join(
                _results(page_list(), q, results_per_query) for q in args.get("queries", [])
            )
        elif name == "web_extractor":
            page_list()
            doc = by_url.get(args.get("url", "").strip())
            text = (
                f"# {doc.title}\n\n{doc.content}"
                if doc
                else f"Error: 404 Not Found for URL {args.get('url')}"
            )
        else:
            text, patch = _tool_result(world, name, args)
            tail = f"\n<state_update>{json.dumps(patch)}</state_update>" if patch else ""
            return f"<predicted_observation>{text}</predicted_observation>{tail}"
        return f"<predicted_observation>\n{text}\n</predicted_observation>"

    return predict


def _results(docs: list[SearchDocument], query: str, limit: int) -> str:
    words = [w for w in re.findall(r"[a-z0-9]+", query.lower()) if len(w) > 1]
    scored = []
    for position, doc in enumerate(docs):
        haystack = f"{doc.title} {doc.snippet}".lower()
        score = sum(2 if w in doc.title.lower() else 1 for w in words if w in haystack)
        if score:
            scored.append((-score, position, doc))
    lines = [f'## Results for "{query}"']
    if not scored:
        return lines[0] + f'\nNo results found for "{query}".'
    for rank, (_, _, doc) in enumerate(sorted(scored)[:limit], 1):
        lines.extend([f"[{rank}] {doc.title}", f"URL: {doc.url}", f"Snippet: {doc.snippet}"])
        if doc.date:
            lines.append(f"Date: {doc.date.isoformat()}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _record(world: World, table: str, row: dict[str, Any]) -> dict[str, Any]:
    entity = world.schema.entity(table)
    return {a.name: row[a.name] for a in entity.attrs if a.derive is None}


def _tool_result(world: World, name: str, args: dict[str, Any]) -> tuple[str, dict | None]:
    """The JSON an MCP tool of :func:`mcp_tools` returns, and a state patch if it changes
    anything."""
    verb, _, noun = name.partition("_")
    for entity in world.schema.entities:
        singular = slug(entity.singular).replace("-", "_")
        key = entity.key.name
        if verb == "list" and noun == entity.table:
            rows = [
                r
                for r in world.tables[entity.table]
                if all(r[a.name] == args[a.name] for a in entity.refs() if a.name in args)
            ]
            offset, limit = int(args.get("offset", 0)), int(args.get("limit", 20))
            chosen = [_record(world, entity.table, r) for r in rows[offset : offset + limit]]
            return json.dumps({entity.table: chosen, "total": len(rows)}), None
        if verb == "search" and noun == entity.table:
            query = str(args.get("query", "")).lower()
            hits = [
                _record(world, entity.table, r)
                for r in world.tables[entity.table]
                if query in str(r[entity.name.name]).lower()
            ]
            return json.dumps({entity.table: hits[:20], "total": len(hits)}), None
        if verb in ("get", "update") and noun == singular:
            row = world.view().get(entity.table, args.get(key))
            if row is None:
                missing = {"code": 404, "message": f"{entity.singular} {args.get(key)} not found"}
                return json.dumps({"error": missing}), None
            record = _record(world, entity.table, row)
            if verb == "get":
                return json.dumps(record), None
            changes = dict(args.get("changes", {}))
            record.update(changes)
            return json.dumps(record), {entity.table: {row[key]: changes}}
    return json.dumps({"error": {"code": 404, "message": f"no tool {name}"}}), None
