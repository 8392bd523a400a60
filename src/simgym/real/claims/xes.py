"""The claims' history as an IEEE 1849 (XES) event log: one trace per claim.

A trace holds every attempt that concerned the claim, accepted (``lifecycle:transition``
= ``complete``) or refused (``ate_abort``, with ``error_code`` and ``error_detail``), in
the order they happened. Other records are referenced by value under their own names:
``policy`` (a UUID), ``assessment``, ``payout``; the actor is ``org:resource`` and their
roles ``org:role`` (comma-separated).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from simgym.real.claims.ocel import EVENT_TYPES
from simgym.real.claims.store import ClaimsOffice, iso

EXTENSIONS = (
    ("Concept", "concept", "http://www.xes-standard.org/concept.xesext"),
    ("Time", "time", "http://www.xes-standard.org/time.xesext"),
    ("Organizational", "org", "http://www.xes-standard.org/org.xesext"),
    ("Lifecycle", "lifecycle", "http://www.xes-standard.org/lifecycle.xesext"),
)


def _attribute(key: str, value: Any) -> str:
    if isinstance(value, bool):
        tag, text = "boolean", "true" if value else "false"
    elif isinstance(value, int):
        tag, text = "int", str(value)
    elif isinstance(value, float):
        tag, text = "float", repr(value)
    else:
        tag, text = "string", str(value)
    return f"<{tag} key={quoteattr(key)} value={quoteattr(text)}/>"


def _xes_time(ns: int) -> str:
    return iso(ns).replace("Z", "+00:00")


def write_xes(office: ClaimsOffice, path: str | Path) -> None:
    per_claim: dict[str, list[str]] = {number: [] for number in office.claims}
    for entry in office.journal:
        claims = [oid for otype, oid, _ in entry.objects if otype == "claim"]
        if not claims:
            continue
        attributes: dict[str, Any] = {
            "concept:name": EVENT_TYPES[entry.operation],
            "lifecycle:transition": "complete" if entry.outcome == "accepted" else "ate_abort",
            "org:resource": entry.caller.user_id,
            "org:role": ",".join(entry.caller.roles),
            "session": entry.caller.session_id,
            "channel": entry.caller.client_id,
        }
        for otype, oid, _ in entry.objects:
            if otype in ("policy", "assessment", "payout"):
                attributes[otype] = oid
        for key, value in entry.attributes.items():
            attributes[key] = value
        if entry.outcome == "refused":
            attributes["error_code"] = entry.error_code
            attributes["error_detail"] = entry.error_detail
        body = "".join(_attribute(k, v) for k, v in attributes.items() if v is not None)
        event = (
            f'<event><date key="time:timestamp" value="{_xes_time(entry.time_ns)}"/>{body}</event>'
        )
        for number in claims:
            per_claim[number].append(event)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<log xes.version="1849-2016" xes.features="" xmlns="http://www.xes-standard.org/">',
    ]
    for name, prefix, uri in EXTENSIONS:
        lines.append(f'<extension name="{name}" prefix="{prefix}" uri="{uri}"/>')
    lines += [
        '<global scope="trace"><string key="concept:name" value="__INVALID__"/></global>',
        '<global scope="event"><string key="concept:name" value="__INVALID__"/>'
        '<date key="time:timestamp" value="1970-01-01T00:00:00.000+00:00"/>'
        '<string key="lifecycle:transition" value="complete"/></global>',
        '<classifier name="Activity" keys="concept:name"/>',
        '<classifier name="Activity and transition" keys="concept:name lifecycle:transition"/>',
        _attribute("concept:name", "Northwind Mutual claims"),
    ]
    for number, events in per_claim.items():
        claim = office.claims[number]
        head = "".join(
            _attribute(k, v)
            for k, v in (
                ("concept:name", number),
                ("policy", claim["policy_id"]),
                ("claimant", claim["claimant"]),
                ("loss_type", claim["loss_type"]),
                ("incident_date", claim["incident_date"]),
                ("claimed_amount", claim["claimed_amount"]),
            )
        )
        lines.append(f"<trace>{head}")
        lines.extend(events)
        lines.append("</trace>")
    lines.append("</log>")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
