"""A business world's signature: the part of what it describes that any log of the same
system should agree on, whatever format the log came in.

:func:`world_signature` reads a world folder (:mod:`simgym.logs.world`) and returns

``operations``          the operations that changed something: those with an accepted call
                        (no failure) whose method is not a read (GET, HEAD, OPTIONS), or
                        that have no method (a process event)
``object_types``        the object types whose records the log shows
``life_cycles``         per object type with a status: the initial statuses and the
                        transitions ``[from, to]`` seen
``refused``             refused transitions: ``[type, from status, operation, status]``
``denials``             refusals by role: ``[operation, role]`` answered 403
``required_arguments``  per operation above, the request fields its accepted calls always
                        had (the argument schema's ``required``)
``required_fields``     fields blamed by 400/422 answers to the operations that are not
                        reads: ``[operation, field, status]``

Operations are named with their route's parameters unnamed ("POST /loans/{}/approve"):
the world builder treats "/loans/{loan_id}" and a path turned into "/loans/{id}" as one
operation, and a HAR or a raw access log cannot know the server's parameter names.
Counts are left out: two logs of one system see the same rules, not the same tallies.

:data:`COMMON` names the keys every format carries. A process-mining log (OCEL, XES)
holds the business events an audit log records: no reads, no request bodies, no refusal
that came before the caller was known or of a request's fields (401, 400, 404, 422). So
the argument schemas and required-field rules (:data:`REQUEST`) can agree only between
logs of the HTTP requests themselves (OTLP spans, HAR archives, flat request logs), and
401 answers, which have no role, are not denials here. Even those logs differ on reads:
a HAR's reader takes a GET's query string as its arguments, a span or a flat log keeps it
in the path; so the request keys cover the operations that are not reads.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from simgym.logs.model import JSON

COMMON = ("operations", "object_types", "life_cycles", "refused", "denials")
REQUEST = ("required_arguments", "required_fields")
READS = frozenset({"GET", "HEAD", "OPTIONS"})
_PARAM = re.compile(r"\{[^}]*\}")


def operation_id(name: str) -> str:
    """An operation's name with its route's parameters unnamed."""
    return _PARAM.sub("{}", name)


def _accepted(statuses: dict[str, int]) -> bool:
    return any(k == "ok" or (k.isdigit() and int(k) < 400) for k in statuses)


def _load(path: Path) -> dict[str, JSON]:
    return json.loads(path.read_text(encoding="utf-8"))


def world_signature(world_dir: str | os.PathLike[str]) -> dict[str, JSON]:
    """The comparable signature of the world in ``world_dir`` (see the module's doc);
    every list sorted, so two signatures compare with ``==``."""
    world = Path(world_dir)
    interface = _load(world / "interface.json")
    rules = _load(world / "rules.json")
    entities = _load(world / "entities.json")
    operations: dict[str, JSON] = {}
    for op in interface["operations"]:
        if op.get("method") in READS or not _accepted(op.get("statuses") or {}):
            continue
        schema = op.get("arguments")
        required = schema.get("required", []) if isinstance(schema, dict) else []
        operations[operation_id(op["name"])] = sorted(required)
    life_cycles = {
        otype: {
            "initial": sorted(cycle["initial"]),
            "transitions": sorted([t["from"], t["to"]] for t in cycle["transitions"]),
        }
        for otype, cycle in rules["life_cycles"].items()
        if cycle["initial"] or cycle["transitions"]
    }
    refused = sorted(
        {
            (otype, r["from"], operation_id(r["operation"]), r["status"])
            for otype, cycle in rules["life_cycles"].items()
            for r in cycle["refused"]
        }
    )
    denials = sorted(
        {
            (operation_id(p["operation"]), p["role"])
            for p in rules["permissions"]
            if p["status"] == 403
        }
    )
    reads = {
        operation_id(op["name"]) for op in interface["operations"] if op.get("method") in READS
    }
    required_fields = sorted(
        {
            (operation_id(r["operation"]), r["field"], r["status"])
            for r in rules["required_fields"]
            if operation_id(r["operation"]) not in reads
        }
    )
    return {
        "operations": sorted(operations),
        "object_types": sorted(entities["types"]),
        "life_cycles": life_cycles,
        "refused": [list(r) for r in refused],
        "denials": [list(d) for d in denials],
        "required_arguments": dict(sorted(operations.items())),
        "required_fields": [list(r) for r in required_fields],
    }
