"""The twin: a business world (``simgym logs import``) served as an MCP scenario.

:func:`world_scenario` reads a business-world folder and returns an mcp scenario: one tool
per observed operation (``POST /loans/{loan_id}/approve`` -> ``post_loans_loan_id_approve``)
whose parameters are the path parameters plus the inferred request schema (plus ``actor``
and ``role`` when the logs had roles), whose description tells the observed statuses and
the mined permission, life-cycle and required-field rules in plain words; the entities'
masked records as the server's state, one collection per object type; and ``tool_map``
bindings read from method and route, so the mcp grounding serves records from state:

* ``GET /x/{id}`` -> get, ``GET /x`` -> list, ``POST /x`` -> create,
* ``POST|PUT|PATCH /x/{id}`` and ``POST /x/{id}/<verb>`` -> update by ``id``
  (``POST /kyc/{customer_id}``, whose parameter names another type, creates),
* ``DELETE /x/{id}`` -> delete; anything else (no matching collection) -> none.

Operations never answered with a success and only with 404/405 (routes the service does
not have) become no tool; the server description names them.

The rules mined into ``behaviour.json`` (:mod:`simgym.logs.behaviour`) ride on the
bindings and are enforced from the state (:mod:`simgym.domains.mcp_rules`): a call that
breaks one gets the answer the real system gave; the descriptions repeat them in words.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simgym.core.errors import SimgymError
from simgym.domains.mcp_ground import collection_noun, singular
from simgym.logs.model import key_type

WORLD_FILES = ("interface.json", "entities.json", "manifest.json")
# The top-level keys each file of a world folder may hold (simgym.logs.world writes them):
# a hand-edited folder with a misspelt key is refused, not half read.
WORLD_KEYS: dict[str, frozenset[str]] = {
    "interface.json": frozenset({"version", "operations", "screens"}),
    "entities.json": frozenset({"version", "types"}),
    "manifest.json": frozenset(
        {
            "version",
            "created_at",
            "sources",
            "counts",
            "skipped",
            "masking",
            "files",
            "behaviour",
            "coverage",
        }
    ),
    "rules.json": frozenset(
        {"version", "event_flows", "life_cycles", "performance", "permissions", "required_fields"}
    ),
    "behaviour.json": frozenset({"version", "tools"}),
}
BEHAVIOUR_FILE = "behaviour.json"  # written by simgym.logs.behaviour
CONTEXT_ARGS = ("actor", "role")
_PARAM = re.compile(r"^\{([^}]*)\}$")
_DROP_KEYS = frozenset({"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"})
NOT_A_ROUTE = frozenset({"404", "405"})


class WorldError(SimgymError):
    """A folder that is not a business world."""


# -- reading the folder -----------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise WorldError(f"{path}: not readable as JSON (nested too deeply)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WorldError(f"{path}: not readable as JSON ({exc})") from None


def _read_world_file(path: Path) -> Any:
    """One file of a world folder, its top-level keys checked against :data:`WORLD_KEYS`."""
    data = _read_json(path)
    allowed = WORLD_KEYS.get(path.name)
    if allowed is not None and isinstance(data, dict):
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise WorldError(
                f"{path}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"a world's {path.name} holds {', '.join(sorted(allowed))}"
            )
    return data


def load_world(world_dir: str | Path) -> dict[str, Any]:
    """The folder's files as data: interface, entities, rules, manifest, roles."""
    root = Path(world_dir)
    if not root.is_dir():
        raise WorldError(f"business world not found: {root} is not a folder")
    missing = [name for name in WORLD_FILES if not (root / name).is_file()]
    if missing:
        raise WorldError(
            f"{root} is not a business world (no {', '.join(missing)}); build one with "
            "`simgym logs import FILE --out DIR`"
        )
    world = {name.removesuffix(".json"): _read_world_file(root / name) for name in WORLD_FILES}
    rules = root / "rules.json"
    world["rules"] = _read_world_file(rules) if rules.is_file() else {}
    if not isinstance(world["interface"], dict) or not isinstance(
        world["interface"].get("operations"), list
    ):
        raise WorldError(f"{root}/interface.json has no list of operations")
    if not isinstance(world["entities"], dict) or not isinstance(
        world["entities"].get("types", {}), dict
    ):
        raise WorldError(f"{root}/entities.json has no mapping of types")
    world["roles"] = _roles(root / "sessions.jsonl", world["rules"])
    world["name"] = root.resolve().name
    return world


def _roles(sessions: Path, rules: dict[str, Any]) -> list[str]:
    """Roles the logs name: of the callers in the sessions and in the permission rules."""
    seen: set[str] = set()
    for rule in rules.get("permissions", []) or []:
        seen.add(str(rule.get("role", "")))
        seen.update(str(r) for r in rule.get("allowed_roles", []) or [])
    if sessions.is_file():
        for _, records in read_sessions(sessions):
            seen.update(r["role"] for r in records if isinstance(r.get("role"), str))
    return sorted(r for r in seen if r and r != "(none)")


def read_sessions(path: str | Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(session, records)`` per line of a world's ``sessions.jsonl`` (bad lines skipped)."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                data = json.loads(line)
            except (json.JSONDecodeError, RecursionError):  # nested past the stack: bad too
                continue
            if isinstance(data, dict) and isinstance(data.get("records"), list):
                records = [r for r in data["records"] if isinstance(r, dict)]
                yield str(data.get("session", "")), records


# -- names, routes and bindings ----------------------------------------------------------


def tool_name(operation: dict[str, Any]) -> str:
    """``POST /loans/{loan_id}/approve`` -> ``post_loans_loan_id_approve``."""
    method = str(operation.get("method") or "").lower()
    route = str(operation.get("route") or operation.get("name") or "call")
    words = re.split(r"[^A-Za-z0-9]+", f"{method} {route}")
    name = "_".join(w.lower() for w in words if w)
    return name or "call"


def tool_names(operations: list[dict[str, Any]]) -> dict[str, str]:
    """Operation name -> tool name, for the operations the twin serves (two operations
    whose names read alike get ``_2``, ``_3``... in interface order)."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for operation in operations:
        if not _is_route(operation):
            continue
        name = base = tool_name(operation)
        n = 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        names[str(operation.get("name"))] = name
    return names


def _segments(route: str) -> list[tuple[str, bool]]:
    """The route's parts: (name, is a parameter)."""
    parts = []
    for part in route.strip("/").split("/"):
        if not part:
            continue
        match = _PARAM.match(part)
        parts.append((match.group(1), True) if match else (part, False))
    return parts


def plural(noun: str) -> str:
    """``policy`` -> ``policies``, ``loan`` -> ``loans``, ``box`` -> ``boxes``."""
    if noun.endswith("y") and len(noun) > 2 and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def collection_names(types: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, str]:
    """Object type -> state key: the route word that names it (``loans``), else a plural."""
    words = {
        part
        for op in operations
        for part, is_param in _segments(str(op.get("route") or ""))
        if not is_param
    }
    names = {}
    for type_name in types:
        found = sorted(w for w in words if w == type_name or singular(w) == type_name)
        names[type_name] = found[0] if found else plural(type_name)
    return names


def _owner(param: str, collections: dict[str, list[dict[str, Any]]]) -> str | None:
    """The collection a path parameter's id points into (``loan_id`` -> ``loans``)."""
    stem = re.sub(r"_?(id|key|uuid)$", "", param, flags=re.IGNORECASE)
    for name in collections:
        if stem and (stem == name or singular(stem) == collection_noun(name)):
            return name
    return None


_PREFIX = re.compile(r"^(v\d+(\.\d+)*|api|rest)$", re.IGNORECASE)  # "/api/v1/..." names no data
KEYS = "_keys"  # state key: collection -> the field holding its records' keys, where not "id"


def _resource(parts: list[tuple[str, bool]], collections: dict[str, Any]) -> list[tuple[str, bool]]:
    """The route's parts from its first collection on: a prefix of versions and ``api``
    (``/v1/orders/{order_number}``) names no data."""
    start = 0
    while (
        start < len(parts)
        and not parts[start][1]
        and parts[start][0] not in collections
        and _PREFIX.match(parts[start][0])
    ):
        start += 1
    return parts[start:]


def binding_for(
    operation: dict[str, Any],
    collections: dict[str, list[dict[str, Any]]],
    context: list[str],
    keys: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The tool_map binding of an operation, from its method and route; ``keys`` names a
    collection's key field where it is not ``id`` (``orders``: ``order_number``)."""
    method = str(operation.get("method") or "").upper()
    if not method and isinstance(operation.get("objects"), dict):
        return _process_binding(operation, collections, context, keys)
    parts = _resource(_segments(str(operation.get("route") or "")), collections)
    head = parts[0][0] if parts and not parts[0][1] else None
    collection = head if head in collections else None
    if collection is None:
        return {"op": "none"}
    params = [name for name, is_param in parts if is_param]
    literal_after = [name for name, is_param in parts[1:] if not is_param]
    key = (keys or {}).get(collection)
    if key is None:
        key = "id" if any("id" in r for r in collections[collection]) else None
    own = params[0] if params and _owner(params[0], collections) == collection else None
    if own is None and len(parts) > 1 and parts[1][1] and _owner(parts[1][0], collections) is None:
        # a parameter right after the collection names one of its records, whatever it is
        # called (``/orders/{order_number}``); a bare ``{id}`` keeps its old reading
        name = parts[1][0]
        named = key_type(name)  # "customer_id" under /kyc names a customer, not a check
        if name.lower() not in ("id", "key", "uuid") and (
            named in (None, collection_noun(collection)) or (keys or {}).get(collection) == name
        ):
            own = name
    nested = literal_after[-1] if literal_after and not parts[-1][1] else None
    if not params and len(parts) == 1:
        op = {"GET": "list", "POST": "create"}.get(method)
        binding: dict[str, Any] = {"op": op or "none", "collection": collection}
    elif params and len(parts) == 2 and own is None and method == "POST":
        binding = {"op": "create", "collection": collection}  # POST /kyc/{customer_id}
    elif params and own is not None and len(parts) == 2:
        op = {"GET": "get", "DELETE": "delete", "POST": "update", "PUT": "update"}.get(method)
        op = op or ("update" if method == "PATCH" else None)
        binding = {"op": op or "none", "collection": collection, "id_arg": own}
    elif (
        own is not None
        and method == "POST"
        and len(parts) == 3
        and nested in collections
        and nested != collection
    ):
        # POST /orders/{order_number}/shipments: a record of another collection, made
        # for this one (the parameter is its link)
        collection = nested
        key = (keys or {}).get(nested) or (
            "id" if any("id" in r for r in collections[nested]) else None
        )
        binding = {"op": "create", "collection": nested}
    elif own is not None and method in ("POST", "PUT", "PATCH") and len(literal_after) == 1:
        binding = {"op": "update", "collection": collection, "id_arg": own}  # .../{id}/approve
    else:
        return {"op": "none"}
    if binding["op"] == "none":
        return {"op": "none"}
    if key is not None:
        binding["key"] = key
    if context:
        binding["context"] = list(context)
    if binding["op"] == "list":
        answer = list_answer(operation, collections[binding["collection"]])
        if answer is not None:
            binding["answer"] = answer
    return binding


_COUNT_NAMES = frozenset({"total", "count", "total_count", "totalCount", "size", "matches"})


def list_answer(operation: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The layout of a list's answers as the log shows them (``{"items": [...], "total":
    7}``): one array of records, each showing the same fields (in the order the stored
    records have them), and counts; None when its successes are no such object."""
    ok = (operation.get("responses") or {}).get("200") or {}
    props = ok.get("properties") if ok.get("type") == "object" else None
    if not isinstance(props, dict) or set(ok.get("required") or []) != set(props):
        return None
    shape: dict[str, str] = {}
    fields: list[str] | None = None
    for name, schema in props.items():
        items = schema.get("items") if isinstance(schema, dict) else None
        if schema.get("type") == "array" and isinstance(items, dict) and items.get("properties"):
            if fields is not None:
                return None  # two lists: not one page of records
            shown = list(items["properties"])
            order = list(records[0]) if records else []
            fields = [f for f in order if f in shown] + [f for f in shown if f not in order]
            if set(items.get("required") or []) != set(shown):
                # items show what each record has, not one set of fields: the records
                # whole, where every field an item showed is one the records have
                known = {f for r in records for f in r}
                if not records or not set(shown) <= known:
                    return None
                fields = ["*"]
            shape[name] = "{items}"
        elif schema.get("type") == "integer" and name in _COUNT_NAMES:
            shape[name] = "{count}"
        else:
            return None
    return {"shape": shape, "fields": fields} if fields else None


def _collection_of(otype: str, collections: dict[str, Any]) -> str | None:
    for name in collections:
        if not name.startswith("_") and (name == otype or collection_noun(name) == otype):
            return name
    return None


def _process_binding(
    operation: dict[str, Any],
    collections: dict[str, list[dict[str, Any]]],
    context: list[str],
    keys: dict[str, str] | None,
) -> dict[str, Any]:
    """A process event's binding (OCEL, XES: no method, no route), from the objects its
    successes made and acted on: a create of the type most of them made, else an update
    of the type they acted on that its arguments name (``order_id``)."""
    objects = operation["objects"]
    ok = int(objects.get("ok_calls") or 0)
    made = {str(t): int(n) for t, n in (objects.get("made") or {}).items()}
    acted = {str(t): int(n) for t, n in (objects.get("acted_on") or {}).items()}
    args = operation.get("arguments") if isinstance(operation.get("arguments"), dict) else {}
    given = set((args or {}).get("properties") or {})
    binding: dict[str, Any] | None = None
    # a type the event's arguments name was there before it (the readers leave out the
    # ids of the objects an event made); a type the event's name says comes first
    words = set(re.split(r"[^a-z0-9]+", str(operation.get("name") or "").lower()))
    fresh = {t: n for t, n in made.items() if f"{t}_id" not in given and t not in given}
    top = max(fresh, key=lambda t: (fresh[t], t in words, t), default=None)
    if top is not None and ok and 2 * fresh[top] >= ok and _collection_of(top, collections):
        binding = {"op": "create", "collection": _collection_of(top, collections)}
    else:
        for otype in sorted(acted, key=lambda t: (t not in words, -acted[t], t)):
            collection = _collection_of(otype, collections)
            named = next((a for a in (f"{otype}_id", otype) if a in given), None)
            if collection is not None and named is not None and 2 * acted[otype] >= ok:
                binding = {"op": "update", "collection": collection, "id_arg": named}
                break
    if binding is None:
        return {"op": "none"}
    collection = binding["collection"]
    key = (keys or {}).get(collection) or (
        "id" if any("id" in r for r in collections[collection]) else None
    )
    if key is not None:
        binding["key"] = key
    if context:
        binding["context"] = list(context)
    return binding


# -- parameters -------------------------------------------------------------------------


def _clean(schema: Any) -> Any:
    """An inferred schema as a contract: no ``x-`` notes, no observed ranges, no enums of
    free text (a reason seen once is not the only reason)."""
    if isinstance(schema, list):
        return [_clean(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key.startswith("x-") or key in _DROP_KEYS:
            continue
        if key == "enum":
            # values seen are not the only values allowed: the twin's rules say which
            # the system refuses, so they are shown, not enforced
            if isinstance(value, list) and all(
                isinstance(v, str) and v and not re.search(r"\s", v) for v in value
            ):
                out["description"] = "values seen: " + ", ".join(value)
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: _clean(v) for k, v in value.items()}
        else:
            out[key] = _clean(value)
    return out


def _described(schema: dict[str, Any], *, always_given: bool) -> dict[str, Any]:
    """A body field's schema as words: its type, values seen, and whether every logged
    success gave it."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    words = [" or ".join(str(k) for k in kinds if k != "null")] if kinds else []
    if schema.get("description"):
        words.append(str(schema["description"]))
    if schema.get("format"):
        words.append(f"format {schema['format']}")
    if always_given:
        words.append("always given")
    return {"description": "; ".join(w for w in words if w)}


def _is_object(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return "object" in kinds and isinstance(schema.get("properties"), dict)


def _id_type(param: str, collections: dict[str, list[dict[str, Any]]]) -> str:
    owner = _owner(param, collections)
    values = [r.get("id") for r in collections.get(owner or "", [])]
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return "integer" if values and len(ints) == len(values) else "string"


def parameters_for(
    operation: dict[str, Any], collections: dict[str, list[dict[str, Any]]], roles: list[str]
) -> dict[str, Any]:
    """Path parameters (required), the inferred request body's fields, actor and role."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, is_param in _segments(str(operation.get("route") or "")):
        if is_param and name:
            properties[name] = {
                "type": _id_type(name, collections),
                "description": "path parameter",
            }
            required.append(name)
    body = operation.get("arguments")
    if _is_object(body):
        for name, schema in body["properties"].items():
            if name not in properties:
                properties[name] = _clean(schema)
        # The body's fields are described, not enforced: a call with a field missing or
        # of another type must reach the twin's mined rules and get the system's own
        # refusal (a 422 with its body), as the real service would answer it.
        always = set(body.get("required", []))
        for name in body["properties"]:
            if name in required or not isinstance(properties.get(name), dict):
                continue
            properties[name] = _described(properties[name], always_given=name in always)
    if roles:
        for name in CONTEXT_ARGS:
            properties.setdefault(name, {"type": "string"})
        properties["actor"].setdefault("description", "who acts: an actor id")
        if properties["role"] == {"type": "string"}:
            properties["role"] = {
                "type": "string",
                "enum": roles,
                "description": "the caller's role; permissions depend on it",
            }
    return {"type": "object", "properties": properties, "required": required}


# -- descriptions -----------------------------------------------------------------------


def _statuses(operation: dict[str, Any]) -> str:
    counts = operation.get("statuses") or {}
    return ", ".join(f"{code} ({n}x)" for code, n in sorted(counts.items()))


def _is_route(operation: dict[str, Any]) -> bool:
    codes = set(map(str, (operation.get("statuses") or {}).keys()))
    return not codes or not codes <= NOT_A_ROUTE


def _verb_moves(verb: str, transitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stem = verb.lower().rstrip("e")
    return [t for t in transitions if len(stem) >= 3 and stem in str(t.get("to", "")).lower()]


def describe_operation(
    operation: dict[str, Any], binding: dict[str, Any], rules: dict[str, Any], noun: str | None
) -> str:
    """The tool's description: what it is, what it answered, the rules mined for it."""
    name = str(operation.get("name") or tool_name(operation))
    lines = [f"{name} (seen {operation.get('calls', 0)} times; statuses {_statuses(operation)})."]
    refused_by_role = [p for p in rules.get("permissions", []) or [] if p.get("operation") == name]
    if refused_by_role:
        allowed = sorted({r for p in refused_by_role for r in p.get("allowed_roles", []) or []})
        if allowed:
            lines.append(f"Roles seen succeeding: {', '.join(allowed)}.")
        for rule in refused_by_role:
            who = "a caller with no role" if rule.get("role") == "(none)" else rule.get("role")
            lines.append(f"Refused with {rule.get('status')} for {who} ({rule.get('count', 1)}x).")
    for rule in rules.get("required_fields", []) or []:
        if rule.get("operation") == name:
            lines.append(f"Refused with {rule.get('status')} when {rule.get('field')} is missing.")
    cycle = (rules.get("life_cycles") or {}).get(noun or "", {}) if noun else {}
    if cycle and binding.get("op") == "create" and cycle.get("initial"):
        lines.append(f"A new {noun} starts as {', '.join(cycle['initial'])}.")
    parts = _segments(str(operation.get("route") or ""))
    if cycle and binding.get("op") == "update" and parts and not parts[-1][1]:
        for move in _verb_moves(parts[-1][0], cycle.get("transitions", []) or []):
            lines.append(f"Moves a {noun} from {move.get('from')} to {move.get('to')}.")
    refused = [r for r in (cycle.get("refused", []) if cycle else []) if r.get("operation") == name]
    if refused:
        by_status: dict[Any, list[str]] = {}
        for rule in refused:
            by_status.setdefault(rule.get("status"), []).append(str(rule.get("from")))
        for status, froms in by_status.items():
            lines.append(f"Refused with {status} when the {noun} is {', '.join(froms)}.")
    for perf in rules.get("performance", []) or []:
        if perf.get("operation") == name and perf.get("error_rate"):
            lines.append(f"Error rate {perf['error_rate']:.0%}.")
    return " ".join(lines)


def describe_server(world: dict[str, Any], skipped: list[str]) -> str:
    """The server: where it comes from, its object types and their life cycles."""
    manifest = world["manifest"] if isinstance(world["manifest"], dict) else {}
    counts = manifest.get("counts", {}) or {}
    sources = Counter(str(s.get("format")) for s in manifest.get("sources", []) or [])
    lines = [
        "A business system rebuilt from its operation logs "
        f"({counts.get('records', '?')} logged operations in {counts.get('sessions', '?')} "
        f"sessions; sources: {', '.join(sources) or 'unknown'}). Personal data is masked."
    ]
    types = world["entities"].get("types", {}) or {}
    if types:
        sizes = [f"{t} ({v.get('count', len(v.get('records', {})))})" for t, v in types.items()]
        lines.append(f"Object types: {', '.join(sizes)}.")
    for noun, cycle in sorted((world["rules"].get("life_cycles") or {}).items()):
        moves = cycle.get("transitions", []) or []
        if moves:
            steps = ", ".join(f"{m.get('from')} -> {m.get('to')}" for m in moves)
            lines.append(f"{noun} life cycle: {steps}.")
    if world["roles"]:
        lines.append(f"Callers act in roles: {', '.join(world['roles'])}.")
    if skipped:
        lines.append(f"Not served (only 404/405 seen): {', '.join(skipped)}.")
    return " ".join(lines)


# -- the scenario -----------------------------------------------------------------------


def world_scenario(world_dir: str | Path, *, behaviour: bool = True) -> dict[str, Any]:
    """A business-world folder as an mcp scenario (validate with the mcp domain); with
    ``behaviour``, each tool enforces the rules mined into ``behaviour.json``. A folder
    whose files were edited into another shape is one :class:`WorldError` saying so."""
    try:
        return _world_scenario(world_dir, behaviour)
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        raise WorldError(
            f"{world_dir}: a file of the world is not in the shape `simgym logs import` "
            f"writes ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); rebuild it"
        ) from None


def _world_scenario(world_dir: str | Path, behaviour: bool) -> dict[str, Any]:
    world = load_world(world_dir)
    operations = [op for op in world["interface"]["operations"] if isinstance(op, dict)]
    types = world["entities"].get("types", {}) or {}
    names = collection_names(types, operations)
    state: dict[str, Any] = {
        names[t]: list((v.get("records") or {}).values()) for t, v in types.items()
    }
    keys = {names[t]: str(v["key"]) for t, v in types.items() if v.get("key") not in (None, "id")}
    nouns = {names[t]: t for t in types}
    roles = world["roles"]
    context = list(CONTEXT_ARGS) if roles else []
    tools: list[dict[str, Any]] = []
    tool_map: dict[str, dict[str, Any]] = {}
    names_of = tool_names(operations)
    skipped = [str(op.get("name")) for op in operations if not _is_route(op)]
    for operation in operations:
        name = names_of.get(str(operation.get("name")))
        if name is None:
            continue
        binding = binding_for(operation, state, context, keys)
        noun = nouns.get(binding.get("collection") or "")
        tools.append(
            {
                "name": name,
                "description": describe_operation(operation, binding, world["rules"], noun),
                "parameters": parameters_for(operation, state, roles),
            }
        )
        tool_map[name] = binding
    if not tools:
        raise WorldError(f"{world_dir}: the world has no operation to serve as a tool")
    mined = Path(world_dir) / BEHAVIOUR_FILE
    if behaviour and mined.is_file():
        for name, rules in (_read_world_file(mined).get("tools") or {}).items():
            if name in tool_map and isinstance(rules, dict):
                key = tool_map[name].get("key")
                if key not in (None, "id") and isinstance(rules.get("shape"), list):
                    # the miner names every record's key "id" too; this system's records
                    # are keyed by another field and have no "id" of their own
                    rules = {**rules, "shape": [f for f in rules["shape"] if f != "id"]}
                tool_map[name] = {**tool_map[name], "rules": rules}
    if keys:  # where records are keyed by other fields than "id" (the rules read it)
        state[KEYS] = keys
    return {
        "server_name": world["name"],
        "description": describe_server(world, skipped),
        "tools": tools,
        "state": state,
        "tool_map": tool_map,
        "routes": http_routes(operations, names_of, context),
    }


# -- the real service behind the twin ----------------------------------------------------

# How the logged callers named themselves to the service (the back office's convention).
CONTEXT_HEADERS = {"actor": "X-Actor", "role": "X-Role"}


def http_routes(
    operations: list[dict[str, Any]], names_of: dict[str, str], context: list[str]
) -> dict[str, dict[str, Any]]:
    """Tool name -> its operation's method, route and context headers, so the real-http
    backend can send each call to the service itself (operations logged without an HTTP
    method, as MCP or OCEL events are, get none)."""
    headers = {name: CONTEXT_HEADERS[name] for name in context if name in CONTEXT_HEADERS}
    routes: dict[str, dict[str, Any]] = {}
    for operation in operations:
        name = names_of.get(str(operation.get("name")))
        method = str(operation.get("method") or "").upper()
        if name is None or not method or not operation.get("route"):
            continue
        routes[name] = {"method": method, "route": str(operation["route"]), "headers": headers}
    return routes
