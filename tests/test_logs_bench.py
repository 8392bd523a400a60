"""benchmarks/logs_import.py at a tiny size: its synthetic back-office logs (flat JSONL and
OTLP Collector lines) import into a world whose counts match what the generator made.
No timing is checked."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from simgym.logs import ImportReport, build_world, detect_format, read_logs

ROOT = Path(__file__).resolve().parent.parent


def _load_module():
    spec = importlib.util.spec_from_file_location(
        "logs_import_bench", ROOT / "benchmarks" / "logs_import.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load_module()
RECORDS = 2_000


@pytest.mark.parametrize("fmt", ["jsonl", "otlp"])
def test_generated_log_imports_with_the_right_counts(tmp_path: Path, fmt: str) -> None:
    log = tmp_path / f"backoffice.{fmt}.jsonl"
    made = bench.write_log(log, fmt, RECORDS, seed=3)
    assert detect_format(log) == fmt
    assert made["records"] == RECORDS and made["sessions"] > 100 and made["operations"] >= 12
    if fmt == "otlp":  # one export request a line, a batch of spans each
        lines = log.read_text().splitlines()
        assert len(lines) == -(-RECORDS // bench.SPANS_PER_LINE)
        assert len(json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 512

    report = ImportReport()
    manifest = build_world(read_logs([log], report), tmp_path / "world", report=report)
    counts = manifest["counts"]
    assert report.skipped_total == 0
    assert counts["records"] == RECORDS
    assert counts["sessions"] == made["sessions"]
    assert counts["operations"] == made["operations"]
    # every object the generator created is an entity of its type (all under the cap)
    types = json.loads((tmp_path / "world" / "entities.json").read_text())["types"]
    office = made["counters"]
    assert {t: e["count"] for t, e in types.items()} == {
        "customer": office["cust"],
        "kyc": office["kyc"],
        "account": office["acct"],
        "loan": office["loan"],
    }
    assert counts["entities"] == made["objects"]
    sessions = (tmp_path / "world" / "sessions.jsonl").read_text().splitlines()
    assert len(sessions) == made["sessions"]
    assert sum(len(json.loads(line)["records"]) for line in sessions) == RECORDS

    rules = json.loads((tmp_path / "world" / "rules.json").read_text())
    loans = rules["life_cycles"]["loan"]
    assert loans["initial"] == {"draft": office["loan"]}
    moves = {(t["from"], t["to"]) for t in loans["transitions"]}
    assert {("draft", "submitted"), ("submitted", "under_review")} <= moves
    assert any(r["status"] == 409 for r in loans["refused"])
    assert any(p["status"] == 403 for p in rules["permissions"])


def test_import_runs_in_a_process_of_its_own(tmp_path: Path) -> None:
    log = tmp_path / "backoffice.jsonl"
    made = bench.write_log(log, "jsonl", 300)
    got = bench.run_child(log, tmp_path / "world")
    assert got["counts"]["records"] == 300 and got["counts"]["sessions"] == made["sessions"]
    assert got["peak_kib"] >= got["base_kib"] > 0 and got["wall_s"] > 0


def test_latencies_exact_then_within_one_percent() -> None:
    """An operation's latencies: exact percentiles while few, then a bounded histogram
    whose percentiles stay within 1% of the exact ones."""
    import random

    from simgym.logs.world import EXACT_LATENCIES, Latencies, percentile

    rng = random.Random(5)
    values = [rng.lognormvariate(2.0, 1.0) for _ in range(EXACT_LATENCIES)]
    kept = Latencies()
    for v in values:
        kept.add(v)
    ordered = sorted(values)
    assert kept.quantile(0.9) == percentile(ordered, 0.9)  # still exact
    values += [rng.lognormvariate(2.0, 1.0) for _ in range(3 * EXACT_LATENCIES)] + [0.0]
    for v in values[EXACT_LATENCIES:]:
        kept.add(v)
    assert kept.values is None and len(kept.buckets) < 2000 and kept.count == len(values)
    ordered = sorted(values)
    for q in (0.5, 0.9, 0.99):
        assert kept.quantile(q) == pytest.approx(percentile(ordered, q), rel=0.011)
    assert kept.quantile(0.0) == 0.0 and kept.quantile(1.0) <= ordered[-1]
