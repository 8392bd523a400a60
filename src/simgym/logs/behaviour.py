"""Mine each operation's business behaviour from a world's logged sessions.

The twin enforces what this writes to ``behaviour.json`` (one
:class:`~simgym.domains.mcp_rules.ToolRules` per tool): the refusals the real system
gave and when it gave them, and what a successful call sets. Two passes over
``sessions.jsonl`` (a session at a time, records in time order):

Each session is read with its own state (the objects it makes, and those the log shows),
and at most :data:`MAX_CALLS` calls per pass, so mining stays linear in the log.

1. **Effects**, from successful calls: fields a call always sets to one value, copies from
   an argument, stamps with the time, decides from the state (a decision list, e.g. a
   KYC check's ``result`` from the customer's country and documents), and changes to a
   related record seen the next time that record is logged (the customer's
   ``kyc_status`` follows the check's ``result``).
2. **Guards**, with the state a twin would hold at each call (the effects of pass 1
   applied, then corrected by what the log shows): for every kind of refusal (status and
   error code), the fewest conditions that hold for every such refusal and for no
   successful call; the answer the system gave, with the call's values made
   placeholders; and the order the system checks them in, from calls two guards fit.

Conditions are learned greedily (one or two per guard, at most :data:`MAX_RULES` guards
per kind), so a rule the logs never show (a limit crossed by no one) is not invented.
Conditions over relations come before conditions over values, so a rule names no person
(see :mod:`simgym.logs.relations`): the caller is the record's requester (self-approval),
or did an earlier step on it (segregation of duties), an amount is above its role's limit
(the bound read from the refusals where they state it), linked records disagree (a
match), a record with the same fields exists (a duplicate), the role is not among those
the refusal says are allowed.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime
from functools import cmp_to_key
from pathlib import Path
from typing import Any

from simgym.domains.mcp_rules import (
    HISTORY,
    KEYS,
    Condition,
    DecisionList,
    Features,
    Guard,
    ParentEffect,
    ToolRules,
    features,
    find,
    key_of,
    owner_collection,
    remember,
    render,
)
from simgym.logs.calls import CallMapper
from simgym.logs.relations import (
    allowed_roles,
    relations,
    roles_of,
    stated_numbers,
    status_of,
)
from simgym.logs.twin import (
    BEHAVIOUR_FILE,
    collection_names,
    load_world,
    world_scenario,
)

MAX_RULES = 4  # guards learned per kind of refusal
MAX_EXAMPLES = 3000  # calls kept per tool for learning
MAX_CALLS = 200_000  # calls read per pass: a larger log's first sessions teach the rules
MAX_VALUES = 16  # a field with more distinct values is no category (ids, names, amounts)
VERSION = 1


# -- reading the log -----------------------------------------------------------------------


def _began(records: list[dict[str, Any]]) -> float:
    times = [r["time"] for r in records if _number(r.get("time"))]
    return min(times) if times else float("inf")


def _sessions(root: Path) -> Iterator[list[dict[str, Any]]]:
    """The world's sessions in the order they began (``sessions.jsonl`` keeps them by
    name): a later session finds what earlier ones made. Read twice, a session at a
    time: once for when each began (and where its line is), then in that order."""
    path = root / "sessions.jsonl"
    if not path.is_file():
        return
    starts: list[tuple[float, int, int]] = []
    with open(path, "rb") as lines:
        offset = 0
        for n, line in enumerate(lines):
            try:
                data = json.loads(line)
            except (json.JSONDecodeError, RecursionError, UnicodeDecodeError):
                data = None
            if isinstance(data, dict) and isinstance(data.get("records"), list):
                records = [r for r in data["records"] if isinstance(r, dict)]
                starts.append((_began(records), n, offset))
            offset += len(line)
        for _, _, at in sorted(starts):
            lines.seek(at)
            data = json.loads(lines.readline())
            yield [r for r in data["records"] if isinstance(r, dict)]


def outcome(record: dict[str, Any]) -> str:
    """``ok``, or the kind of refusal: status and the error's code (``409:invalid_transition``);
    a log without statuses (GenAI spans, OCEL, XES) gives the status its error body names,
    else ``error``."""
    status = status_of(record)
    failed = bool(record.get("error")) or (isinstance(status, int) and status >= 400)
    body = record.get("response")
    if status is None and isinstance(body, dict) and body.get("error"):
        failed = True  # no status logged, but the answer is an error object
    if not failed:
        return "ok"
    return f"{status if status is not None else 'error'}:{error_code(record.get('response'))}"


def error_code(body: Any) -> str:
    """An error answer's code, where it has one (``{"error": {"code": ...}}``, ``code``)."""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("code"), str | int):
            return str(inner["code"])
        if isinstance(body.get("code"), str | int):
            return str(body["code"])
    return ""


def _is_stamp(value: Any) -> bool:
    if not isinstance(value, str) or len(value) < 16 or "T" not in value:
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _stamp_style(value: str) -> str:
    style = "iso-us" if "." in value else "iso"
    return f"{style}-z" if value.endswith("Z") else style


def call_result(
    binding: dict[str, Any],
    logged: dict[str, Any],
    arguments: dict[str, Any],
    collection_of: dict[str, str],
) -> dict[str, Any] | None:
    """The record a successful call returned or left: its answer when that is a record
    (a JSON object with an id), else, for event logs without answers (OCEL, XES), the
    state of the object of the call's collection the event names."""
    if outcome(logged) != "ok":
        return None
    body = logged.get("response")
    if isinstance(body, dict) and body.get("id") is not None:
        return body
    collection = binding.get("collection")
    named = arguments.get(binding.get("id_arg") or "")
    # ids the call names of other records (a new loan's customer_id); an event log may
    # also name the new record itself by <type>_id, which does not count
    others = {c: [] for c in collection_of.values()}
    given = {
        str(v)
        for k, v in arguments.items()
        if isinstance(v, str | int) and owner_collection(k, others) != collection
    }
    for obj in logged.get("objects") or []:
        if not isinstance(obj, dict) or not isinstance(obj.get("state"), dict):
            continue
        if collection_of.get(str(obj.get("type"))) != collection:
            continue
        oid = str(obj.get("id"))
        if (named is not None and oid == str(named)) or (
            binding.get("op") == "create" and oid not in given
        ):
            return {"id": obj.get("id"), **obj["state"]}
    return None


def _label(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class _Calls:
    """A world's calls in log order, with the state a twin would hold before each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        world = load_world(root)
        self.scenario = world_scenario(root, behaviour=False)
        self.bindings: dict[str, dict[str, Any]] = self.scenario["tool_map"]
        operations = [op for op in world["interface"]["operations"] if isinstance(op, dict)]
        self.mapper = CallMapper(operations, roles=bool(world["roles"]))
        types = world["entities"].get("types", {}) or {}
        self.collection_of = collection_names(types, operations)

    def walk(self, rules: dict[str, ToolRules] | None = None) -> Iterator[tuple[Any, ...]]:
        """(tool, binding, arguments, record before, features, logged record) per call;
        the state starts empty, takes every logged object state, and (with ``rules``) the
        twin's effects of each successful call."""
        from simgym.core.types import ToolSpec
        from simgym.domains.mcp_ground import ToolBinding, ground_ruled

        seen = 0
        # every record known so far, in the log's own order: a later session finds the
        # records earlier ones made or showed (a duplicate of last week's claim, a record
        # that never existed), as the twin's starting records hold them
        known: dict[str, Any] = {name: [] for name in self.scenario["state"]}
        for session in _sessions(self.root):
            # what one session did (who did which step) is its own; the records are not
            state: dict[str, Any] = {
                name: records for name, records in known.items() if isinstance(records, list)
            }
            if isinstance(self.scenario["state"].get(KEYS), dict):  # keys not called "id"
                state[KEYS] = self.scenario["state"][KEYS]
            seen += len(session)
            if seen > MAX_CALLS:
                return
            for logged in session:
                call = self.mapper.call(logged)
                if isinstance(call, str):
                    self._observe(state, logged, None)
                    continue
                binding = self.bindings.get(call.tool, {})
                collection = binding.get("collection")
                before = None
                if collection and binding.get("id_arg"):
                    before = find(
                        state.get(collection, []), "id", call.arguments.get(binding["id_arg"])
                    )
                feats = features(call.arguments, before, state)
                yield call.tool, binding, call.arguments, before, feats, logged
                if outcome(logged) != "ok":
                    self._observe(state, logged, binding)
                    continue
                if rules and call.tool in rules:
                    spec = ToolSpec(name=call.tool, description="", parameters={})
                    bound = ToolBinding(**{**binding, "rules": rules[call.tool]})
                    grounded = ground_ruled(spec, call.arguments, state, bound, "json")
                    if grounded is not None and grounded.effects:
                        effects = dict(grounded.effects)
                        made = call_result(binding, logged, call.arguments, self.collection_of)
                        if binding.get("op") == "create" and made is not None:
                            # the log shows the record made, under its real id: the twin's
                            # copy under an id of its own would be a second one
                            effects.pop(binding.get("collection"), None)
                        state.update(effects)
                self._observe(state, logged, binding)
                self._remember(state, call.tool, binding, call.arguments, before, logged)
            for name, records in state.items():
                if name in known and isinstance(records, list):
                    known[name] = records

    def _remember(
        self,
        state: dict[str, Any],
        tool: str,
        binding: dict[str, Any],
        args: dict[str, Any],
        before: dict[str, Any] | None,
        logged: dict[str, Any],
    ) -> None:
        """Who made or changed the record a successful call names, as the twin keeps it."""
        collection = binding.get("collection")
        if not collection or args.get("actor") is None:
            return
        made = call_result(binding, logged, args, self.collection_of)
        target = before if before is not None else made
        if target is not None:
            rid = target.get(key_of(state, collection))
            state[HISTORY] = remember(state, tool, args["actor"], collection, rid)

    def shown(self, binding: dict[str, Any], logged: dict[str, Any]) -> list[tuple[str, dict]]:
        """The objects a logged call shows, as (collection, record): a successful
        answer that is a record, and the states of the objects the event names."""
        out = []
        body = logged.get("response")
        if outcome(logged) == "ok" and isinstance(body, dict) and "id" in body:
            if binding.get("collection"):
                out.append((binding["collection"], body))
        for obj in logged.get("objects") or []:
            if isinstance(obj, dict) and isinstance(obj.get("state"), dict):
                collection = self.collection_of.get(str(obj.get("type")))
                if collection:
                    out.append((collection, {"id": obj.get("id"), **obj["state"]}))
        return out

    def _observe(
        self, state: dict[str, Any], logged: dict[str, Any], binding: dict[str, Any] | None
    ) -> None:
        """What the log shows of objects after a call becomes the state."""
        seen = self.shown(binding or {}, logged)
        for collection, shown in seen:
            records = state.setdefault(collection, [])
            old = find(records, "id", shown.get("id"))
            if old is None:
                records.append(dict(shown))
            else:
                old.update(shown)


# -- learning conditions ------------------------------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


_IDENTITY = re.compile(r"(^|_)(id|ids|actor|email|name|key|uuid|by|at)$")
_REFERENCE = re.compile(r"(^|_)(id|ids|actor|key|uuid|by|at)$")


# read by relations only, never as values
_RELATIONAL = ("hist.", "match.", "matched.", "matchrec.", "limit.")


def usable(key: str, values: list[Any]) -> bool:
    """Whether a rule of the business may read this feature: not identities (ids, actors,
    emails, names, times: who or when, not what) and not values nearly all different."""
    if key.startswith(_RELATIONAL):
        return False
    field = key.split(".", 1)[-1].split("~", 1)[0].lower()
    if key.startswith(("type.", "fmt.")) and _REFERENCE.search(field):
        return False  # the shape of an id or an actor says who, never what
    if _IDENTITY.search(field) and not key.endswith(".exists") and not key.startswith("has."):
        return False
    if not all(_hashable(v) for v in values):
        return False
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    present = [v for v in values if v is not None]
    if present and len(numbers) == len(present):
        return True
    return not (len(present) >= 6 and len(set(present)) > len(present) / 2)


_CALL_FEATURES = ("arg.", "has.", "type.", "fmt.")
# which features explain which refusals first: a 404 the record's absence, a 401/403 the
# caller's role, a 409 the record's state, a 400/422 the request itself
_FIRST = {404: ("rec.exists",), 410: ("rec.exists",), 401: ("role",), 403: ("role",)}


def priority(cond: Condition, status: int = 0) -> int:
    """Which explanation to prefer when two fit as well (lower first): the family the
    refusal's status points to, then the caller's role, the record the call names, the
    related records, the other arguments, the request's size. A relation between two
    features is as likely as the likeliest: it names no value that may not recur."""
    if relational(cond):
        # a relation to an earlier step's actor is read from the history the twin keeps,
        # and a repeated call by one person fits it by chance: after the record's state
        return 3 if any(f.startswith("hist.") for f in cond.reads()) else 1
    if cond.in_ is not None and len(cond.in_) >= 3 and all(_number(v) for v in cond.in_):
        return 5  # a list of amounts is what the log showed, seldom a rule
    feature = cond.feature
    first = _FIRST.get(status)
    if first and feature.endswith(first):
        return 0
    if status in (404, 410) and feature.endswith(".exists"):
        return 1  # a record the call links to is missing (an assessment of no claim)
    if status in (400, 413, 422) and feature.startswith(_CALL_FEATURES):
        return 1 if feature.endswith(".role") else 0
    if status in (409, 412, 423) and (
        feature.startswith("rec.") or feature.endswith(("status", "state"))
    ):
        return 0  # a conflict is about a state: the record's, or a related status
    if feature.endswith(".exists"):
        return 6  # a related record missing explains a 404, seldom anything else
    if feature.endswith(".role"):
        return 1
    if feature == "args.size":
        return 5
    if feature.startswith(_CALL_FEATURES):
        return 4
    return 2 if feature.startswith("rec.") else 3


def _candidates(pos: list[Features], neg: list[Features], keys: list[str]) -> list[Condition]:
    """Single conditions that hold for some positives; the caller checks negatives."""
    out: list[Condition] = []
    for key in keys:
        pv = [p.get(key) for p in pos]
        nv = [n.get(key) for n in neg]
        if not usable(key, pv + nv):
            continue
        pos_set, neg_set = set(pv), set(nv)
        nums = [v for v in nv if isinstance(v, int | float) and not isinstance(v, bool)]
        if nums:
            out.append(Condition(feature=key, above=max(nums)))
            if key != "args.size":
                out.append(Condition(feature=key, below=min(nums)))
        if key == "args.size":
            continue
        fresh = pos_set - neg_set
        present = [v for v in pv + nv if v is not None]
        if not fresh or len(pos_set | neg_set) > MAX_VALUES:
            continue
        if pos_set != {None} and len(present) < 2 * len(set(present)):
            continue  # values seldom repeated: ids, names, dates, not a category
        if key.startswith(_CALL_FEATURES) or pos_set == {None} or len(neg_set) > 4:
            # a call's own values: refuse those seen refused (a role never refused is not
            # known to be forbidden)
            out.append(Condition(feature=key, **{"in": sorted(fresh, key=_label)}))
        else:
            # a record's state among few: a closed set (a life cycle), so any state never
            # seen to succeed refuses; among many (countries) only those seen refused do
            out.append(Condition(feature=key, not_in=sorted(neg_set, key=_label)))
    return out


def _equalities(pos: list[Features], keys: list[str]) -> list[Condition]:
    """``feature == value`` for values many positives share: the first half of a pair."""
    out = []
    for key in keys:
        if key == "args.size" or not usable(key, [p.get(key) for p in pos]):
            continue
        values = Counter(p.get(key) for p in pos if _hashable(p.get(key)))
        for value, n in values.items():
            if value is not None and n >= 1 and len(values) <= MAX_VALUES:
                out.append(Condition(feature=key, **{"in": [value]}))
    return out


def _unread(cond: Condition, feats: Features) -> bool:
    """Whether a feature the condition reads is missing from the call's."""
    return any(feats.get(f) is None for f in cond.reads())


def _covers(conds: list[Condition], feats: Features) -> bool:
    return all(c.holds(feats) for c in conds)


def relational(cond: Condition) -> bool:
    """Whether a condition relates features (or groups them) rather than naming values."""
    sides = (cond.equals, cond.differs, cond.limits, cond.covers, cond.over, cond.under)
    return any(v is not None for v in (*sides, cond.allowed))


def _best(
    pos: list[Features],
    neg: list[Features],
    soft: list[Features],
    status: int,
    said: list[set[float]] | None = None,
    persons: frozenset[str] = frozenset(),
    named: list[set[str]] | None = None,
) -> list[Condition] | None:
    """The one or two conditions that fit the most positives and no negative, preferring
    (see :func:`priority`) the likelier explanation, a relation over a list of values, and
    the fewest ``soft`` negatives (calls refused for another reason, which the order of
    the guards may explain). ``said``: the numbers each positive's answer states;
    ``persons``: features that hold people, read by relations only."""
    keys = sorted({k for f in pos for k in f} | {k for f in neg for k in f})
    values = [k for k in keys if k not in persons]
    best: tuple[tuple[int, ...], list[Condition]] | None = None

    def consider(conds: list[Condition], fit: list[Features]) -> None:
        nonlocal best
        covered = sum(_covers(conds, p) for p in fit)
        rank = sum(priority(c, status) for c in conds)
        related = sum(relational(c) for c in conds)
        clash = sum(_covers(conds, s) for s in soft)
        score = (covered, -rank, related, -clash, -len(conds))
        if covered and (best is None or score > best[0]):
            best = (score, conds)

    found = relations(pos, neg, keys, said, named)
    for cond in [*found, *_candidates(pos, neg, values)]:
        if not any(cond.holds(n) for n in neg):
            consider([cond], pos)
    if best is not None and best[0][0] == len(pos):
        return best[1]
    for first in _equalities(pos, values):
        sub_pos = [p for p in pos if first.holds(p)]
        sub_neg = [n for n in neg if first.holds(n)]
        if not sub_pos or not sub_neg:
            continue
        for cond in _candidates(sub_pos, sub_neg, values):
            if not any(cond.holds(n) for n in sub_neg):
                consider([first, cond], pos)
    return best[1] if best is not None else None


def learn(
    pos: list[Features],
    neg: list[Features],
    soft: list[Features] = (),
    status: int = 0,
    said: list[set[float]] | None = None,
    persons: frozenset[str] = frozenset(),
    named: list[set[str]] | None = None,
) -> list[list[Condition]]:
    """Up to :data:`MAX_RULES` condition sets that together fit the positives and no
    negative (greedy cover); ``said``, parallel to ``pos``, the numbers each refusal's
    answer states (a limit's bound); ``persons``, features never read by value (they
    hold the people who act: see :func:`person_features`); ``named``, the role names each
    refusal's answer states."""
    rules: list[list[Condition]] = []
    left = list(range(len(pos)))
    for _ in range(3 * MAX_RULES):  # tries: a lone exception costs one
        if not left or len(rules) >= MAX_RULES:
            break
        told = [said[i] for i in left] if said is not None else None
        names = [named[i] for i in left] if named is not None else None
        conds = _best([pos[i] for i in left], neg, list(soft), status, told, persons, names)
        if conds is None:
            break
        covered = [i for i in left if _covers(conds, pos[i])]
        # a refusal a relation would explain but for a record the log never showed (a
        # policy made before it began): the same rule over unknown state, not another
        # rule to find in whatever values that call happened to have
        unknown = [
            i
            for i in left
            if i not in covered
            and len(covered) >= 2
            and any(relational(c) and _unread(c, pos[i]) for c in conds)
        ]
        left = [i for i in left if i not in covered and i not in unknown]
        if len(covered) < 2 and len(pos) > 1 and not all(relational(c) for c in conds):
            continue  # one refusal alone: a value it happened to have is no rule
        rules.append(conds)
    return rules


# -- answers as templates ------------------------------------------------------------------


def _placeholders(feats: Features) -> list[tuple[str, Any]]:
    """Features a mined answer may quote, arguments first, longer text first."""
    order = {"arg": 0, "rec": 1, "limit": 3}
    items = [
        (k, v)
        for k, v in feats.items()
        if "~" not in k
        and not k.endswith(".exists")
        and v is not None
        and not isinstance(v, bool | list | dict)
        and (not isinstance(v, str) or len(v) >= 3)
    ]
    return sorted(items, key=lambda kv: (order.get(kv[0].split(".")[0], 2), -len(str(kv[1]))))


def template(answer: Any, feats: Features) -> Any:
    """The answer with the call's own values replaced by placeholders."""
    values = _placeholders(feats)
    if isinstance(answer, dict):
        return {k: template(v, feats) for k, v in answer.items()}
    if isinstance(answer, list):
        return [template(v, feats) for v in answer]
    for key, value in values:
        if answer == value and type(answer) is type(value):
            return "{{" + key + "}}"
    if isinstance(answer, str):
        text = answer
        for key, value in values:
            if isinstance(value, str):
                text = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", "{{" + key + "}}", text)
            elif isinstance(value, int) and abs(value) >= 100:
                # an amount or a limit in a sentence; small numbers are too often chance
                text = re.sub(rf"(?<![\w.{{-]){value}(?![\w.}}])", "{{" + key + "}}", text)
        return text
    return answer


def _answer_for(examples: list[tuple[Features, Any]]) -> Any:
    """The template that reproduces the most of these refusals' answers."""
    best, best_n = None, -1
    for feats, answer in examples[:5]:
        candidate = template(answer, feats)
        n = sum(render(candidate, f) == a for f, a in examples)
        if n > best_n:
            best, best_n = candidate, n
    return best


# -- effects -------------------------------------------------------------------------------


def _effects(calls: _Calls) -> dict[str, ToolRules]:
    creates: dict[str, list[tuple[Features, dict, dict]]] = defaultdict(list)
    updates: dict[str, list[tuple[dict, dict, dict]]] = defaultdict(list)
    hits: Counter[tuple[str, str, str, str, str, str]] = Counter()
    misses: Counter[tuple[str, str, str, str, str, str]] = Counter()
    pending: dict[tuple[str, str], list[tuple[str, str, dict]]] = defaultdict(list)
    last_seen: dict[tuple[str, str], dict] = {}
    # (tool, collection, via, field) -> the values a related record's field took
    took: dict[tuple[str, str, str, str], Counter[str]] = defaultdict(Counter)
    examples: dict[str, Any] = {}
    # records are shared by sessions: a related record seen in a later session shows
    # what the last call that pointed at it did (a claim "paid" after its payout)
    for tool, binding, args, before, feats, logged in calls.walk():
        body = call_result(binding, logged, args, calls.collection_of)
        op = binding.get("op")
        if body is not None and op in ("create", "update"):
            if op == "create" and len(creates[tool]) < MAX_EXAMPLES:
                creates[tool].append((feats, args, body))
            elif op == "update" and before is not None and len(updates[tool]) < MAX_EXAMPLES:
                updates[tool].append((args, dict(before), body, feats))
            pointers = {**body, **args}
            for via, value in pointers.items():
                collection = owner_collection(via, calls.scenario["state"])
                if collection and collection != binding.get("collection"):
                    pending[(collection, str(value))].append((tool, via, body))
        # a related record seen again (an event log may show it in this very event): did
        # it take a value of a record made before?
        for obj in calls.shown(binding, logged):
            ref = (obj[0], str(obj[1].get("id")))
            old = last_seen.get(ref)
            # only the last call that pointed at it since it was last seen can have
            # changed it: the calls before it were seen not to
            latest = pending.pop(ref, [])[-1:]
            if binding.get("collection") == obj[0] and op in ("create", "update"):
                latest = []  # shown after a change of its own: that call made the change
            for source_tool, via, child in latest if old is not None else []:
                for name, value in obj[1].items():
                    if name == "id" or not _hashable(value) or old.get(name) == value:
                        continue
                    took[(source_tool, ref[0], via, name)][_label(value)] += 1
                    examples[_label(value)] = value
                    for src, child_value in child.items():
                        if src == "id":
                            continue
                        for op, fits in (
                            ("set", child_value == value),
                            ("add", _grew_by(old.get(name), value, child_value)),
                        ):
                            key = (source_tool, ref[0], via, name, src, op)
                            if fits:
                                hits[key] += 1
                            elif key in hits:
                                misses[key] += 1
            last_seen[ref] = {**(old or {}), **obj[1]}
    rules: dict[str, ToolRules] = {}
    for tool, rows in creates.items():
        rules[tool] = _create_rules(rows)
    for tool, rows in updates.items():
        rules[tool] = _update_rules(rows)
    # the best-supported effect per related field: a balance that grew by the amount on
    # every payout is an addition, even where it started at 0 and a copy fits too
    ranked = sorted(hits.items(), key=lambda kv: (misses[kv[0]], -kv[1], kv[0][5] != "set"))
    for (tool, collection, via, name, src, op), n in ranked:
        if tool in rules and n >= 2 and misses[(tool, collection, via, name, src, op)] <= n // 10:
            taken = {(p.collection, p.field) for p in rules[tool].parents}
            if (collection, name) not in taken:
                effect = ParentEffect(collection=collection, via=via, field=name, source=src)
                if op != "set":
                    effect.op = op
                rules[tool].parents.append(effect)
    # a field that takes one value whenever the call's related record is seen next (a
    # status), where no field of the new record explains it
    for (tool, collection, via, name), values in sorted(took.items()):
        label, n = values.most_common(1)[0]
        if tool not in rules or n < 2 or n < 0.9 * sum(values.values()):
            continue
        if (collection, name) in {(p.collection, p.field) for p in rules[tool].parents}:
            continue
        rules[tool].parents.append(
            ParentEffect(
                collection=collection,
                via=via,
                field=name,
                source=via,  # the pointer: always in the new record
                op="value",
                constant=examples[label],
            )
        )
    return rules


def _grew_by(old: Any, new: Any, amount: Any) -> bool:
    numbers = (old, new, amount)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
        return False
    return amount != 0 and new - old == amount


def _copies(name: str, rows: list[tuple[dict, Any]]) -> str | None:
    """The argument a field always equals, where there is one."""
    candidates: set[str] | None = None
    for args, value in rows:
        same = {a for a, v in args.items() if v == value and _hashable(v)}
        candidates = same if candidates is None else candidates & same
    return sorted(candidates)[0] if candidates else None


def _create_rules(rows: list[tuple[Features, dict, dict]]) -> ToolRules:
    rules = ToolRules(shape=list(rows[-1][2]))
    fields = sorted({k for _, _, body in rows for k in body} - {"id"})
    for name in fields:
        values = [body.get(name) for _, _, body in rows]
        present = [(args, body[name]) for _, args, body in rows if name in body]
        if all(_is_stamp(v) for v in values):
            rules.stamps[name] = _stamp_style(values[-1])
            continue
        given = [(args, body) for _, args, body in rows if name in args]
        if given and all(args[name] == body.get(name) for args, body in given):
            # the caller gives it; when it does not, the system fills in one value
            absent = {_label(body.get(name)) for _, args, body in rows if name not in args}
            if len(absent) == 1:
                rules.defaults[name] = next(
                    body.get(name) for _, args, body in rows if name not in args
                )
            continue
        source = _copies(name, present)
        if source is not None and source != name:
            rules.copies[name] = source
            continue
        labels = Counter(_label(v) for v in values)
        if len(labels) == 1:
            rules.sets[name] = values[0]
        elif len(labels) <= MAX_VALUES:
            rules.values[name] = _decision_list([(f, body.get(name)) for f, _, body in rows])
    return rules


def _decision_list(rows: list[tuple[Features, Any]]) -> DecisionList:
    labels = Counter(_label(v) for _, v in rows)
    default_label = labels.most_common(1)[0][0]
    by_label = {_label(v): v for _, v in rows}
    decision = DecisionList(default=by_label[default_label])
    for label, _ in reversed(labels.most_common()):
        if label == default_label:
            continue
        pos = [f for f, v in rows if _label(v) == label]
        neg = [f for f, v in rows if _label(v) != label]
        for conds in learn(pos, neg):
            decision.rules.append((conds, by_label[label]))
    return decision


def _update_rules(rows: list[tuple[dict, dict, dict, Features]]) -> ToolRules:
    rules = ToolRules(shape=list(rows[-1][2]))
    fields = sorted({k for _, _, after, _ in rows for k in after} - {"id"})
    for name in fields:
        changed = [
            (args, after.get(name))
            for args, before, after, _ in rows
            if before.get(name) != after.get(name)
        ]
        if not changed:
            continue
        values = [v for _, v in changed]
        if all(_is_stamp(v) for v in values):
            rules.stamps[name] = _stamp_style(values[-1])
            continue
        source = _copies(name, changed)
        if source is not None:
            rules.copies[name] = source
        elif len({_label(v) for v in values}) == 1 and all(
            after.get(name) == values[0] for _, _, after, _ in rows
        ):
            rules.sets[name] = values[0]
        else:
            # a value taken from a record the call points to (the approved amount is
            # the approved assessment's amount)
            linked = _copies(
                name,
                [
                    ({k: v for k, v in f.items() if _linked_value(k)}, after.get(name))
                    for _, before, after, f in rows
                    if before.get(name) != after.get(name)
                ],
            )
            if linked is not None and len(changed) >= 2:
                rules.copies[name] = linked
    return rules


def _linked_value(key: str) -> bool:
    """A feature that holds a field of a record the call points to."""
    head = key.split(".", 1)[0]
    return (
        "." in key
        and "~" not in key
        and head not in ("arg", "rec", "has", "type", "fmt", "args", "hist", "limit")
        and not head.startswith("match")
        and not key.endswith(".exists")
    )


# -- guards --------------------------------------------------------------------------------


def _guards(calls: _Calls, effects: dict[str, ToolRules]) -> dict[str, ToolRules]:
    examples: dict[str, list[tuple[Features, str, Any]]] = defaultdict(list)
    for tool, binding, _args, before, feats, logged in calls.walk(effects):
        unknown = before is None and binding.get("id_arg") and binding.get("op") != "create"
        if unknown and outcome(logged) == "ok":
            continue  # a record made before this session: its state is not known here
        if len(examples[tool]) < MAX_EXAMPLES:
            examples[tool].append((feats, outcome(logged), logged.get("response")))
    rules = dict(effects)
    statuses = _statuses(examples)

    def known(kind: str) -> str:
        # a refusal logged without a status is the same kind as its code with one
        status = statuses.get(kind)
        return f"{status}:{kind.split(':', 1)[1]}" if status is not None else kind

    persons = person_features(examples)
    for tool, logged_rows in examples.items():
        rows = [(f, known(k) if k != "ok" else k, a) for f, k, a in logged_rows]
        kinds = sorted({k for _, k, _ in rows if k != "ok"})
        roles = {r for f, _, _ in rows for r in roles_of(f.get("arg.role") or "")}
        ok = [f for f, k, _ in rows if k == "ok"]
        guards: list[tuple[str, Guard]] = []
        for kind in kinds:
            pos = [(f, a) for f, k, a in rows if k == kind]
            others = [f for f, k, _ in rows if k not in ("ok", kind)]
            code = statuses.get(kind, _status_part(kind))
            if code in (400, 422):
                # refusals that name the field they refuse (RFC 9457 invalid-params):
                # a rule over that field, from what the successful calls gave it
                made, pos = _field_guards(pos, ok, code)
                guards += [(kind, g) for g in made]
            said = [stated_numbers(a) for _, a in pos]
            named = [_named(a, roles) for _, a in pos]
            feats = [f for f, _ in pos]
            for conds in learn(feats, ok, others, code or 0, said, persons, named):
                if code in (401, 403):
                    conds = _as_allowed(conds, pos, ok)
                guard = Guard(when=conds, status=code)
                covered = [(f, a) for f, a in pos if _covers(conds, f)]
                guard.answer = _answer_for([(guard.quoted(f), a) for f, a in covered])
                guard.support = len(covered)
                guards.append((kind, guard))
        ordered = _order(guards, rows)
        target = rules.setdefault(tool, ToolRules())
        target.guards = [g for _, g in ordered]
    return rules


_INVALID_PARAMS = ("invalid-params", "invalid_params", "invalidParams")


def invalid_param(answer: Any) -> tuple[str, str] | None:
    """The one field a validation refusal names, and why (RFC 9457 ``invalid-params``:
    ``[{"name": "incident_date", "reason": "is required"}]``); None for none or several."""
    if not isinstance(answer, dict):
        return None
    found = next((answer[k] for k in _INVALID_PARAMS if k in answer), None)
    if not isinstance(found, list) or len(found) != 1 or not isinstance(found[0], dict):
        return None
    name, reason = found[0].get("name"), found[0].get("reason")
    if not isinstance(name, str) or not name:
        return None
    return name, str(reason or "")


def _field_rule(name: str, pos: list[Features], ok: list[Features]) -> list[Condition] | None:
    """A rule over one field that every refusal naming it breaks and no success does:
    the field missing, else a format, type or value (among few) no success had."""
    has = f"has.{name}"
    if all(p.get(has) is None for p in pos) and all(o.get(has) is not None for o in ok):
        return [Condition(feature=has, **{"in": [None]})]
    for prefix in ("fmt.", "type.", "arg."):
        key = prefix + name
        seen = [o.get(key) for o in ok]
        if not seen or not all(_hashable(v) and v is not None for v in seen):
            continue
        values = set(seen)
        if len(values) > MAX_VALUES or (prefix == "arg." and 2 * len(values) > len(seen)):
            continue  # no category: ids, names, amounts
        if prefix == "type." and values <= _NUMBERS and {p.get(key) for p in pos} <= _NUMBERS:
            continue  # 500 and 500.0 are one JSON number: the value broke the rule
        if all(_hashable(p.get(key)) and p.get(key) not in values for p in pos):
            return [Condition(feature=key, not_in=sorted(values, key=_label))]
    return _allowed_per_group("arg." + name, pos, ok)


MIN_GROUP = 5  # successes of a group before its allowed values are taken as its rule


def _allowed_per_group(key: str, pos: list[Features], ok: list[Features]) -> list[Condition] | None:
    """A value allowed by the group another feature puts the call in (a loss type a
    product covers): per group of the refusals, the values the successful calls of that
    group gave; every refusal's value is not among its group's. Groups come from the
    records the call points to and its other arguments, with few values each."""
    if not all(_hashable(p.get(key)) and p.get(key) is not None for p in pos):
        return None
    given = [o.get(key) for o in ok if o.get(key) is not None]
    if len(set(given)) > MAX_VALUES or 2 * len(set(given)) > len(given):
        return None  # no category (amounts, names): no list of allowed values
    best: tuple[int, Condition] | None = None
    groups = sorted({k for o in ok for k in o} - {key})
    for by in groups:
        if by.startswith(("has.", "type.", "fmt.", "args.", *_RELATIONAL)) or "~" in by:
            continue
        if by.endswith(".exists") or _IDENTITY.search(by.split(".", 1)[-1]):
            continue
        seen: dict[str, set[Any]] = defaultdict(set)
        support: Counter[str] = Counter()
        for o in ok:
            group, value = o.get(by), o.get(key)
            if _hashable(group) and group is not None and _hashable(value):
                seen[str(group)].add(value)
                support[str(group)] += 1
        if not 2 <= len(seen) <= MAX_VALUES:
            continue
        mine = {str(p.get(by)) for p in pos}
        if not all(support[g] >= MIN_GROUP for g in mine):
            continue
        if all(p.get(key) not in seen[str(p.get(by))] for p in pos):
            # every group the successes show well enough, not only the refused ones: a
            # product whose refusals the log never showed has its list all the same
            shown = mine | {g for g in seen if support[g] >= MIN_GROUP}
            allowed = {g: sorted(seen[g], key=_label) for g in sorted(shown)}
            cond = Condition(feature=key, allowed=allowed, allowed_by=by)
            reach = sum(support[g] for g in mine)
            if best is None or reach > best[0]:
                best = (reach, cond)
    return [best[1]] if best else None


_NUMBERS = frozenset({"int", "float"})


def _field_guards(
    pos: list[tuple[Features, Any]], ok: list[Features], status: int
) -> tuple[list[Guard], list[tuple[Features, Any]]]:
    """Guards for the refusals that name one field and why, a guard per field and reason
    where a rule over that field explains them; the refusals left for the learner."""
    groups: dict[tuple[str, str], list[tuple[Features, Any]]] = defaultdict(list)
    left: list[tuple[Features, Any]] = []
    for feats, answer in pos:
        named = invalid_param(answer)
        if named is None:
            left.append((feats, answer))
        else:
            groups[named].append((feats, answer))
    made: dict[str, tuple[list[Condition], list[tuple[Features, Any]]]] = {}
    for (name, _reason), group in groups.items():
        conds = _field_rule(name, [f for f, _ in group], ok) if ok else None
        if conds is None:
            left += group
            continue
        # reasons that differ only in the values they quote (a loss type "not covered by
        # a home policy", "... by a motor policy") are one rule: one guard
        same = json.dumps([c.model_dump(mode="json") for c in conds], sort_keys=True)
        made.setdefault(same, (conds, []))[1].extend(group)
    guards = []
    for conds, group in made.values():
        guard = Guard(when=conds, status=status)
        guard.answer = _answer_for([(guard.quoted(f), a) for f, a in group])
        guard.support = len(group)
        guards.append(guard)
    return guards, left


def _named(answer: Any, roles: set[str]) -> set[str]:
    """The roles an answer names as words ("(role adjuster)", not "senior_adjuster")."""
    text = json.dumps(answer, ensure_ascii=False)
    return {r for r in roles if re.search(rf"(?<![\w-]){re.escape(r)}(?![\w-])", text)}


def _statuses(examples: dict[str, list[tuple[Features, str, Any]]]) -> dict[str, int | None]:
    """Each kind of refusal's status: its own, else the status its error code has where
    the log shows one (``error:duplicate`` takes the 409 another call was answered
    with), else None: a status is never invented."""
    kinds = {k for rows in examples.values() for _, k, _ in rows if k != "ok"}
    by_code: dict[str, Counter[int]] = defaultdict(Counter)
    for kind in kinds:
        status, code = kind.split(":", 1)
        if status.isdigit() and code:
            by_code[code][int(status)] += 1
    out: dict[str, int | None] = {}
    for kind in kinds:
        status, code = kind.split(":", 1)
        if status.isdigit():
            out[kind] = int(status)
        else:
            known = by_code.get(code)
            out[kind] = known.most_common(1)[0][0] if known else None
    return out


def person_features(examples: dict[str, list[tuple[Features, str, Any]]]) -> frozenset[str]:
    """Features that hold the people who act (a ``requester`` or ``approver`` field, a
    record's ``owner``): any whose values include a caller's (``arg.actor``). A rule reads
    them only by relation, so it never lists people ("the approver is one person")."""
    actors = {
        f["arg.actor"]
        for rows in examples.values()
        for f, _, _ in rows
        if isinstance(f.get("arg.actor"), str)
    }
    found = {
        key
        for rows in examples.values()
        for f, _, _ in rows
        for key, value in f.items()
        if isinstance(value, str) and value in actors
    }
    return frozenset(found)


def _status_part(kind: str) -> int | None:
    status = kind.split(":", 1)[0]
    return int(status) if status.isdigit() else None


def _as_allowed(
    conds: list[Condition], pos: list[tuple[Features, Any]], ok: list[Features]
) -> list[Condition]:
    """A permission learned as the roles seen refused, turned into the roles allowed
    where every refusal names them (``allowed_roles``): a role the log never showed is
    then refused as the system would refuse it."""
    if len(conds) != 1 or conds[0].feature != "arg.role" or conds[0].in_ is None:
        return conds
    granted = {str(f["arg.role"]) for f in ok if isinstance(f.get("arg.role"), str)}
    named = allowed_roles([a for _, a in pos], granted, {str(v) for v in conds[0].in_})
    if not named:
        return conds
    return [Condition(feature="arg.role", not_in=named)]


def _phase(guard: Guard) -> int:
    """Checks of the call itself come first, then whether its records exist, then their
    state (a service validates a request before it reads the database)."""
    feats = [f for c in guard.when for f in c.reads()]
    if all(f.startswith("arg.") for f in feats):
        return 0
    if any(f.endswith(".exists") for f in feats):
        return 1
    return 2


def _order(
    guards: list[tuple[str, Guard]], rows: list[tuple[Features, str, Any]]
) -> list[tuple[str, Guard]]:
    """Guards in the order the system checks them: by phase, then by the calls that fit
    two guards (the one whose answer the system gave goes first)."""

    def before(a: tuple[str, Guard], b: tuple[str, Guard]) -> int:
        if _phase(a[1]) != _phase(b[1]):
            return _phase(a[1]) - _phase(b[1])
        a_wins = sum(1 for f, k, _ in rows if k == a[0] and b[1].holds(f))
        b_wins = sum(1 for f, k, _ in rows if k == b[0] and a[1].holds(f))
        if a_wins != b_wins:
            return b_wins - a_wins
        return b[1].support - a[1].support

    return sorted(guards, key=cmp_to_key(before))


def mine_behaviour(world_dir: str | Path) -> dict[str, Any]:
    """Mine the world's behaviour, write ``behaviour.json`` and return it."""
    root = Path(world_dir)
    calls = _Calls(root)
    rules = _guards(calls, _effects(calls))
    data = {
        "version": VERSION,
        "tools": {
            tool: r.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            for tool, r in sorted(rules.items())
        },
    }
    tmp = root / (BEHAVIOUR_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(root / BEHAVIOUR_FILE)
    return data
