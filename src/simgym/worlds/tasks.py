"""Verifiable tasks from a fictional world, each with its ground truth.

Kinds (``TASK_KINDS``):

* ``lookup``: one attribute of one row ("What is the launch price (USD) of the phone X?");
* ``multi_hop``: follow one or two references first ("... of the maker of the phone X?");
* ``comparison``: which of two rows has the higher/lower (earlier/later) value;
* ``aggregation``: count, total or arg-max over the rows pointing at one row;
* ``table``: fill a table of every row pointing at one row, or of every row in one
  category (WideSearch style);
* ``update`` (MCP only): change one field of one record; judged on the final state.

A task carries its answer in ``metadata["answer"]`` (table tasks also ``metadata["table"]``,
a list of row dicts, and ``metadata["key_columns"]``; update tasks ``metadata["state_checks"]``,
JSON Pointer predicates over the final hidden state ``{table: {key: record}}``) and a reward
spec for :func:`simgym.rewards.build_reward` in ``metadata["reward"]`` (``exact``,
``table_f1`` or ``state``). Its scenario holds only
what the task needs (the relevant pages or records and a few neighbours), so a world of
hundreds of rows still fits a world-model prompt.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simgym.core.types import Task
from simgym.worlds.generate import World, WorldError, format_value
from simgym.worlds.render import (
    DEFAULT_MAX_CHARS,
    Ref,
    mcp_scenario,
    page_url,
    row_facts,
    search_scenario,
    updatable,
)
from simgym.worlds.themes import Attr, Entity, slug

TASK_KINDS = ("lookup", "multi_hop", "comparison", "aggregation", "table", "update")
READ_KINDS = TASK_KINDS[:-1]
DOMAINS = ("search", "mcp")
MAX_LISTED = 20  # rows a table or aggregation task may span


@dataclass
class Draft:
    """A task before its scenario is built: question, truth, and the rows it rests on."""

    kind: str
    instruction: str
    refs: list[Ref]
    facts: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


Maker = Callable[[World, random.Random, str], Draft | None]


def _hint(attr: Attr) -> str:
    """How to write the answer, so exact match can judge it."""
    if attr.kind in ("int",) or (attr.kind == "choice" and attr.numeric):
        return "Answer with the number only."
    if attr.kind == "float":
        places = "place" if attr.decimals == 1 else "places"
        return f"Answer with the number only, with {attr.decimals} decimal {places}."
    if attr.kind == "date":
        return "Answer with the date as YYYY-MM-DD."
    if attr.kind == "ref":
        return "Answer with the name only."
    return "Answer with the value only."


def _exact(answer: str) -> dict[str, Any]:
    return {"answer": answer, "reward": {"type": "exact"}}


def _readable(entity: Entity, domain: str) -> list[Attr]:
    """Attributes a question may ask for: not the key or name, and over MCP nothing
    derived (the MCP server holds raw records only)."""
    return [
        a
        for a in entity.attrs
        if a.kind not in ("key", "name") and not (domain == "mcp" and a.derive is not None)
    ]


def _pick_row(world: World, rng: random.Random, entity: Entity) -> dict[str, Any]:
    return rng.choice(world.tables[entity.table])


def _ref_of(world: World, entity: Entity, row: dict[str, Any]) -> Ref:
    return (entity.table, row[entity.key.name])


def _lookup(world: World, rng: random.Random, domain: str) -> Draft | None:
    entity = rng.choice(world.schema.entities)
    row = _pick_row(world, rng, entity)
    attrs = _readable(entity, domain)
    if not attrs:
        return None
    attr = rng.choice(attrs)
    refs = [_ref_of(world, entity, row)]
    if attr.kind == "ref" and attr.ref is not None:
        refs.append((attr.ref, row[attr.name]))
    answer = world.display(entity.table, attr, row[attr.name])
    return Draft(
        "lookup",
        f"What is the {attr.label} of the {entity.singular} {world.label(entity.table, row)}? "
        + _hint(attr),
        refs,
        row_facts(world, entity.table, row[entity.key.name], [attr.name]),
        _exact(answer),
    )


def _multi_hop(world: World, rng: random.Random, domain: str) -> Draft | None:
    entity = rng.choice([e for e in world.schema.entities if e.refs()])
    row = _pick_row(world, rng, entity)
    refs = [_ref_of(world, entity, row)]
    facts: list[str] = []
    phrase = f"the {entity.singular} {world.label(entity.table, row)}"
    current, current_row = entity, row
    for hop in range(2):
        if hop == 1 and (not current.refs() or rng.random() < 0.5):
            break
        via = rng.choice(current.refs())
        facts.extend(row_facts(world, current.table, current_row[current.key.name], [via.name]))
        current_row = world.row(via.ref or "", current_row[via.name])
        current = world.schema.entity(via.ref or "")
        refs.append(_ref_of(world, current, current_row))
        phrase = f"the {via.label} of {phrase}"
    attrs = _readable(current, domain)
    if not attrs:
        return None
    attr = rng.choice(attrs)
    if attr.kind == "ref" and attr.ref is not None:
        refs.append((attr.ref, current_row[attr.name]))
    facts.extend(row_facts(world, current.table, current_row[current.key.name], [attr.name]))
    answer = world.display(current.table, attr, current_row[attr.name])
    return Draft(
        "multi_hop",
        f"What is the {attr.label} of {phrase}? " + _hint(attr),
        refs,
        facts,
        _exact(answer),
    )


def _ordered(attr: Attr) -> bool:
    return attr.kind in ("int", "float", "date") or (attr.kind == "choice" and attr.numeric)


def _comparison(world: World, rng: random.Random, domain: str) -> Draft | None:
    entity = rng.choice(world.schema.entities)
    attrs = [a for a in _readable(entity, domain) if _ordered(a)]
    rows = world.tables[entity.table]
    if not attrs or len(rows) < 2:
        return None
    attr = rng.choice(attrs)
    first, second = rng.sample(rows, 2)
    if first[attr.name] == second[attr.name]:
        return None
    if attr.kind == "date":
        word, want_high = rng.choice((("later", True), ("earlier", False)))
    else:
        word, want_high = rng.choice((("higher", True), ("lower", False)))
    high = first if first[attr.name] > second[attr.name] else second
    winner = high if want_high else (second if high is first else first)
    a, b = world.label(entity.table, first), world.label(entity.table, second)
    return Draft(
        "comparison",
        f"Which {entity.singular} has the {word} {attr.label}: {a} or {b}? "
        f"Answer with the {entity.name.label} only.",
        [_ref_of(world, entity, first), _ref_of(world, entity, second)],
        [
            *row_facts(world, entity.table, first[entity.key.name], [attr.name]),
            *row_facts(world, entity.table, second[entity.key.name], [attr.name]),
        ],
        _exact(world.label(entity.table, winner)),
    )


def _relation(world: World, rng: random.Random, least: int):
    """A relation and a parent row with ``least``..MAX_LISTED children, or None."""
    child, attr, parent = rng.choice(world.schema.relations())
    view = world.view()
    candidates = [
        row
        for row in world.tables[parent.table]
        if least <= len(view.children(child.table, attr.name, row[parent.key.name])) <= MAX_LISTED
    ]
    if not candidates:
        return None
    row = rng.choice(candidates)
    return child, attr, parent, row, view.children(child.table, attr.name, row[parent.key.name])


def _aggregation(world: World, rng: random.Random, domain: str) -> Draft | None:
    found = _relation(world, rng, 2)
    if found is None:
        return None
    child, attr, parent, prow, rows = found
    pname = world.label(parent.table, prow)
    whose = f"whose {attr.label} is the {parent.singular} {pname}"
    refs = [_ref_of(world, parent, prow), *(_ref_of(world, child, r) for r in rows)]
    numbers = [a for a in child.attrs if a.kind in ("int", "float") and a.derive is None]
    op = rng.choice(("count", "sum", "max") if numbers else ("count",))
    if op == "count":
        facts = [f"{len(rows)} {child.plural} list {pname} as their {attr.label}."]
        return Draft(
            "aggregation",
            f"How many {child.plural} have the {parent.singular} {pname} as their "
            f"{attr.label}? Answer with the number only.",
            refs,
            facts,
            _exact(str(len(rows))),
        )
    value = rng.choice(numbers)
    facts = [
        fact
        for r in rows
        for fact in row_facts(world, child.table, r[child.key.name], [value.name])
    ]
    if op == "sum":
        total = sum(r[value.name] for r in rows)
        total = round(total, value.decimals) if value.kind == "float" else total
        return Draft(
            "aggregation",
            f"What is the total {value.label} of all {child.plural} {whose}? " + _hint(value),
            refs,
            facts,
            _exact(format_value(value, total)),
        )
    best = max(r[value.name] for r in rows)
    top = [r for r in rows if r[value.name] == best]
    if len(top) != 1:
        return None
    return Draft(
        "aggregation",
        f"Which {child.singular} {whose} has the highest {value.label}? "
        f"Answer with the {child.name.label} only.",
        refs,
        facts,
        _exact(world.label(child.table, top[0])),
    )


def _table(world: World, rng: random.Random, domain: str) -> Draft | None:
    """Every row pointing at one row (its page lists them), or every row with one value
    of a category (no page lists them: the agent must search them out)."""
    if rng.random() < 0.5:
        found = _relation(world, rng, 2)
        if found is None:
            return None
        child, attr, parent, prow, rows = found
        pname = world.label(parent.table, prow)
        which = f"whose {attr.label} is the {parent.singular} {pname}"
        refs = [_ref_of(world, parent, prow)]
        facts = [f"{len(rows)} {child.plural} list {pname} as their {attr.label}."]
        skip = attr.name
    else:
        found_filter = _category(world, rng, domain)
        if found_filter is None:
            return None
        child, attr, value, rows = found_filter
        which = f"whose {attr.label} is {value}"
        refs = []
        names = ", ".join(world.label(child.table, r) for r in rows)
        facts = [f"Exactly {len(rows)} {child.plural} have {attr.label} {value}: {names}."]
        skip = attr.name
    options = [a for a in _readable(child, domain) if a.name != skip]
    if not options:
        return None
    columns = [child.name, *rng.sample(options, min(len(options), rng.randint(2, 3)))]
    table = [{c.label: world.display(child.table, c, r[c.name]) for c in columns} for r in rows]
    labels = [c.label for c in columns]
    markdown = "\n".join(
        [
            "| " + " | ".join(labels) + " |",
            "|" + "---|" * len(labels),
            *("| " + " | ".join(r[label] for label in labels) + " |" for r in table),
        ]
    )
    return Draft(
        "table",
        f"List every {child.singular} {which}. Answer with a markdown table with exactly "
        f"these columns: {', '.join(labels)}; one row per {child.singular}. Write numbers as "
        "plain digits and dates as YYYY-MM-DD.",
        [*refs, *(_ref_of(world, child, r) for r in rows)],
        facts,
        {
            "answer": markdown,
            "table": table,
            "key_columns": [child.name.label],
            "reward": {"type": "table_f1"},
        },
    )


def _category(world: World, rng: random.Random, domain: str):
    """A table, a category column, one of its values and the 2..MAX_LISTED rows having it."""
    entity = rng.choice(world.schema.entities)
    attrs = [a for a in _readable(entity, domain) if a.kind == "choice"]
    if not attrs:
        return None
    attr = rng.choice(attrs)
    value = rng.choice(attr.choices)
    rows = [r for r in world.tables[entity.table] if r[attr.name] == value]
    if not 2 <= len(rows) <= MAX_LISTED:
        return None
    return entity, attr, format_value(attr, value), rows


def _new_value(world: World, rng: random.Random, entity: Entity, attr: Attr, current: Any) -> Any:
    for _ in range(20):
        if attr.kind == "int":
            value: Any = rng.randint(attr.lo, attr.hi)
        elif attr.kind == "float":
            value = round(rng.uniform(attr.lo, attr.hi), attr.decimals)
        elif attr.kind == "choice":
            value = rng.choice(attr.choices)
        elif attr.unique:
            return None  # a new unique text would need a new name; not worth the risk
        else:  # text: another value the world already uses in this column
            value = rng.choice(world.tables[entity.table])[attr.name]
        if value != current:
            return value
    return None


def _update(world: World, rng: random.Random, domain: str) -> Draft | None:
    entity = rng.choice([e for e in world.schema.entities if updatable(e)])
    row = _pick_row(world, rng, entity)
    attr = rng.choice(updatable(entity))
    value = _new_value(world, rng, entity, attr, row[attr.name])
    if value is None:
        return None
    key = row[entity.key.name]
    path = f"/{entity.table}/{key}/{attr.name}"
    return Draft(
        "update",
        f"Set the {attr.label} of the {entity.singular} {world.label(entity.table, row)} to "
        f"{format_value(attr, value)}, then say what you changed.",
        [(entity.table, key)],
        [],
        {
            # the check inline, and also where a plain {"type": "state"} reward looks
            "reward": {"type": "state", "checks": [{"path": path, "equals": value}]},
            "state_checks": [{"path": path, "equals": value}],
        },
    )


MAKERS: dict[str, Maker] = {
    "lookup": _lookup,
    "multi_hop": _multi_hop,
    "comparison": _comparison,
    "aggregation": _aggregation,
    "table": _table,
    "update": _update,
}


def generate_tasks(
    world: World,
    count: int = 50,
    *,
    domain: str = "search",
    kinds: Sequence[str] | None = None,
    seed: int = 0,
    neighbours: int = 2,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[Task]:
    """``count`` distinct tasks, the kinds in turn, each with a scenario for ``domain``
    ("search": the relevant pages plus ``neighbours`` other pages of the same kinds;
    "mcp": the relevant tables' records, the relevant rows plus ``neighbours`` others per
    table). Deterministic in (world, domain, kinds, seed)."""
    if domain not in DOMAINS:
        raise WorldError(f"world tasks are for domains {', '.join(DOMAINS)}, not {domain!r}")
    kinds = list(kinds) if kinds else list(TASK_KINDS if domain == "mcp" else READ_KINDS)
    unknown = [k for k in kinds if k not in TASK_KINDS]
    if unknown:
        raise WorldError(f"unknown task kinds {unknown}; known: {', '.join(TASK_KINDS)}")
    if domain == "search" and "update" in kinds:
        raise WorldError("update tasks need the mcp domain (search pages cannot be changed)")
    rng = random.Random(f"{world.theme}:{world.seed}:tasks:{domain}:{seed}")
    tasks: list[Task] = []
    seen: set[str] = set()
    for number in range(count):
        kind = kinds[number % len(kinds)]
        task_id = f"{world.theme}-{world.seed}-{domain}-{seed}-{number:03d}-{kind}"
        for _ in range(200):
            draft = MAKERS[kind](world, rng, domain)
            if draft is None or draft.instruction in seen:
                continue
            try:
                scenario = _scenario(world, draft, domain, rng, neighbours, max_chars, task_id)
            except WorldError:
                continue  # too big for one prompt; draw another
            seen.add(draft.instruction)
            tasks.append(_task(world, draft, domain, scenario, task_id))
            break
        else:
            raise WorldError(f"could not make a distinct {kind} task for {world.title}")
    return tasks


def _scenario(
    world: World,
    draft: Draft,
    domain: str,
    rng: random.Random,
    neighbours: int,
    max_chars: int,
    task_id: str,
) -> dict[str, Any]:
    if domain == "mcp":
        tables = [
            e.table for e in world.schema.entities if any(t == e.table for t, _ in draft.refs)
        ]
        return mcp_scenario(
            world, tables, draft.refs, extra_rows=neighbours, seed=task_id, max_chars=max_chars
        )
    extra: list[Ref] = []
    for table in sorted({t for t, _ in draft.refs}):
        entity = world.schema.entity(table)
        others = [
            (table, r[entity.key.name])
            for r in world.tables[table]
            if (table, r[entity.key.name]) not in draft.refs
        ]
        extra.extend(rng.sample(others, min(neighbours, len(others))))
    return search_scenario(world, [*draft.refs, *extra], facts=draft.facts, max_chars=max_chars)


def _task(world: World, draft: Draft, domain: str, scenario: dict[str, Any], task_id: str) -> Task:
    metadata = {
        **draft.metadata,
        "kind": draft.kind,
        "world": {"theme": world.theme, "seed": world.seed, "name": world.name},
        "refs": [list(ref) for ref in draft.refs],
    }
    return Task(
        id=task_id,
        instruction=draft.instruction,
        domain=domain,
        scenario=scenario,
        metadata=metadata,
    )


def oracle_actions(world: World, task: Task) -> list[Any]:
    """A reference solution as scripted-agent actions: open every relevant page (search)
    or fetch every relevant record (MCP), make the change an update task asks for, then
    give the answer. Against a faithful world it earns the full reward."""
    refs = [(table, key) for table, key in task.metadata["refs"]]
    if task.domain == "search":
        first = world.label(refs[0][0], world.row(*refs[0]))
        actions: list[Any] = [{"name": "web_search", "arguments": {"queries": [first]}}]
        actions.extend(
            {"name": "web_extractor", "arguments": {"url": page_url(world, t, world.row(t, k))}}
            for t, k in refs
        )
    else:
        actions = []
        for table, key in refs:
            entity = world.schema.entity(table)
            noun = slug(entity.singular).replace("-", "_")
            actions.append({"name": f"get_{noun}", "arguments": {entity.key.name: key}})
        for check in task.metadata.get("state_checks", []):
            _, table, key, field_name = check["path"].split("/")
            entity = world.schema.entity(table)
            noun = slug(entity.singular).replace("-", "_")
            changes = {field_name: check["equals"]}
            actions.append(
                {"name": f"update_{noun}", "arguments": {entity.key.name: key, "changes": changes}}
            )
    answer = task.metadata.get("answer", "Done: the change is made.")
    return [*actions, {"answer": answer}]


def task_lines(tasks: Sequence[Task], world: World | None = None) -> str:
    """Tasks as JSONL text, one task a line, as ``simgym run`` reads them; with ``world``,
    each line also holds :func:`oracle_actions` (``simgym run --agent scripted`` plays
    them; other agents ignore them)."""
    lines = []
    for task in tasks:
        data = task.model_dump(mode="json", exclude_none=True)
        if world is not None:
            data["actions"] = oracle_actions(world, task)
        lines.append(json.dumps(data, ensure_ascii=False) + "\n")
    return "".join(lines)
