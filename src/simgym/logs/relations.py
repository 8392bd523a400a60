"""Guards over relations, not over values: the candidates :mod:`.behaviour` weighs.

A back office refuses by relations between what a call says and what the records hold:
the caller is the record's requester (self-approval), the caller did an earlier step on
the same record (segregation of duties), an amount is above the limit of the caller's
role, linked records disagree (a three-way match), a record with the same fields exists
(a duplicate). Learned over values instead, such a rule names the people and amounts the
log happened to show; these candidates name features only, so they hold for people and
amounts the log never showed. Each is a :class:`~simgym.domains.mcp_rules.Condition`,
plain data in ``behaviour.json``.

Also here: what a refusal's answer states (the numbers in it, a list of allowed roles),
and the status of a logged call whose format carries none (from its error body).
"""

from __future__ import annotations

import re
from typing import Any

from simgym.domains.mcp_rules import Condition, Features, compare, same

_VALUE_SIDES = ("arg.", "rec.", "hist.")  # what a value is compared with, besides links
_NOT_LINKED = (
    "arg.",
    "has.",
    "type.",
    "fmt.",
    "args.",
    "match.",
    "matched.",
    "matchrec.",
    "limit.",
    "rec.",
    "hist.",
)
_GROUPS = ("arg.role", "arg.actor")  # who a limit may depend on, the role first
# a number in text, with or without thousands separators ("EUR 5,000.00", "5000")
_NUMBER = re.compile(r"(?<![\w.,])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w.]|,\d)")
_STATUS_KEYS = ("status", "status_code", "statusCode", "http_status", "httpStatus")


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _linked(key: str) -> bool:
    """A feature of a record the call points to (``accounts.customer_id``)."""
    return "." in key and not key.startswith(_NOT_LINKED)


def _field(key: str) -> str:
    return key.split(".", 1)[1] if "." in key else key


def _same_field(a: str, b: str) -> bool:
    """One field under two names: the same name, or one the other qualified (a payout's
    ``amount`` and its invoice's ``approved_amount``)."""
    if a == b:
        return True
    # "id" qualifies to every link ("customer_id"): a record's own id is no amount of it
    short, long = sorted((a, b), key=len)
    return short not in ("id", "key", "uuid") and long.endswith("_" + short)


def relations(
    pos: list[Features],
    neg: list[Features],
    keys: list[str],
    said: list[set[float]] | None = None,
    named: list[set[str]] | None = None,
) -> list[Condition]:
    """Relational conditions that hold for every positive; the caller checks negatives.
    ``said`` and ``named``, parallel to ``pos``: the numbers and the role names each
    refusal's answer states."""
    if not pos:
        return []
    return [
        *_equal_pairs(pos, keys),
        *_differing_pairs(pos, keys),
        *_limits(pos, neg, keys, said, named),
        *_orders(pos, keys),
        *_duplicates(pos, neg, keys),
    ]


def roles_of(group: Any) -> list[str]:
    """The roles of a caller with several (``"finance,senior_adjuster"``), or its one."""
    return [r.strip() for r in str(group).split(",") if r.strip()]


def _group(p: Features, by: str, named: set[str] | None) -> str:
    """The group a refusal's limit applied to: the caller's role, or, for a caller with
    several, the one role its answer names ("(role adjuster)")."""
    group = str(p[by])
    members = roles_of(group)
    if by == "arg.role" and len(members) > 1 and named:
        stated = [r for r in members if r in named]
        if len(stated) == 1:
            return stated[0]
    return group


def _equal_pairs(pos: list[Features], keys: list[str]) -> list[Condition]:
    """``arg.x`` equals a field of the record, of a linked record, or an earlier step's
    actor, in every positive (the requester approving: ``arg.actor`` = ``rec.created_by``)."""
    first = pos[0]
    out = []
    for a in keys:
        if not a.startswith("arg.") or "~" in a or not _scalar(first.get(a)):
            continue
        for b in keys:
            if (
                (b.startswith("arg.") and b <= a)
                or "~" in b
                or not (b.startswith(_VALUE_SIDES) or _linked(b))
            ):
                continue
            if _finds_the_record(a, b):
                continue
            if all(_scalar(p.get(b)) and same(p.get(a), p.get(b)) for p in pos):
                out.append(Condition(feature=a, equals=b))
    return out


_KEY_ENDINGS = ("id", "_number", "_no", "_key", "uuid", "_code")


def _finds_the_record(a: str, b: str) -> bool:
    """``arg.customer_id`` = ``rec.id``: the argument that names the record equals its key
    on every call that found one, so it explains nothing (a lone refused lookup became
    "refused whenever the customer is the one asked for")."""
    if not b.startswith("rec.") or "." in b[4:]:
        return False
    field, arg = b[4:], _field(a)
    return field == "id" or (field == arg and field.endswith(_KEY_ENDINGS))


def _differing_pairs(pos: list[Features], keys: list[str]) -> list[Condition]:
    """Two features of one field name that disagree in every positive: the call's and the
    record's (an amount not the approved one), or the record's and a linked record's (an
    account of another customer)."""
    out = []
    sides = [k for k in keys if "~" not in k and (k.startswith(("arg.", "rec.")) or _linked(k))]
    for i, a in enumerate(sides):
        for b in sides[i + 1 :]:
            if not _same_field(_field(a), _field(b)) or a.split(".", 1)[0] == b.split(".", 1)[0]:
                continue
            if b.startswith("arg.") and not a.startswith("arg."):
                a, b = b, a
            if all(_scalar(p.get(a)) and _scalar(p.get(b)) and p.get(a) != p.get(b) for p in pos):
                out.append(Condition(feature=a, differs=b))
    return out


def _limits(
    pos: list[Features],
    neg: list[Features],
    keys: list[str],
    said: list[set[float]] | None,
    named: list[set[str]] | None = None,
) -> list[Condition]:
    """A number above a bound of its group (role or actor): per group the bound a refusal
    states, when one lies between the group's largest success and smallest refusal, else
    the largest success; a group with neither has no known bound. Where a bound per role
    is stated for every role refused, only those limits are candidates. A caller with
    several roles is refused under the one role its refusal names, so the bound is that
    role's (the twin gives such a caller the largest bound of its roles)."""
    out = []
    numeric = [
        k
        for k in keys
        if (k.startswith(("arg.", "rec.")) or _linked(k))
        and "~" not in k
        and all(_number(p.get(k)) for p in pos)
    ]
    told: list[Condition] = []  # limits whose every bound a refusal stated
    for by in _GROUPS:
        if not all(_scalar(p.get(by)) for p in pos):
            continue
        groups = [_group(p, by, named[i] if named else None) for i, p in enumerate(pos)]
        for key in numeric:
            limits: dict[str, float] = {}
            every_stated = True
            for group in set(groups):
                mine = [i for i, g in enumerate(groups) if g == group]
                low = min(pos[i][key] for i in mine)
                oks = [n[key] for n in neg if str(n.get(by)) == group and _number(n.get(key))]
                top = max(oks) if oks else None
                if top is not None and top >= low:
                    break  # a success above a refusal: no bound of this group explains it
                stated = set.intersection(*(said[i] for i in mine)) if said else set()
                fits = sorted(b for b in stated if (top is None or b >= top) and b < low)
                if fits:
                    limits[group] = fits[-1]
                elif top is not None:
                    limits[group] = float(top)
                every_stated = every_stated and bool(fits)
            else:
                if limits and every_stated and by == _GROUPS[0]:
                    told.append(Condition(feature=key, limits=limits, limit_by=by))
                if limits:
                    out.append(Condition(feature=key, limits=limits, limit_by=by))
    # a bound per role that the refusals themselves state is the rule; bounds read off
    # the largest success, or per person, are only what the log happened to show
    return told or out


def _orders(pos: list[Features], keys: list[str]) -> list[Condition]:
    """A number or a date above or below another feature of a record the call names or
    points to, in every positive: an amount over the policy's coverage, an incident
    before the policy's start. Keys and ids are never compared (their order is chance)."""
    sides = [
        k
        for k in keys
        if "~" not in k
        and (k.startswith(("arg.", "rec.")) or _linked(k))
        and not _field(k).lower().endswith(_KEY_ENDINGS)
        and all(p.get(k) is None or _ordered(p.get(k)) for p in pos)
    ]
    out = []
    for i, a in enumerate(sides):
        for b in sides[i + 1 :]:
            if a.split(".", 1)[0] == b.split(".", 1)[0]:
                continue  # two fields of one record: a relation the call cannot change
            if b.startswith("arg.") and not a.startswith("arg."):
                a, b = b, a
            # a refusal whose linked record the log never showed has no side to compare:
            # the relation is read from the ones that have both
            both = [p for p in pos if p.get(a) is not None and p.get(b) is not None]
            if 2 * len(both) < len(pos) or (len(both) < 2 < len(pos)):
                continue
            signs = {compare(p.get(a), p.get(b)) for p in both}
            if signs == {1}:
                out.append(Condition(feature=a, over=b))
            elif signs == {-1}:
                out.append(Condition(feature=a, under=b))
    return out


def _ordered(value: Any) -> bool:
    return compare(value, value) == 0


def _duplicates(pos: list[Features], neg: list[Features], keys: list[str]) -> list[Condition]:
    """A record of a collection agreeing with the call on the fields every positive's
    closest record agrees on (two or more): a duplicate. Where successful calls also
    found such a record, the records they found may all be in states the refused calls'
    were not (a rejected claim is no duplicate): those states are then excepted."""
    out = []
    for key in keys:
        if not key.startswith("match."):
            continue
        common: set[str] | None = None
        for p in pos:
            sets = p.get(key)
            if not isinstance(sets, list) or not sets:
                common = set()
                break
            widest = set(max(sets, key=len))
            common = widest if common is None else common & widest
        if common and len(common) >= 2:
            cond = Condition(feature=key, covers=sorted(common))
            clashes = [n for n in neg if cond.holds(n)]
            unless = _excepted(cond, pos, clashes) if clashes else None
            out.append(cond if unless is None else cond.model_copy(update={"unless": unless}))
    return out


def _matched(cond: Condition, feats: Features) -> list[dict[str, Any]]:
    """The records that agree with a call on every field ``cond`` covers."""
    sets = feats.get(cond.feature) or []
    found = feats.get("matchrec." + cond.feature.split(".", 1)[-1]) or []
    wanted = set(cond.covers or ())
    return [
        r
        for fields, r in zip(sets, found, strict=False)
        if isinstance(r, dict) and wanted <= set(fields)
    ]


def _excepted(
    cond: Condition, pos: list[Features], clashes: list[Features]
) -> dict[str, list[Any]] | None:
    """A field of the matched records whose values, on every success that found a
    match, are ones no refusal's match had: the states a duplicate ignores."""
    theirs = [r for n in clashes for r in _matched(cond, n)]
    mine = [_matched(cond, p) for p in pos]
    fields = sorted({k for r in theirs for k in r} - set(cond.covers or ()))
    best: tuple[tuple[int, int], str, list[Any]] | None = None
    for name in fields:
        if _field(name).lower().endswith(_KEY_ENDINGS) or name == "id":
            continue
        values = {r.get(name) for r in theirs}
        if None in values or len(values) > 4 or not all(_scalar(v) for v in values):
            continue
        if all(any(r.get(name) not in values for r in rs) for rs in mine):
            # a field every record holds (a state) over one some records lack (who
            # assessed it, not yet set on a new claim): the lacking ones fit by chance
            lacking = sum(r.get(name) is None for rs in mine for r in rs)
            rank = (lacking, len(values))
            if best is None or rank < best[0]:
                best = (rank, name, sorted(values, key=str))
    return {best[1]: best[2]} if best else None


# -- what an answer says -------------------------------------------------------------------


def stated_numbers(answer: Any) -> set[float]:
    """Every number an answer states, as a value or inside its text."""
    found: set[float] = set()
    if _number(answer):
        found.add(float(answer))
    elif isinstance(answer, str):
        found.update(float(m.replace(",", "")) for m in _NUMBER.findall(answer))
    elif isinstance(answer, dict):
        for value in answer.values():
            found |= stated_numbers(value)
    elif isinstance(answer, list):
        for value in answer:
            found |= stated_numbers(value)
    return found


def _string_lists(answer: Any) -> list[list[str]]:
    if isinstance(answer, list):
        if answer and all(isinstance(v, str) for v in answer):
            return [answer]
        return [x for v in answer for x in _string_lists(v)]
    if isinstance(answer, dict):
        return [x for v in answer.values() for x in _string_lists(v)]
    return []


def allowed_roles(answers: list[Any], ok: set[str], refused: set[str]) -> list[str] | None:
    """The roles a permission refusal says are allowed: a list of names in every answer
    holding each role seen to succeed and none seen refused; None when none says so."""
    common: set[str] | None = None
    for answer in answers:
        fits = [
            set(names)
            for names in _string_lists(answer)
            if ok <= set(names) and not set(names) & refused
        ]
        if not fits:
            return None
        union = set().union(*fits)
        common = union if common is None else common & union
    return sorted(common) if common else None


def status_of(record: dict[str, Any]) -> int | None:
    """A logged call's status: the log's own, else the one its error body names (GenAI
    spans, OCEL and XES carry none); never a guess."""
    status = record.get("status")
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    body = record.get("response")
    for where in (body.get("error") if isinstance(body, dict) else None, body):
        if not isinstance(where, dict):
            continue
        for key in (*_STATUS_KEYS, "code"):
            value = where.get(key)
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
    return None
