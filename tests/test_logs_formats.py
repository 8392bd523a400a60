"""Every log the back office writes describes the same business system.

One short run of operator sessions is imported from each format the service writes (OTLP
spans, OCEL JSON and SQLite, the client's flat JSONL, a HAR archive, an XES log) and the
worlds' signatures (:func:`simgym.logs.signature.world_signature`) are compared.

What every format carries, and so must agree (``COMMON``): the operations that changed
something, the object types, each type's life cycle (initial statuses and transitions),
the refused transitions (from-status, operation, status code) and the refusals by role
(operation, role). What only logs of the requests themselves carry (``REQUEST``: OTLP,
JSONL, HAR): the argument schemas' required fields and the fields 400/422 answers blame.
OCEL and XES come from the audit log: no request bodies, no reads, no 400/401/404/422
refusals, so their argument schemas are the events' attributes and cannot agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree.ElementTree import parse

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("opentelemetry.sdk")

from simgym.logs.model import ImportReport, route_objects  # noqa: E402
from simgym.logs.registry import detect_format, read_logs  # noqa: E402
from simgym.logs.signature import COMMON, REQUEST, world_signature  # noqa: E402
from simgym.logs.world import build_world  # noqa: E402
from simgym.real.backoffice.driver import run_sessions  # noqa: E402

FILES = {
    "otlp": "traces.otlp.jsonl",
    "ocel-json": "ocel.json",
    "ocel-sqlite": "ocel.sqlite",
    "jsonl": "sessions.jsonl",
    "har": "client.har",
    "xes": "events.xes",
}
REQUEST_LOGS = ("otlp", "jsonl", "har")
SESSIONS, SEED = 14, 3


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("formats")
    return out, run_sessions(SESSIONS, SEED, out)


@pytest.fixture(scope="module")
def worlds(run) -> dict[str, tuple[dict, dict]]:
    """format -> (manifest, signature)"""
    out, _ = run
    found = {}
    for name, file in FILES.items():
        report = ImportReport()
        manifest = build_world(
            read_logs([out / file], report), out / f"world-{name}", report=report
        )
        assert report.skipped_total == 0, (name, dict(report.skipped))
        found[name] = (manifest, world_signature(out / f"world-{name}"))
    return found


def test_each_file_is_detected_as_its_format(run) -> None:
    out, _ = run
    detected = {name: detect_format(out / file) for name, file in FILES.items()}
    assert detected == {
        "otlp": "otlp",
        "ocel-json": "ocel",
        "ocel-sqlite": "ocel",
        "jsonl": "jsonl",
        "har": "har",
        "xes": "xes",
    }


def test_every_format_describes_the_same_system(worlds) -> None:
    base = {k: worlds["otlp"][1][k] for k in COMMON}
    # the run is rich enough for the comparison to mean something
    assert "POST /loans/{}/approve" in base["operations"]
    assert base["object_types"] == ["account", "customer", "kyc", "loan"]
    loan = base["life_cycles"]["loan"]
    assert loan["initial"] == ["draft"] and ["draft", "submitted"] in loan["transitions"]
    assert base["refused"] and all(r[0] == "loan" and r[3] == 409 for r in base["refused"])
    assert base["denials"]
    for name, (_, signature) in worlds.items():
        assert {k: signature[k] for k in COMMON} == base, name


def test_request_logs_agree_on_arguments_too(worlds) -> None:
    base = {k: worlds["otlp"][1][k] for k in REQUEST}
    assert "amount" in base["required_arguments"]["POST /loans"]
    for name in REQUEST_LOGS:
        assert {k: worlds[name][1][k] for k in REQUEST} == base, name
    # a process log has no request bodies: its "arguments" are the events' attributes
    assert "date_of_birth" not in worlds["ocel-json"][1]["required_arguments"]["POST /customers"]


def test_sessions_group_the_same_way_in_json_and_sqlite(worlds, run) -> None:
    out, _ = run
    counts = {name: manifest["counts"]["sessions"] for name, (manifest, _) in worlds.items()}
    assert counts["otlp"] == counts["jsonl"] == counts["har"] == SESSIONS
    # process logs hold the audited sessions only (a session of allowed reads has no event)
    assert counts["ocel-json"] == counts["ocel-sqlite"] == counts["xes"] <= SESSIONS

    def sessions(name: str) -> set[str]:
        lines = (out / f"world-{name}" / "sessions.jsonl").read_text().splitlines()
        return {json.loads(line)["session"] for line in lines}

    assert sessions("ocel-sqlite") == sessions("ocel-json") <= sessions("jsonl")


def test_every_format_reports_what_it_covered(worlds) -> None:
    """Each format's coverage: the bank's logs carry bodies and object state in every
    format (no problem, so each world may be called a twin), the process logs name an
    actor and role on every event, and OCEL JSON and SQLite cover the same."""
    for name, (manifest, _) in worlds.items():
        coverage = manifest["coverage"]
        assert coverage["problems"] == [] and coverage["twin"] is True, name
        assert coverage["calls"] == manifest["counts"]["records"], name
        assert coverage["fields"]["body"]["share"] == 1.0, name
        assert coverage["fields"]["session"]["share"] == 1.0, name
    for name in ("ocel-json", "ocel-sqlite", "xes"):
        fields = worlds[name][0]["coverage"]["fields"]
        assert fields["actor"]["share"] == fields["role"]["share"] == 1.0, name
    json_cov, sqlite_cov = (worlds[n][0]["coverage"] for n in ("ocel-json", "ocel-sqlite"))
    assert json_cov["fields"] == sqlite_cov["fields"]
    assert json_cov["operations"] == sqlite_cov["operations"]
    # the refusals the request logs saw include those only they can see (400, 401, 422)
    assert {"400", "401", "422"} <= set(worlds["otlp"][0]["coverage"]["refusals"])


def test_har_and_xes_follow_their_specifications(run) -> None:
    out, summary = run
    har = json.loads((out / "client.har").read_text())["log"]
    assert har["version"] == "1.2" and har["creator"]["name"]
    assert len(har["entries"]) == summary["requests"]
    assert {p["id"] for p in har["pages"]} == {e["pageref"] for e in har["entries"]}
    entry = har["entries"][0]
    assert {"startedDateTime", "time", "request", "response", "cache", "timings"} <= set(entry)
    assert entry["response"]["content"]["mimeType"].startswith("application/json")

    ns = {"x": "http://www.xes-standard.org/"}
    log = parse(out / "events.xes").getroot()
    assert log.get("xes.version") == "1849-2016"
    assert {e.get("prefix") for e in log.findall("x:extension", ns)} >= {
        "concept",
        "time",
        "org",
        "lifecycle",
    }
    events = log.findall("x:trace/x:event", ns)
    assert len(events) == summary["events"]
    transitions = set()
    for event in events:
        keys = {a.get("key"): a.get("value") for a in event}
        assert {"concept:name", "time:timestamp", "org:resource", "org:role"} <= set(keys)
        transitions.add(keys["lifecycle:transition"])
    assert transitions == {"complete", "ate_abort"}


def test_a_parameter_named_type_id_names_its_type() -> None:
    kyc = {"id": "kyc-4", "result": "passed"}
    objects = route_objects("/kyc/{customer_id}", "/kyc/cust-3", kyc)
    assert [(o.type, o.id, o.qualifier) for o in objects] == [
        ("customer", "cust-3", None),
        ("kyc", "kyc-4", "created"),
    ]
    assert [(o.type, o.id) for o in route_objects("/loans/{id}", "/loans/l-1", None)] == [
        ("loan", "l-1")
    ]
