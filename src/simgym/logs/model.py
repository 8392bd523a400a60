"""The one record every log reader yields, and the report an import keeps.

A :class:`LogRecord` is one call a company's systems answered: an HTTP request, an MCP
tool call, a process-mining event, an agent's turn. Readers fill what their format has
and leave the rest empty; the world builder (:mod:`simgym.logs.world`) reads only these.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

JSON = Any  # a value json.loads returns: dict, list, str, int, float, bool or None


@dataclass(slots=True)
class ObjectRef:
    """A business object a record touched: its ``type`` ("loan"), its ``id``, how the
    record relates to it (``qualifier``, OCEL's word), and what it looked like after the
    call when the log says (``state``: the object's fields, e.g. a response body)."""

    type: str
    id: str
    qualifier: str | None = None
    state: dict[str, JSON] | None = None


@dataclass(slots=True)
class LogRecord:
    """One operation as a log saw it.

    ``time`` is seconds since the epoch (UTC; :func:`parse_time` reads ISO text too);
    ``system`` is the interface ("http", "mcp", "tool", "process", "agent");
    ``operation`` is the route template ("/loans/{id}/approve") or tool or event name,
    with ``method`` for HTTP; ``arguments`` is the request (JSON value or text);
    ``status`` is the HTTP status where there is one and ``error`` marks a failed call in
    any system; ``response`` is the answer (JSON value or text); ``objects`` are the
    business objects touched; ``duration_ms`` the latency; ``source`` "file:line";
    ``path`` the concrete HTTP path the call went to ("/loans/loan-7/approve"), where the
    log has it (the values of the route's parameters come from it).
    """

    session: str
    operation: str
    system: str = "http"
    time: float | None = None
    actor: str | None = None
    role: str | None = None
    method: str | None = None
    arguments: JSON = None
    status: int | None = None
    error: bool = False
    response: JSON = None
    objects: list[ObjectRef] = field(default_factory=list)
    duration_ms: float | None = None
    source: str = ""
    attributes: dict[str, JSON] = field(default_factory=dict)
    path: str | None = None

    @property
    def key(self) -> str:
        """The operation's name in a world: "POST /loans/{id}/approve", or the tool name."""
        return f"{self.method.upper()} {self.operation}" if self.method else self.operation

    @property
    def failed(self) -> bool:
        return self.error or (self.status is not None and self.status >= 400)

    def to_json(self) -> dict[str, JSON]:
        """The record as a JSON object (the form of a world's ``sessions.jsonl``)."""
        data = {
            "session": self.session,
            "time": self.time,
            "actor": self.actor,
            "role": self.role,
            "system": self.system,
            "operation": self.operation,
            "method": self.method,
            "path": self.path,
            "arguments": self.arguments,
            "status": self.status,
            "error": self.error,
            "response": self.response,
            "objects": [
                {k: v for k, v in vars_of(o).items() if v is not None} for o in self.objects
            ],
            "duration_ms": self.duration_ms,
        }
        if self.attributes:
            data["attributes"] = self.attributes
        return data


def vars_of(obj: ObjectRef) -> dict[str, JSON]:
    return {"type": obj.type, "id": obj.id, "qualifier": obj.qualifier, "state": obj.state}


@dataclass
class ImportReport:
    """What an import read: units (lines, spans, entries, events) per file and format,
    how many became records, and every skip with its reason. One bad unit is counted
    here, never raised."""

    read: int = 0
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    files: list[dict[str, JSON]] = field(default_factory=list)
    # the first place each reason was met, with what was wrong there ("a.jsonl:3: ...")
    first: dict[str, str] = field(default_factory=dict)
    # where the readers looked for each field ("body" -> ["otlp: span attribute ..."]):
    # the coverage report's reason when a field was never found
    looked_for: dict[str, list[str]] = field(default_factory=dict)
    # (type, id, state) of objects a log declares that no record names (an OCEL object
    # no event relates to): entities of the world, though no call shows them
    declared: list[tuple[str, str, dict[str, JSON]]] = field(default_factory=list)

    def look(self, field_name: str, where: str) -> None:
        places = self.looked_for.setdefault(field_name, [])
        if where not in places:
            places.append(where)

    def skip(self, reason: str, where: str | None = None) -> None:
        self.skipped[reason] += 1
        if where and reason not in self.first:
            self.first[reason] = where[:300]

    def reasons(self) -> str:
        """The skips in one line, most frequent first, each with its first place."""
        parts = []
        for reason, n in self.skipped.most_common(5):
            where = self.first.get(reason)
            parts.append(f"{n} x {reason}" + (f" (first: {where})" if where else ""))
        more = len(self.skipped) - 5
        return "; ".join(parts) + (f"; {more} more reasons" if more > 0 else "")

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def to_json(self) -> dict[str, JSON]:
        return {
            "read": self.read,
            "records": self.records,
            "skipped": self.skipped_total,
            "skipped_reasons": dict(self.skipped.most_common()),
            "skipped_first": dict(self.first),
            "files": self.files,
        }


def parse_time(value: object) -> float | None:
    """Seconds since the epoch from an epoch number (seconds, milli-, micro- or
    nanoseconds, told apart by size) or ISO 8601 text; None when unreadable."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.timestamp()
    if not isinstance(value, int | float):
        return None
    number = float(value)
    for scale in (1e18, 1e15, 1e12):  # ns, us, ms
        if abs(number) >= scale:
            return number / (scale / 1e9)
    return number


def query_arguments(path: str | None) -> dict[str, JSON] | None:
    """A GET's arguments from its query string (``?status=open&limit=5`` ->
    ``{"status": "open", "limit": 5}``; numbers become numbers); None without a query."""
    if not path or "?" not in path:
        return None
    pairs = parse_qsl(path.split("?", 1)[1].split("#", 1)[0], keep_blank_values=True)
    if not pairs:
        return None
    out: dict[str, JSON] = {}
    for name, value in pairs:
        out[name] = int(value) if re.fullmatch(r"-?\d{1,15}", value) else value
    return out


def maybe_json(text: object) -> JSON:
    """Text that holds JSON becomes the value; other text stays text."""
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null"):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text


_ID_SEGMENT = re.compile(
    r"^(\d+|[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}|[0-9a-fA-F]{12,}|[A-Za-z]*[-_]?\d[\w-]*)$"
)

_VERSION = re.compile(r"^v\d+(\.\d+)*$")  # "/api/v2/..." is a version, not an id


def templatize(path: str) -> str:
    """A route template from a concrete path: id-like segments (numbers, UUIDs, long hex,
    words with digits like "L-1001", but not versions like "v2") become "{id}"; the query
    is dropped."""
    path = path.split("?", 1)[0].split("#", 1)[0] or "/"
    parts = [
        "{id}" if _ID_SEGMENT.match(p) and not _VERSION.match(p) else p for p in path.split("/")
    ]
    return "/".join(parts)


def singular(word: str) -> str:
    """A collection name's singular ("loans" -> "loan", "categories" -> "category")."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 1:
        return word[:-1]
    return word


def _param_type(segment: str) -> str | None:
    """The object type a route parameter names itself: "{customer_id}" -> "customer";
    None for a bare "{id}" or a name that says no type."""
    name = segment.strip("{}:<>").split(":")[-1]  # "<int:loan_id>" -> "loan_id"
    if name.endswith("_id") and len(name) > 3:
        return name[:-3]
    return None


# the last word of a field that holds a record's key: ``policy_id``, ``order_number``
_KEY_WORDS = ("id", "number", "no", "uuid", "ref")
_KEY_NAME = re.compile(
    r"^([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*)[_-](" + "|".join(_KEY_WORDS) + r")$"
)
_CAMEL_KEY = re.compile(r"^([a-z][A-Za-z0-9]*?)(Id|Number|No|Uuid|Ref)$")


def key_type(name: str) -> str | None:
    """The object type a field named like a key names: ``policy_id`` -> policy,
    ``order_number`` -> order, ``invoiceId`` -> invoice; None for a bare ``id`` or a name that
    names no type."""
    found = _CAMEL_KEY.match(name)
    if found:
        return found.group(1).lower()
    found = _KEY_NAME.match(name)
    if found and found.group(1) and found.group(1).lower() not in _KEY_WORDS:
        return found.group(1).lower()
    return None


def _literal(segment: str) -> bool:
    return not segment.startswith(("{", ":", "<"))


def _scalar_key(value: JSON) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and value != ""


def _field_holding(body: dict[str, JSON], value: str, prefer: str | None = None) -> str | None:
    """The field of ``body`` whose value is ``value`` (the one named ``prefer`` first)."""
    if prefer is not None and _scalar_key(body.get(prefer)) and str(body[prefer]) == value:
        return prefer
    for name, field_value in body.items():
        if _scalar_key(field_value) and str(field_value) == value:
            return name
    return None


def _own_key(body: dict[str, JSON], otype: str) -> str | None:
    """The field of ``body`` that names a record of ``otype`` as its own key: ``id``, else
    one named for the type (``payout_id``, ``order_number``)."""
    if _scalar_key(body.get("id")):
        return "id"
    for name, value in body.items():
        if _scalar_key(value) and key_type(name) in (otype, otype.replace("_", "")):
            return name
    return None


_WRAPPERS = ("items", "data", "results", "records", "content", "entries", "values")


def _embedded(body: dict[str, JSON], listed: str | None, depth: int = 0) -> list[ObjectRef]:
    """Records an answer holds inside it: a list (or object) field whose items are keyed
    for the type the field names (``"assessments": [{"assessment_id": ...}]``), or a
    page of the route's own records (``{"items": [...]}`` from ``GET /orders``), and the
    records those hold in turn (two levels: a page of orders with their shipments)."""
    out: list[ObjectRef] = []
    for name, value in body.items():
        items = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
        otype = listed if name in _WRAPPERS and listed else singular(name)
        for item in items:
            if not isinstance(item, dict):
                continue
            key = _own_key(item, otype)
            if key is not None and key != "id":
                out.append(ObjectRef(otype, str(item[key]), "embedded", item))
                if depth < 1:
                    out.extend(_embedded(item, None, depth + 1))
    return out


def route_objects(
    template: str,
    path: str | None,
    response: JSON,
    *,
    method: str | None = None,
    arguments: JSON = None,
) -> list[ObjectRef]:
    """The objects an HTTP call touched, with ids from the concrete path: a "{param}"
    segment named ``<type>_id`` names an object of that type ("/kyc/{customer_id}" ->
    customer: the route acts on the customer, not on a KYC check with a customer's id);
    any other parameter names an object of the type its preceding segment names
    ("/loans/{id}", "/v1/orders/{order_number}" -> loan, order). A JSON object answer with
    an "id" is that object's new state (or, on a route like "POST /loans", the object the
    call created).

    Keys need not be called ``id``: an answer holding a parameter's value in some field
    is that object's state, the field its key (``order_number``); a POST to a collection
    ("POST /payouts", "POST /orders/{n}/shipments") that answers a record keyed by a
    field named for the collection's type (``payout_id``) created it; the fields of an
    answer or request named like another type's key (``policy_id``, ``order_number``)
    link the call to that object."""
    found: list[ObjectRef] = []
    tsegs = [s for s in template.split("?")[0].split("/") if s]
    psegs = [s for s in (path or "").split("?")[0].split("/") if s]
    concrete = len(psegs) == len(tsegs)
    named_by: dict[int, str] = {}  # found index -> the parameter's name
    for i, seg in enumerate(tsegs):
        if _literal(seg) or not concrete:
            continue
        named = _param_type(seg)
        if named is not None:
            found.append(ObjectRef(named, psegs[i]))
        elif i > 0 and _literal(tsegs[i - 1]):
            found.append(ObjectRef(singular(tsegs[i - 1]), psegs[i]))
        else:
            continue
        named_by[len(found) - 1] = seg.strip("{}:<>").split(":")[-1]
    body = response if isinstance(response, dict) else None
    if body is not None and body.get("id") is not None:
        body_id = str(body["id"])
        for obj in found:
            if obj.id == body_id:
                obj.state = body
                break
        else:
            literal = [s for s in tsegs if _literal(s)]
            if literal:
                found.append(ObjectRef(singular(literal[-1]), body_id, "created", body))
        return found
    if body is None:
        return found
    # keys of any name: a record made by a POST to a collection, else the answer is the
    # state of the object a parameter names (its key the field holding the value)
    made = None
    if (method or "").upper() == "POST" and tsegs and _literal(tsegs[-1]) and concrete:
        otype = singular(tsegs[-1])
        key = _own_key(body, otype)
        if key is not None and str(body[key]) not in {o.id for o in found}:
            made = ObjectRef(otype, str(body[key]), "created", body)
    if made is None:
        for index in sorted(named_by, reverse=True):  # the innermost parameter first
            obj = found[index]
            if _field_holding(body, obj.id, named_by[index]) is not None:
                obj.state = body
                break
    else:
        found.append(made)
    taken = {(o.type, o.id) for o in found} | {("", o.id) for o in found}
    listed = singular(tsegs[-1]) if tsegs and _literal(tsegs[-1]) else None
    for embedded in _embedded(body, listed):
        if ("", embedded.id) not in taken:
            taken.add(("", embedded.id))
            found.append(embedded)
    request = arguments if isinstance(arguments, dict) else {}
    for name, value in [*body.items(), *request.items()]:
        otype = key_type(name)
        if otype is None or not _scalar_key(value) or ("", str(value)) in taken:
            continue
        if made is not None and otype == made.type:
            continue
        taken.add(("", str(value)))
        found.append(ObjectRef(otype, str(value), "linked"))
    return found


# Event attributes that give a process-log event its HTTP call, named as OpenTelemetry's
# HTTP conventions name them (an API gateway's extract carries them): with them an OCEL
# or XES event is named like the HTTP readers name the call ("POST /loans/{loan_id}").
HTTP_METHOD_KEYS = ("http.request.method", "http.method")
HTTP_ROUTE_KEYS = ("http.route",)
HTTP_PATH_KEYS = ("url.path", "http.target")
HTTP_STATUS_KEYS = ("http.response.status_code", "http.status_code")


# An event log's attributes mix what was asked with what came of it. These name the
# outcome: kept as the record's answer, never as arguments (a twin's rules must not read
# the answer to decide it).
# (An attribute that restates the touched object's new state is no sure sign: a new
# account's account_type was asked for, a KYC check's result was decided. "reason" is
# taken as an outcome: an event log's reason is mostly why something happened.)
OUTCOME_KEYS = (
    "outcome",
    "code",
    "error_code",
    "error_detail",
    "error_message",
    "result",
    "reason",
    "from_status",
    "to_status",
    "lifecycle:transition",
)


OK_OUTCOMES = ("ok", "success", "succeeded", "complete", "completed", "accepted", "done")


def pop_outcome(attrs: dict[str, JSON]) -> JSON:
    """Take an event's outcome attributes (:data:`OUTCOME_KEYS`) out of ``attrs``; return
    them as its answer (a refusal as ``{"error": {"code": ...}}``, like an API's), or
    None."""
    found = {k: attrs.pop(k) for k in OUTCOME_KEYS if k in attrs}
    if not found:
        return None
    refused = str(found.get("outcome", "ok")).lower() not in OK_OUTCOMES or str(
        found.get("lifecycle:transition", "")
    ).lower() in ("ate_abort", "pi_abort")  # XES: an activity aborted
    code = next((found[k] for k in ("code", "error_code") if found.get(k) not in (None, "")), None)
    if refused and code is not None:
        error: dict[str, JSON] = {"code": code}
        message = found.get("error_detail", found.get("error_message"))
        if message not in (None, ""):
            error["message"] = message
        return {"error": error}
    return found


def pop_http(attrs: dict[str, JSON]) -> tuple[str | None, str | None, str | None, int | None]:
    """Take an event's HTTP method, route, path and status out of ``attrs`` (each None
    when absent; a status that is not a number is left in place)."""

    def take(keys: tuple[str, ...]) -> JSON:
        found = None
        for key in keys:
            value = attrs.pop(key, None)
            if found is None and value not in (None, ""):
                found = value
        return found

    method, route, path = take(HTTP_METHOD_KEYS), take(HTTP_ROUTE_KEYS), take(HTTP_PATH_KEYS)
    status: int | None = None
    for key in HTTP_STATUS_KEYS:
        value = attrs.get(key)
        if value in (None, ""):
            attrs.pop(key, None)
            continue
        try:
            status = int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        attrs.pop(key)
        break
    return (
        str(method).upper() if method is not None else None,
        str(route) if route is not None else None,
        str(path) if path is not None else None,
        status,
    )
