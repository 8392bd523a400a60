"""Consistent pseudonyms for personal and account data in imported logs.

The same input always gets the same pseudonym (a keyed hash, so a world built twice from
one log, or from two logs of one company, names the same customer the same way), and
the pseudonym keeps the value's shape: an email stays an email, an account number keeps
its length in digits. :data:`RULES` lists what is masked; a world's manifest repeats it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re

import re2

from simgym.logs.model import JSON, LogRecord, ObjectRef

RULES = [
    "person names: values of keys name, first_name, last_name, full_name, surname, "
    "given_name, family_name, display_name, username and any key ending in _name that "
    "names a person (customer_, applicant_, borrower_, client_, owner_, holder_, "
    "contact_, employee_, user_) -> 'Person-xxxxxx'",
    "emails: any email address, in any string -> 'user-xxxxxx@example.com'",
    "phone numbers: values of keys containing phone, mobile, fax -> digits of the same length",
    "account-like numbers: values of keys containing account, iban, card, ssn, tax_id, "
    "routing, acct (but not references to records, *_id: those are masked like ids), "
    "and any run of 9 or more digits in a string -> digits of the same length (letters "
    "kept as letters)",
    "actors: every actor id, values of keys actor and *_by (created_by, checked_by), of "
    "keys naming a person's part in a process (requester, approver, buyer, assignee, "
    "reviewer, user, employee, ... with or without _id), and any value or word of free "
    "text (an error message) that is a known actor id -> 'actor-xxxxxx' (an actor id "
    "that is an email gets the email's pseudonym), the same pseudonym as in the actor "
    "field (roles are kept)",
    "consistency: the pseudonym is an HMAC-SHA256 of the value under one key; the same "
    "value is masked the same way everywhere (arguments, responses, entities, object ids)",
]

_PARAM_KEYS = frozenset({"name", "reason"})  # a member of RFC 9457's invalid-params
_NAME_KEYS = {
    "name",
    "firstname",
    "lastname",
    "fullname",
    "surname",
    "givenname",
    "familyname",
    "displayname",
    "username",
}
_PERSON_PREFIXES = (
    "customer",
    "applicant",
    "borrower",
    "client",
    "owner",
    "holder",
    "contact",
    "employee",
    "user",
    "patient",
)
# keys whose value is the person who took a part in a process step: masked as an actor,
# so a rule comparing the step's actor with the record's requester still sees them equal
_ACTOR_WORDS = frozenset(
    {
        "actor",
        "requester",
        "requestor",
        "approver",
        "buyer",
        "purchaser",
        "orderer",
        "assignee",
        "reviewer",
        "submitter",
        "author",
        "creator",
        "initiator",
        "performer",
        "clerk",
        "user",
        "userid",
        "enduser",
        "employee",
        "agent",
        "operator",
        "signer",
        "payer",
        "receiver",
        "recipient",
        "verifier",
        "checker",
        "maker",
        "owner",
        "handler",
        "decider",
    }
)
_PHONE = ("phone", "mobile", "fax")
_ACCOUNT = ("account", "iban", "card", "ssn", "taxid", "routing", "acct")
_NOT_ACCOUNT = ("accounttype", "cardtype", "accountstatus", "cardstatus")
# Masking reads every string of a log, and a log may hold megabytes in one value: both
# scans are linear in the text. Python's backtracking engine took quadratic time on the
# email pattern (100 KB of letters without an "@": 48 s); RE2 matches it in one pass.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
EMAIL = re2.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}", _RE2_OPTIONS)
# A run of 9+ digits, not part of a dotted/colon-separated number (a version, an IP, a
# time) nor after a hyphen: maximal runs are found (each digit is read once) and their
# neighbours checked, which is what (?<![\d.:-])\d{9,}(?![\d.:]) means.
_DIGIT_RUN = re.compile(r"\d+")


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _actor_word(norm: str) -> bool:
    """A normalised key naming a person's part: "approver", "approverid", "approvers",
    "enduser.id" (as "enduserid"), "requested_by" is handled by its suffix."""
    for word in (norm, norm[:-1] if norm.endswith("s") else norm):
        stem = word[: -len("id")] if word.endswith("id") and len(word) > 2 else word
        if word in _ACTOR_WORDS or stem in _ACTOR_WORDS:
            return True
    return False


@functools.lru_cache(maxsize=4096)  # a log has few distinct keys, each asked about often
def key_kind(key: str | None) -> str | None:
    """What a key's value is masked as: "actor", "name", "phone", "account", or None."""
    if not key:
        return None
    norm = _norm(key)
    if key.lower().endswith("_by") or _actor_word(norm):
        return "actor"
    if norm in _NAME_KEYS or (norm.endswith("name") and norm[: -len("name")] in _PERSON_PREFIXES):
        return "name"
    if any(p in norm for p in _PHONE):
        return "phone"
    # a reference (account_id) names a record by the id the record itself has, and ids
    # are masked like any text: masked as an account number, it would point nowhere
    reference = key.endswith(("_id", "_ids", "Id", "Ids", "-id"))
    if any(a in norm for a in _ACCOUNT) and norm not in _NOT_ACCOUNT and not reference:
        if not norm.endswith(("count", "type", "status", "types")):
            return "account"
    return None


class Masker:
    """Masks values with pseudonyms keyed by ``key`` (any text; keep it to reproduce)."""

    def __init__(self, key: str = "simgym") -> None:
        if not isinstance(key, str) or not key:
            raise ValueError("a mask key is non-empty text")
        self._key = key.encode()
        self.counts: dict[str, int] = {}
        # actor ids seen so far (in actor fields and person-keyed fields): their values
        # anywhere else, and their words in free text, get the same pseudonym
        self.actors: set[str] = set()
        self._roles: set[str] = set()
        self._pattern: re2._Regexp | None = None
        self._stale = False  # actors or roles changed since the pattern was made

    def actor(self, value: str) -> str:
        """An actor id's pseudonym; the id is remembered, so it is masked everywhere later."""
        if value not in self.actors:
            self.actors.add(value)
            self._stale = True
        return self._as_actor(value)

    def _as_actor(self, value: str) -> str:
        # an actor named by an email keeps the email's pseudonym: the same person is
        # often the "email" field of a record too, and the value keeps its shape
        if "@" in value and EMAIL.fullmatch(value):
            return self.pseudonym("email", value)
        return self.pseudonym("actor", value)

    def _in_text(self, actor: str) -> bool:
        """Whether an actor id is distinctive enough to be looked for inside free text (a
        two-letter id or a short number would match ordinary words and amounts)."""
        if actor in self._roles or len(actor) < 3 or not actor.strip() == actor:
            return False
        return not actor.isdigit() or len(actor) >= 6

    def _actors_in(self, value: str) -> str:
        if self._stale:
            self._stale = False
            wanted = sorted((a for a in self.actors if self._in_text(a)), key=len, reverse=True)
            self._pattern = None
            if not wanted:
                return value
            options = re2.Options()
            options.log_errors = False
            options.longest_match = True
            # RE2 keeps the scan linear however many actors there are; neighbours are
            # checked in Python, at matches only (RE2 has no lookaround)
            self._pattern = re2.compile("|".join(re.escape(a) for a in wanted), options)
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda m: self._actor_word(m, value), value)

    def _actor_word(self, match: re2._Match, text: str) -> str:
        start, end = match.span()
        before = text[start - 1] if start > 0 else " "
        after = text[end] if end < len(text) else " "
        after_next = text[end + 1] if end + 1 < len(text) else " "
        inside = before.isalnum() or before in "_-@." or after.isalnum() or after in "_-@"
        if inside or (after == "." and after_next.isalnum()):
            return match.group(0)  # part of a longer word, id or address
        return self._as_actor(match.group(0))

    def _digest(self, kind: str, value: str) -> str:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return hmac.new(self._key, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()

    def pseudonym(self, kind: str, value: str) -> str:
        digest = self._digest(kind, value)
        if kind == "name":
            return f"Person-{digest[:6]}"
        if kind == "email":
            return f"user-{digest[:6]}@example.com"
        if kind == "actor":
            return f"actor-{digest[:6]}"
        digits = str(int(digest, 16))
        out, i = [], 0
        for ch in value:  # digits of the same length, separators and letters kept in place
            if ch.isdigit():
                out.append(digits[i % len(digits)])
                i += 1
            else:
                out.append(ch)
        return "".join(out)

    def text(self, value: str) -> str:
        """Known actor ids, emails and long digit runs inside free text."""
        if value in self.actors and self._in_text(value):
            return self._as_actor(value)
        if self.actors and len(value) >= 3:
            value = self._actors_in(value)
        if "@" in value:
            value = EMAIL.sub(lambda m: self.pseudonym("email", m.group(0)), value)
        return _DIGIT_RUN.sub(lambda m: self._long_digits(m, value), value)

    def _long_digits(self, match: re.Match[str], text: str) -> str:
        run = match.group(0)
        start, end = match.span()
        if (
            len(run) < 9
            or (start > 0 and text[start - 1] in ".:-")
            or (end < len(text) and text[end] in ".:")
        ):
            return run
        return self.pseudonym("account", run)

    def value(self, value: JSON, key: str | None = None) -> JSON:
        """A JSON value with what :data:`RULES` names masked (``key``: the key it is under)."""
        kind = key_kind(key)
        if isinstance(value, dict):
            if _PARAM_KEYS <= set(value) and isinstance(value.get("name"), str):
                # an RFC 9457 invalid-params member: its name is a request field's,
                # no person's ({"name": "incident_date", "reason": "is required"})
                return {
                    k: (self.text(v) if k == "name" else self.value(v, k)) for k, v in value.items()
                }
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key) for v in value]
        if isinstance(value, str):
            # a known actor's id under any key is that actor (an approver_2 field), unless
            # the id is so short that it is likely another value (a term of "7")
            if kind == "actor" or (value in self.actors and self._in_text(value)):
                return self.actor(value) if value else value
            if "@" in value and EMAIL.fullmatch(value.strip()):
                return self.pseudonym("email", value.strip())
            if kind == "name":
                return self.pseudonym("name", value)
            if kind in ("phone", "account"):
                return self.pseudonym(kind, value)
            return self.text(value)
        if isinstance(value, int) and not isinstance(value, bool) and kind in ("phone", "account"):
            return int(self.pseudonym(kind, str(value)))
        return value

    def record(self, record: LogRecord) -> LogRecord:
        """A masked copy of a record (the original is left as it is)."""
        if record.role and record.role not in self._roles:
            self._roles.add(record.role)  # a role is kept, even where it names an actor
            self._stale = True
        # the actor first: its id inside this record's bodies and messages is then known
        actor = self.actor(record.actor) if record.actor else None
        return LogRecord(
            session=self.text(record.session),
            operation=record.operation,
            system=record.system,
            time=record.time,
            actor=actor,
            role=record.role,
            method=record.method,
            arguments=self.value(record.arguments),
            status=record.status,
            error=record.error,
            response=self.value(record.response),
            objects=[
                ObjectRef(
                    o.type,
                    self.text(o.id),
                    o.qualifier,
                    self.value(o.state) if o.state is not None else None,  # type: ignore[arg-type]
                )
                for o in record.objects
            ],
            duration_ms=record.duration_ms,
            source=record.source,
            attributes=self.value(record.attributes),  # type: ignore[arg-type]
            path=self.text(record.path) if record.path else None,
        )
