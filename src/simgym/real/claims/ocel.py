"""The office's history as an OCEL 2.0 log (the standard's JSON format).

Events are the attempts at state-changing operations, accepted and refused alike (a
refused attempt carries ``outcome`` = ``refused``, ``error_code`` and ``error_detail``),
each with the session it happened in (``session_id``) and the client it came through
(``channel``). Objects are policies, claims, assessments, payouts and the staff (type
``employee``); an event relates to the staff member who acted under a qualifier naming
their part (``filer``, ``approver``, ``payer``...). Object attributes are recorded with the
time each value was set, initial values included; objects that existed before the log
(policies) carry their issue time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simgym.real.claims.store import STAFF, ClaimsOffice, iso

EVENT_TYPES = {
    "issue_policy": "Issue Policy",
    "cancel_policy": "Cancel Policy",
    "file_claim": "File Claim",
    "start_review": "Start Review",
    "record_assessment": "Record Assessment",
    "approve_claim": "Approve Claim",
    "reject_claim": "Reject Claim",
    "close_claim": "Close Claim",
    "issue_payout": "Issue Payout",
}
ACTOR_QUALIFIERS = {
    "issue_policy": "issuer",
    "cancel_policy": "canceller",
    "file_claim": "filer",
    "start_review": "handler",
    "record_assessment": "assessor",
    "approve_claim": "approver",
    "reject_claim": "rejecter",
    "close_claim": "closer",
    "issue_payout": "payer",
}
FLOAT_ATTRIBUTES = {
    "coverage_limit",
    "deductible",
    "claimed_amount",
    "assessed_amount",
    "approved_amount",
    "amount",
}
# object type -> (related object type, attribute holding its id, qualifier)
OBJECT_LINKS = {
    "claim": [("policy", "policy_id", "insured under")],
    "assessment": [("claim", "claim_number", "assesses")],
    "payout": [("claim", "claim_number", "settles")],
}


def _type(name: str) -> str:
    return "float" if name in FLOAT_ATTRIBUTES else "string"


def build_ocel(office: ClaimsOffice) -> dict[str, Any]:
    event_attributes: dict[str, dict[str, str]] = {name: {} for name in EVENT_TYPES.values()}
    events = []
    for entry in office.journal:
        etype = EVENT_TYPES[entry.operation]
        attributes: dict[str, Any] = {
            "session_id": entry.caller.session_id,
            "channel": entry.caller.client_id,
            "outcome": entry.outcome,
        }
        attributes.update(entry.attributes)
        if entry.outcome == "refused":
            attributes["error_code"] = entry.error_code
            attributes["error_detail"] = entry.error_detail
        for name in attributes:
            event_attributes[etype].setdefault(name, _type(name))
        relationships = [
            {"objectId": oid, "qualifier": qualifier} for _, oid, qualifier in entry.objects
        ]
        relationships.append(
            {"objectId": entry.caller.user_id, "qualifier": ACTOR_QUALIFIERS[entry.operation]}
        )
        events.append(
            {
                "id": entry.event_id,
                "type": etype,
                "time": iso(entry.time_ns),
                "attributes": [
                    {"name": k, "value": v} for k, v in attributes.items() if v is not None
                ],
                "relationships": relationships,
            }
        )

    object_attributes: dict[str, dict[str, str]] = {
        "policy": {},
        "claim": {},
        "assessment": {},
        "payout": {},
        "employee": {},
    }
    objects: dict[str, dict[str, Any]] = {}
    for change in office.changes:
        obj = objects.setdefault(
            change.object_id,
            {
                "id": change.object_id,
                "type": change.object_type,
                "attributes": [],
                "relationships": [],
            },
        )
        object_attributes[change.object_type].setdefault(change.name, _type(change.name))
        obj["attributes"].append(
            {"name": change.name, "time": iso(change.time_ns), "value": change.value}
        )
    for obj in objects.values():
        record = {
            "policy": office.policies,
            "claim": office.claims,
            "assessment": office.assessments,
            "payout": office.payouts,
        }[obj["type"]][obj["id"]]
        for _target, key, qualifier in OBJECT_LINKS.get(obj["type"], []):
            obj["relationships"].append({"objectId": record[key], "qualifier": qualifier})
    epoch = "1970-01-01T00:00:00.000Z"
    for member in STAFF:
        object_attributes["employee"].update({"name": "string", "roles": "string"})
        objects[member.user_id] = {
            "id": member.user_id,
            "type": "employee",
            "attributes": [
                {"name": "name", "time": epoch, "value": member.name},
                {"name": "roles", "time": epoch, "value": ",".join(member.roles)},
            ],
            "relationships": [],
        }
    return {
        "objectTypes": [
            {"name": name, "attributes": [{"name": a, "type": t} for a, t in attrs.items()]}
            for name, attrs in object_attributes.items()
        ],
        "eventTypes": [
            {"name": name, "attributes": [{"name": a, "type": t} for a, t in attrs.items()]}
            for name, attrs in event_attributes.items()
        ],
        "objects": list(objects.values()),
        "events": events,
    }


def write_ocel(office: ClaimsOffice, path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(build_ocel(office), handle, indent=1, ensure_ascii=False)
        handle.write("\n")
