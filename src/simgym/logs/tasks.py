"""Tasks mined from logged sessions: what a session did, as an instruction an agent can
follow and a final state that can be checked, in the twin and on the real service alike.

A session becomes a :class:`~simgym.core.types.Task` when it created something (a session
that only read, or whose every write failed, has nothing to verify). Its metadata holds:

``plan``    the session's successful calls as the twin's tool calls, ids of records the
            session created replaced by placeholders (``"$loans.0"``: the first loan it
            created); a creating step says what it ``creates`` and the ``logged_id`` it
            got, so an agent (:class:`simgym.agents.plan.PlanAgent`) can bind the id the
            environment assigns instead. A retried create that answered an id already
            created (an idempotent retry) is left out.
``checks``  one per created record, in creation order (:mod:`simgym.rewards._records`):
            ``{"ref": "loans.0", "collection": "loans", "match": {...}, "expect": {...},
            "new": true}``. ``match`` holds the request's fields the logged final record
            still has (references to records of the same session as ``$ref``; ids of
            records made elsewhere, or in ``*_id`` fields naming no record of the
            session, left out: another system numbers them differently); ``expect``
            the record's status-like fields in its final logged
            state, unless a later write of the session named the record without showing
            it again (its logged state is then stale, so nothing is expected of it).
``roles``   the roles the plan acts in; ``session`` and ``world``; ``reward``
            ``{"type": "records"}`` so ``simgym run`` scores the checks.

:func:`check_task` checks a task on a ledger state (the twin's ``final_state``, or the
real service's records in the same collections).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from simgym.core.types import Task
from simgym.domains.mcp_ground import collection_noun
from simgym.logs.steps import DOMAIN, Step, Twin, open_twin
from simgym.logs.twin import CONTEXT_ARGS, collection_names
from simgym.rewards._records import check_records

STATUS_FIELDS = ("status", "state", "lifecycle", "stage", "result", "outcome", "decision")
WRITE_OPS = frozenset({"create", "update", "delete"})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_status_field(name: str) -> bool:
    """A field that says where a record is in its life cycle."""
    return name in STATUS_FIELDS or name.endswith(("_status", "_state"))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _plain(value: Any) -> bool:
    """A value a check can compare: a scalar, or a list of scalars."""
    return _scalar(value) or (isinstance(value, list) and all(_scalar(v) for v in value))


class _Session:
    """The walk through one session's steps that a task is read from."""

    def __init__(self, twin: Twin, types: dict[str, str], known_ids: set[str]) -> None:
        self.twin = twin
        self.types = types  # object type -> collection
        self.known_ids = known_ids  # ids of every record the world knows
        self.labels: dict[str, str] = {}  # logged id -> label ("loans.0")
        self.counts: Counter[str] = Counter()
        self.requests: dict[str, dict[str, Any]] = {}  # label -> the create's arguments
        self.final: dict[str, tuple[int, dict[str, Any]]] = {}  # logged id -> (step, state)
        self.named: dict[str, int] = {}  # logged id -> last write step that named it
        self.plan: list[dict[str, Any]] = []

    def op_of(self, tool: str) -> str:
        binding = self.twin.raw.get("tool_map", {}).get(tool) or {}
        return str(binding.get("op", "none"))

    def created(self, record: dict[str, Any], tool: str, arguments: Any) -> list[dict[str, Any]]:
        """The objects a successful call made: those the reader marked "created" (an HTTP
        answer with a new id), else, for a call the twin binds as a create, the objects
        of the bound collection that the request names at most as their own id
        (``customer_id`` of a new customer). Process logs (OCEL, XES) relate an event to
        its objects without saying which it made, and XES puts their ids among the
        event's attributes."""
        objects = [
            o
            for o in record.get("objects") or []
            if isinstance(o, dict) and o.get("id") is not None
        ]
        marked = [o for o in objects if o.get("qualifier") == "created"]
        if marked:
            return marked
        binding = self.twin.raw.get("tool_map", {}).get(tool) or {}
        if binding.get("op") != "create":
            return []
        args = arguments if isinstance(arguments, dict) else {}
        path = [p for p in str(record.get("path") or "").split("?")[0].split("/") if p]
        made = []
        for obj in objects:
            otype, oid = str(obj.get("type")), str(obj["id"])
            if self.types.get(otype) != binding.get("collection") or oid in path:
                continue
            naming = [k for k, v in args.items() if oid in _strings(v)]
            if all(_own_id_key(k, otype) for k in naming):
                made.append(obj)
        return made

    def own_ids(self, arguments: Any, created: list[dict[str, Any]]) -> Any:
        """The request without the ids the system gave the records it made (a process
        log lists them with the event; an agent asks for a record, the service numbers
        it)."""
        if not isinstance(arguments, dict):
            return arguments
        made = {(str(o.get("type")), str(o["id"])) for o in created}
        return {
            k: v
            for k, v in arguments.items()
            if not any(str(v) == oid and _own_id_key(k, otype) for otype, oid in made)
        }

    def placeholders(self, value: Any) -> Any:
        if isinstance(value, str) and value in self.labels:
            return f"${self.labels[value]}"
        if isinstance(value, list):
            return [self.placeholders(v) for v in value]
        if isinstance(value, dict):
            return {k: self.placeholders(v) for k, v in value.items()}
        return value

    def add(self, step: Step) -> None:
        if step.call is None or step.failed:
            return
        record, call = step.record, step.call
        op = self.op_of(call.tool)
        created = self.created(record, call.tool, call.arguments)
        if created and all(str(o["id"]) in self.labels for o in created):
            return  # a retried create that answered the record already made
        request = self.own_ids(call.arguments, created)
        entry: dict[str, Any] = {
            "name": call.tool,
            "arguments": self.placeholders(request),
        }
        for obj in created:
            logged = str(obj["id"])
            collection = self.types.get(str(obj.get("type")))
            if collection is None or logged in self.labels:
                continue
            label = f"{collection}.{self.counts[collection]}"
            self.counts[collection] += 1
            self.labels[logged] = label
            self.requests[label] = dict(request)
            if "creates" not in entry:
                entry["creates"], entry["logged_id"] = label, obj["id"]
        self.plan.append(entry)
        shown = set()
        for obj in record.get("objects") or []:
            if isinstance(obj, dict) and isinstance(obj.get("state"), dict):
                self.final[str(obj.get("id"))] = (step.index, obj["state"])
                shown.add(str(obj.get("id")))
        writes = op in WRITE_OPS or str(record.get("method") or "").upper() not in READ_METHODS
        if writes:
            for value in _strings(call.arguments):
                if value in self.labels and value not in shown:
                    self.named[value] = step.index

    def checks(self) -> list[dict[str, Any]]:
        found = []
        for logged, label in self.labels.items():
            collection = label.rsplit(".", 1)[0]
            at, state = self.final.get(logged, (-1, {}))
            match = {}
            for field, value in self.requests.get(label, {}).items():
                if field in CONTEXT_ARGS or field not in state or not _plain(value):
                    continue
                if state[field] != value:
                    continue
                if (
                    isinstance(value, str)
                    and (value in self.known_ids or field == "id" or field.endswith("_id"))
                    and value not in self.labels
                ):
                    continue  # an id made elsewhere: another system numbers it differently
                match[field] = self.placeholders(value)
            expect = {}
            if self.named.get(logged, -1) <= at:
                expect = {
                    k: v
                    for k, v in state.items()
                    if is_status_field(k) and _scalar(v) and v is not None
                }
            found.append(
                {
                    "ref": label,
                    "collection": collection,
                    "match": match,
                    "expect": expect,
                    "new": True,
                }
            )
        return found


def _own_id_key(key: str, otype: str) -> bool:
    """Whether an argument named ``key`` holds an object's own id (``id``,
    ``customer_id`` or ``customerId`` for a customer)."""
    norm = key.lower().replace("_", "").replace("-", "")
    return norm in ("id", f"{otype.lower()}id", f"{otype.lower().replace('_', '')}id")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


# -- instructions -----------------------------------------------------------------------


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def _words(value: Any, counts: Counter[str]) -> str:
    """A value as an instruction says it: placeholders as "the new loan"."""
    if isinstance(value, str) and value.startswith("$") and "." in value:
        collection, _, index = value[1:].rpartition(".")
        noun = collection_noun(collection)
        if counts[collection] <= 1:
            return f"the new {noun}"
        return f"new {noun} #{int(index) + 1}" if index.isdigit() else f"the new {noun}"
    if isinstance(value, list):
        return ", ".join(_words(v, counts) for v in value) or "none"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _clause(entry: dict[str, Any], twin: Twin, counts: Counter[str]) -> str | None:
    """One plan step in plain words, or None for a read."""
    tool = entry["name"]
    binding = twin.raw.get("tool_map", {}).get(tool) or {}
    op = binding.get("op", "none")
    operation = twin.mapper.tools and next(
        (name for name, t in twin.mapper.tools.items() if t == tool), tool
    )
    args = {k: v for k, v in entry.get("arguments", {}).items() if k not in CONTEXT_ARGS}
    if op in ("get", "list") or str(operation).upper().startswith(tuple(READ_METHODS)):
        return None
    collection = binding.get("collection") or ""
    noun = collection_noun(collection) if collection else "record"
    refs = {k: v for k, v in args.items() if isinstance(v, str) and v.startswith("$")}
    plain = {k: v for k, v in args.items() if k not in refs}
    fields = ", ".join(f"{k} {_words(v, counts)}" for k, v in plain.items())
    if op == "create":
        owner = " ".join(f"for {_words(v, counts)}" for v in refs.values())
        text = f"create {_article(noun)} {noun}" + (f" {owner}" if owner else "")
        return text + (f" with {fields}" if fields else "")
    target = args.get(binding.get("id_arg") or "")
    subject = _words(target, counts) if target is not None else f"the {noun}"
    rest = {k: v for k, v in plain.items() if k != binding.get("id_arg")}
    extra = ", ".join(f"{k} {_words(v, counts)}" for k, v in rest.items())
    if op == "delete":
        return f"delete {subject}"
    last = str(operation).rstrip("/").rsplit("/", 1)[-1]
    if op == "update" and last and not last.startswith("{") and last not in rest:
        return f"{last} {subject}" + (f" with {extra}" if extra else "")
    if op == "update":
        return f"update {subject}: {extra}" if extra else f"update {subject}"
    return f"call {operation}" + (f" with {fields}" if fields else "")


def instruction_for(plan: list[dict[str, Any]], checks: list[dict[str, Any]], twin: Twin) -> str:
    """The session's goal in our own words: its writes, by role, and the outcome."""
    counts: Counter[str] = Counter(c["collection"] for c in checks)
    groups: list[tuple[str | None, list[str]]] = []
    for entry in plan:
        clause = _clause(entry, twin, counts)
        if clause is None:
            continue
        role = entry.get("arguments", {}).get("role")
        if groups and groups[-1][0] == role:
            groups[-1][1].append(clause)
        else:
            groups.append((role, [clause]))
    sentences = []
    for role, clauses in groups:
        body = "; ".join(clauses)
        text = f"As {role}: {body}" if role else body[:1].upper() + body[1:]
        sentences.append(text + ".")
    outcome = [
        f"{_words('$' + c['ref'], counts)} has "
        + ", ".join(f"{k} {_words(v, counts)}" for k, v in c["expect"].items())
        for c in checks
        if c["expect"]
    ]
    if outcome:
        sentences.append("In the end " + "; ".join(outcome) + ".")
    return " ".join(sentences)


# -- tasks ------------------------------------------------------------------------------


def mine_tasks(world: str | Path | Twin, limit: int | None = None) -> list[Task]:
    """One task per session of a world that created something (see the module
    docstring), in the order of its ``sessions.jsonl``; at most ``limit``."""
    twin = world if isinstance(world, Twin) else open_twin(world)
    types = twin.world["entities"].get("types", {}) or {}
    operations = [op for op in twin.world["interface"]["operations"] if isinstance(op, dict)]
    names = collection_names(types, operations)
    known = {str(oid) for t in types.values() for oid in (t.get("records") or {})}
    tasks = []
    for session, steps in twin.steps():
        walk = _Session(twin, names, known)
        for step in steps:
            walk.add(step)
        checks = walk.checks()
        if not checks:
            continue
        if limit is not None and len(tasks) >= limit:
            break
        roles = sorted({str(e["arguments"]["role"]) for e in walk.plan if "role" in e["arguments"]})
        tasks.append(
            Task(
                id=session,
                instruction=instruction_for(walk.plan, checks, twin),
                domain=DOMAIN,
                metadata={
                    "world": twin.world["name"],
                    "session": session,
                    "roles": roles,
                    "checks": checks,
                    "plan": walk.plan,
                    "reward": {"type": "records"},
                },
            )
        )
    return tasks


def before_session(scenario: dict[str, Any], task: Task) -> dict[str, Any]:
    """A world's scenario as the task's session found it: without the records the session
    itself created (its plan's ``logged_id``). A world's state is the log's end, so a task
    replaying a session would otherwise meet its own new records already there (and a
    duplicate rule refuses the very create the task asks for)."""
    made = {
        str(entry["logged_id"])
        for entry in task.metadata.get("plan") or []
        if isinstance(entry, dict) and entry.get("creates") and entry.get("logged_id") is not None
    }
    state = scenario.get("state")
    if not made or not isinstance(state, dict):
        return scenario
    keys = state.get("_keys") if isinstance(state.get("_keys"), dict) else {}
    trimmed = {}
    for name, records in state.items():
        if isinstance(records, list):
            key = str(keys.get(name, "id"))
            records = [r for r in records if not (isinstance(r, dict) and str(r.get(key)) in made)]
        trimmed[name] = records
    return {**scenario, "state": trimmed}


def check_task(
    task: Task | dict[str, Any], state: dict[str, Any] | None, before: dict[str, Any] | None = None
) -> tuple[bool, list[dict[str, Any]]]:
    """Whether ``state`` (collections of records: the twin's ledger, or a real service's
    records) meets the task's checks; ``before`` is the state the run started from, whose
    records do not count as the task's. Returns (passed, one outcome per check)."""
    metadata = task.metadata if isinstance(task, Task) else dict(task.get("metadata") or {})
    checks = metadata.get("checks") or []
    if not checks:
        return False, [{"passed": False, "why": "the task has no checks"}]
    return check_records(list(checks), state, before)


def read_tasks(path: str | Path) -> list[Task]:
    """The tasks of a ``tasks.jsonl``."""
    with open(path, encoding="utf-8") as lines:
        return [Task.model_validate_json(line) for line in lines if line.strip()]


def scoped_scenario(scenario: dict[str, Any], task: Task, *, keep: int = 2) -> dict[str, Any]:
    """A world's scenario with a small state for one task: per collection, the records
    the plan names by id plus the ``keep`` newest others (so new ids continue their
    numbering), for a world model whose context cannot hold every record."""
    named = set(_strings([e.get("arguments", {}) for e in task.metadata.get("plan", [])]))
    state = {}
    for name, records in (scenario.get("state") or {}).items():
        if not isinstance(records, list):
            state[name] = records
            continue
        wanted = [r for r in records if isinstance(r, dict) and str(r.get("id")) in named]
        others = [r for r in records if r not in wanted]
        state[name] = wanted + others[-keep:] if keep > 0 else wanted
    return {**scenario, "state": state}
