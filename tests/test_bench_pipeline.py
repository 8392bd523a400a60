"""The benchmark pipeline on real servers: infer -> judge -> score with the embedded model
behind llama.cpp's OpenAI-compatible server, resuming after a kill, retries on faults."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import simgym
from simgym.bench.data import load_rows, select_rows
from simgym.bench.infer import plan_infer, run_infer
from simgym.bench.judge import run_judge
from simgym.bench.pool import is_transient
from simgym.bench.store import load_results, read_rows
from simgym.cli.bench import bench_app, build_backend, request_settings
from simgym.core.errors import WorldModelError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from fixed_latency_server import running  # noqa: E402  (a benchmark helper, not a package)

FIXTURE = Path(__file__).parent / "data" / "agentworldbench"
VOLATILE = {"pred_id", "finished_at", "latency_s"}

app = typer.Typer()
app.add_typer(bench_app, name="bench")


def cli(*args):
    result = CliRunner().invoke(app, ["bench", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def stable(row):
    """A row without the fields that differ between two runs of the same thing."""
    row = {k: v for k, v in row.items() if k not in VOLATILE}
    if isinstance(row.get("judge"), dict):
        row["judge"] = {k: v for k, v in row["judge"].items() if k not in VOLATILE}
    return json.dumps(row, sort_keys=True)


def lines_of(path):
    return [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x]


# -- the whole pipeline against a real server ------------------------------------------


def test_infer_judge_score_with_the_embedded_model_as_world_model_and_judge(llama_server, tmp_path):
    predictions, judged = tmp_path / "predictions.jsonl", tmp_path / "judged.jsonl"
    common = ["--base-url", llama_server, "--concurrency", "2"]
    result = cli(
        "infer", "--data", FIXTURE, "--out", predictions, "-w", "openai", "--model", "smollm2",
        "--domains", "terminal", "--limit", "2", "--max-tokens", "24",
        "--temperature", "0", *common,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = lines_of(predictions)
    assert sorted(r["key"] for r in rows) == ["terminal/1002/1", "terminal/1002/2"]
    for row in rows:
        assert row["status"] == "ok" and row["gen"] and row["latency_s"] > 0
        assert row["usage"]["prompt_tokens"] > 0 and row["usage"]["completion_tokens"] > 0
        assert row["world_model"]["model"] == "smollm2"
        assert row["world_model"]["request_max_tokens"] == 24
        assert set(row["metrics"]) >= {"exact_match", "edit_similarity", "line_f1", "format_ok"}
        assert row["system_str"] and row["prompt"] and row["reference"]  # self-contained

    result = cli(
        "judge", "--predictions", predictions, "--out", judged, "--judge", "openai",
        "--judge-base-url", llama_server, "--judge-model", "smollm2",
        "--judge-max-tokens", "40", "--judge-temperature", "0", "--attempts", "2",
        "--concurrency", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    graded = lines_of(judged)
    assert len(graded) == 2
    for row in graded:
        judge = row["judge"]
        assert judge["model"]["model"] == "smollm2" and judge["max_tokens"] == 40
        assert judge["temperature"] == 0 and judge["attempts_allowed"] == 2
        assert judge["family"] == "shell" and judge["prompt_sha256"]
        if judge["status"] == "failed":  # what a 135M judge usually manages
            assert judge["attempts"] == 2 and judge["error"] and row["failed"] == 1.0
        else:
            assert judge["status"] == "ok" and set(judge["scores"]) == {
                "format", "factuality", "consistency", "realism", "quality",
            }  # fmt: skip

    report_path = tmp_path / "score.json"
    result = cli(
        "score", judged, "--json", report_path, "--markdown", tmp_path / "s.md",
        "--html", tmp_path / "s.html",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    micro = report["overall"]["micro"]
    failed = sum(r["judge"]["status"] != "ok" for r in graded)
    assert micro["rows"] == 2 and micro["judge_failed"] == failed
    assert micro["graded"] + micro["failed"] == 2
    assert "judge scores" in result.output and "rule metrics" in result.output
    assert (tmp_path / "s.html").read_text().startswith("<!doctype html>")
    assert report["judges"][0]["model"] == "smollm2"

    result = cli("compare", judged, report_path)
    assert result.exit_code == 0, result.output
    assert ("+0.00" if report["overall"]["macro"]["domains"] else "n/a") in result.output


# -- resuming ---------------------------------------------------------------------------


@pytest.fixture
def slow_server():
    """benchmarks/fixed_latency_server.py answering every request after 0.3 s."""
    with running(0.3) as base:
        yield base


def infer_command(base, out):
    return [
        sys.executable, "-m", "simgym.bench", "infer", "--data", str(FIXTURE),
        "--out", str(out), "-w", "openai", "--base-url", base, "--model", "fixed",
        "--concurrency", "2", "--max-tokens", "16",
    ]  # fmt: skip


def test_killed_infer_resumes_to_the_same_rows(slow_server, tmp_path):
    env = {**os.environ, "OPENAI_API_KEY": "test-key"}
    killed = tmp_path / "killed.jsonl"
    proc = subprocess.Popen(infer_command(slow_server, killed), env=env, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline:
        if killed.exists() and killed.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)  # a crash: no cleanup, rows in flight are lost
    proc.wait(10)
    partial, _ = read_rows(killed)
    assert 3 <= len(partial) < 11

    resumed = subprocess.run(infer_command(slow_server, killed), env=env, capture_output=True)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert f"resuming: {len(partial)} of 11 rows" in resumed.stderr.decode()
    # The same run, uninterrupted, in-process with the CLI's own backend and settings.
    whole = tmp_path / "whole.jsonl"
    backend = build_backend(
        "openai", base_url=slow_server, model="fixed", model_path=None, n_ctx=None,
        timeout=1800.0, concurrency=2,
    )  # fmt: skip
    tokens, temperature = request_settings("openai", 16, None)
    asyncio.run(
        run_infer(
            load_rows(FIXTURE), backend, whole, concurrency=2, max_tokens=tokens,
            temperature=temperature,
        )
    )  # fmt: skip

    final = lines_of(killed)
    keys = [r["key"] for r in final]
    assert len(keys) == len(set(keys)) == 11  # every row once, no duplicates
    assert sorted(map(stable, final)) == sorted(map(stable, lines_of(whole)))
    # The rows finished before the kill were kept, not redone.
    kept = {r["key"]: r["pred_id"] for r in partial}
    assert all(r["pred_id"] == kept[r["key"]] for r in final if r["key"] in kept)
    # A third run would have nothing left to do.
    todo, finished = plan_infer(load_rows(FIXTURE), killed)
    assert todo == [] and len(finished) == 11 and len(lines_of(killed)) == 11


def _judge_answer(messages):
    """A deterministic judge: readable grades, except for MCP rows, where it rambles."""

    async def answer():
        await asyncio.sleep(0.05)
        if "tool server" in messages[0]["content"]:
            return "I think this looks reasonable overall."
        grade = 1 + len(messages[1]["content"]) % 5
        return json.dumps({d: grade for d in ("format", "factuality", "consistency")} | {
            "realism": 3, "quality": 4,
        })  # fmt: skip

    return answer()


async def test_cancelled_judge_resumes_to_the_same_rows(tmp_path):
    rows = load_rows(FIXTURE)
    predictions = tmp_path / "predictions.jsonl"
    world = simgym.FunctionWorldModel(lambda m: "<predicted_observation>ok</predicted_observation>")
    await run_infer(rows, world, predictions)
    preds = load_results(predictions)
    judge = simgym.FunctionWorldModel(_judge_answer, name="rules-judge")

    cut = tmp_path / "cut.jsonl"
    task = asyncio.create_task(run_judge(preds, judge, cut, concurrency=2, attempts=2))
    while not cut.exists() or cut.read_bytes().count(b"\n") < 4:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    partial, _ = read_rows(cut)
    assert 4 <= len(partial) < 11

    summary = await run_judge(preds, judge, cut, concurrency=2, attempts=2)
    assert summary.skipped == sum(r["judge"]["status"] == "ok" for r in partial)
    whole = tmp_path / "whole.jsonl"
    await run_judge(preds, judge, whole, concurrency=2, attempts=2)
    final = lines_of(cut)
    assert len({r["key"] for r in final}) == len(final) == 11
    assert sorted(map(stable, final)) == sorted(map(stable, lines_of(whole)))
    failed = [r for r in final if r["judge"]["status"] == "failed"]
    assert {r["domain"] for r in failed} == {"mcp"} and len(failed) == 3
    assert all(r["judge"]["attempts"] == 2 and "unreadable" in r["judge"]["error"] for r in failed)


async def test_redone_predictions_are_judged_again(tmp_path):
    rows = select_rows(load_rows(FIXTURE), domains=["terminal"], limit=2)
    predictions, judged = tmp_path / "p.jsonl", tmp_path / "j.jsonl"
    world = simgym.FunctionWorldModel(lambda m: "first")
    await run_infer(rows, world, predictions)
    judge = simgym.FunctionWorldModel(_judge_answer)
    await run_judge(load_results(predictions), judge, judged)
    await run_infer(rows, simgym.FunctionWorldModel(lambda m: "second"), predictions, restart=True)
    summary = await run_judge(load_results(predictions), judge, judged)
    assert summary.skipped == 0 and summary.written == 2
    assert [r["observation"] for r in lines_of(judged)] == ["second", "second"]


# -- faults -----------------------------------------------------------------------------


def test_which_errors_are_transient():
    assert is_transient(WorldModelError("world model at x answered HTTP 503: busy"))
    assert is_transient(WorldModelError("world model at x answered HTTP 429: slow down"))
    assert is_transient(WorldModelError("world model at x timed out after 5s"))
    assert is_transient(WorldModelError("cannot reach world model at x: refused"))
    assert not is_transient(WorldModelError("world model at x answered HTTP 400: too long"))
    assert not is_transient(ValueError("a bug"))


async def test_server_errors_are_retried_then_recorded_and_redone_on_resume(fault_server, tmp_path):
    base, hits = fault_server
    rows = select_rows(load_rows(FIXTURE), domains=["mcp"], limit=2)
    out = tmp_path / "p.jsonl"
    broken = simgym.world_model("openai", base_url=f"{base}/500", model="m", max_retries=0)
    before = hits["500"]
    summary = await run_infer(rows, broken, out, retries=2, backoff_s=0.01, concurrency=2)
    await broken.aclose()
    assert hits["500"] - before == 6  # each row: the first try and two retries
    assert summary.failed == 2 and summary.written == 2
    failed = lines_of(out)
    assert all(r["status"] == "failed" and r["attempts"] == 3 for r in failed)
    assert all("HTTP 500" in r["error"] and r["metrics"] is None for r in failed)

    working = simgym.FunctionWorldModel(lambda m: '{"issues": []}')
    summary = await run_infer(rows, working, out)
    assert summary.skipped == 0 and summary.failed == 0
    final = lines_of(out)
    assert [r["status"] for r in final] == ["ok", "ok"]  # failed rows replaced, not added


async def test_a_torn_last_line_is_dropped_and_its_row_redone(tmp_path):
    rows = select_rows(load_rows(FIXTURE), domains=["terminal"])
    out = tmp_path / "p.jsonl"
    world = simgym.FunctionWorldModel(lambda m: "root@9f2c1e:/app#")
    await run_infer(rows[:2], world, out)
    with open(out, "a", encoding="utf-8") as f:
        f.write('{"key": "terminal/1002/3", "status": "o')  # a crash mid-write
    with pytest.warns(UserWarning, match="unreadable row"):
        summary = await run_infer(rows, world, out)
    assert summary.skipped == 2 and summary.written == 2
    final = lines_of(out)
    assert [r["key"] for r in final] == [r.key for r in rows]


def test_cli_errors_are_one_line_without_traceback(tmp_path):
    result = cli("infer", "--data", tmp_path / "nowhere", "--out", tmp_path / "p.jsonl")
    assert result.exit_code == 2 and "benchmark data not found" in result.output
    result = cli("infer", "--data", FIXTURE, "--out", tmp_path / "p.jsonl", "--domains", "web")
    assert result.exit_code == 2 and "no rows for domain(s) web" in result.output
    report = tmp_path / "r.json"
    report.write_text('{"schema": "simgym.bench.score/1"}')
    result = cli("compare", report, report, "--paired")
    assert result.exit_code == 2 and "--paired needs two results JSONL files" in result.output
    assert "Traceback" not in result.output
