"""Kinds of business refusal, for reporting a twin's fidelity per kind (``logs eval``).

A refusal's kind is read from the mined guard that explains it (what its conditions
relate: a record's status, the caller's role, an amount and a limit, the actor and a
person on the record, ...) or, where no guard does, from the real answer's error code
and status. What neither tells is ``unknown``: never guessed into a kind.
"""

from __future__ import annotations

import re
from typing import Any

LIFE_CYCLE = "life-cycle"
PERMISSION = "permission"
LIMIT = "limit"
SELF_APPROVAL = "self-approval"
SEGREGATION = "segregation of duties"
MATCH = "match"
DUPLICATE = "duplicate"
VALIDATION = "validation"
NOT_FOUND = "not found"
UNKNOWN = "unknown"
KINDS = (
    LIFE_CYCLE,
    PERMISSION,
    LIMIT,
    SELF_APPROVAL,
    SEGREGATION,
    MATCH,
    DUPLICATE,
    VALIDATION,
    NOT_FOUND,
    UNKNOWN,
)

_STATUS_FIELD = re.compile(r"(^|[._])(status|state|stage|lifecycle)$|_(status|state)$")
# words of error codes, checked in this order (a "duplicate_approval_limit" is a limit)
_CODE_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (SELF_APPROVAL, re.compile(r"self|own_(request|approval)|same_(requester|person)")),
    (
        SEGREGATION,
        re.compile(r"segregat|separation|four_eyes|sod\b|duties|same_actor|same_user"),
    ),
    (LIMIT, re.compile(r"limit|exceed|threshold|too_high|over_budget")),
    (DUPLICATE, re.compile(r"duplicat|already_exists|exists_already|not_unique")),
    (MATCH, re.compile(r"match|mismatch|three_way|disagree")),
    (LIFE_CYCLE, re.compile(r"transition|state|status|not_allowed_in|already_")),
    (PERMISSION, re.compile(r"forbidden|permission|unauthori|unauthenticated|role|denied")),
    (NOT_FOUND, re.compile(r"not_found|unknown_(id|record)|no_such")),
    (VALIDATION, re.compile(r"valid|required|missing|format|too_large|bad_request|malformed")),
)


def _words(code: str) -> str:
    """An error code in snake case ("approvalLimitExceeded" -> "approval_limit_exceeded")."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", code)
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")


def _named_kind(code: str | None) -> str | None:
    """The kind an error code's words name, or None."""
    words = _words(code or "")
    if words:
        for kind, pattern in _CODE_WORDS:
            if pattern.search(words):
                return kind
    return None


def code_kind(code: str | None, status: int | None) -> str:
    """The kind an error code names, else the one its status names, else ``unknown``."""
    named = _named_kind(code)
    if named is not None:
        return named
    if status in (401, 403):
        return PERMISSION
    if status == 404:
        return NOT_FOUND
    if status in (400, 413, 422):
        return VALIDATION
    return UNKNOWN


# kinds that are one family: a rule about who may act, told apart only by whose step it
# compares with (a "four_eyes" code may be either)
_FAMILY = {SELF_APPROVAL: "people", SEGREGATION: "people"}


def refusal_kind(
    guard: dict[str, Any] | None,
    code: str | None,
    status: int | None,
    creates: frozenset[str] = frozenset(),
) -> tuple[str, str]:
    """A real refusal's kind and where it was read: ``"mined guard"`` (the guard that
    explains it), ``"error code"`` or ``"status"`` (the real answer), or ``"unknown"``.
    A guard whose kind the error code contradicts (an ``invalid_transition`` explained by
    who acted) is taken as the miner's mistake: the code's word wins."""
    from_code = _named_kind(code)
    from_guard = guard_kind(guard, creates) if guard is not None else UNKNOWN
    if from_guard != UNKNOWN and (
        from_code is None
        or from_code == from_guard
        or _FAMILY.get(from_code, from_code) == _FAMILY.get(from_guard, from_guard)
    ):
        return from_guard, "mined guard"
    if from_code is not None:
        return from_code, "error code"
    by_status = code_kind(None, status)
    return by_status, ("status" if by_status != UNKNOWN else UNKNOWN)


def guard_kind(guard: dict[str, Any], creates: frozenset[str] = frozenset()) -> str:
    """The kind of a mined guard (a ``behaviour.json`` guard), from what its conditions
    read; ``unknown`` when they say nothing a kind is made of. ``creates``: the tools that
    create a record (the actor of that step, ``hist.<tool>``, is the record's requester:
    the same actor again is self-approval, not segregation of two later duties)."""
    conds = [c for c in guard.get("when") or [] if isinstance(c, dict)]
    features = [str(c.get("feature") or "") for c in conds]
    for cond in conds:
        feature = str(cond.get("feature") or "")
        other = str(cond.get("equals") or "")
        if other and "arg.actor" in (feature, other):
            # who acts, compared with whoever took an earlier step or a person field
            compared = other if feature == "arg.actor" else feature
            if compared.startswith("hist."):
                return SELF_APPROVAL if compared[5:] in creates else SEGREGATION
            if compared.startswith("rec."):
                return SELF_APPROVAL
        if cond.get("differs") or cond.get("over") or cond.get("under"):
            # two records' fields that must agree, or one within the other's bounds
            # (an amount within a policy's cover, a date within its term)
            return MATCH
        if cond.get("covers") is not None or feature.startswith("match."):
            return DUPLICATE
        if cond.get("limits") is not None:
            return LIMIT
    if any(f.endswith(".exists") for f in features):
        return NOT_FOUND  # the record the call names, or one it points to, is missing
    bounded = any(c.get("above") is not None or c.get("below") is not None for c in conds)
    if bounded and any(f in ("arg.role", "arg.actor") for f in features):
        return LIMIT
    # a status of the record, or of a linked one (a customer's KYC status)
    stated = [f.split(".", 1) for f in features if "." in f]
    if any(head != "arg" and _STATUS_FIELD.search(rest) for head, rest in stated):
        return LIFE_CYCLE
    if features and all(f in ("arg.role", "arg.actor") for f in features):
        return PERMISSION
    if any(f.startswith(("fmt.", "has.", "args.")) for f in features):
        return VALIDATION
    if features and all(f.startswith("arg.") for f in features):
        return VALIDATION  # the request's own values decide, not the state
    return UNKNOWN
