"""Judge answers, scoring arithmetic on hand-computed rows, reports and comparisons."""

import json

import pytest

from simgym.bench.compare_runs import compare_reports, compare_table, load_side, paired_reports
from simgym.bench.data import BenchRow
from simgym.bench.infer import prediction_row
from simgym.bench.judge import (
    JudgeVerdict,
    judge_messages,
    judged_row,
    load_prompt,
    parse_judge_output,
)
from simgym.bench.report import chart_png, to_html, to_markdown, write_reports
from simgym.bench.score import score_rows, to_100
from simgym.bench.store import RowWriter
from simgym.core.worldmodel import Prediction

DIMS = ("format", "factuality", "consistency", "realism", "quality")

# -- the judge's answer -----------------------------------------------------------------


def test_plain_json_answer():
    verdict = parse_judge_output(
        '{"format": 5, "factuality": 4, "consistency": 3, "realism": 4, "quality": 4,'
        ' "strengths": ["layout"], "weaknesses": ["wrong size"]}'
    )
    assert verdict.ok and verdict.scores == dict(zip(DIMS, [5, 4, 3, 4, 4], strict=True))
    assert verdict.total == pytest.approx(4.0)
    assert verdict.strengths == ["layout"] and verdict.weaknesses == ["wrong size"]


@pytest.mark.parametrize(
    "answer",
    [
        '<think>the {"format": 1} is a guess</think>\n```json\n{"format": 4, "factuality": 3,'
        ' "consistency": 5, "realism": 4, "quality": 4}\n```',
        'Here you go: {"scores": {"Format": "4", "Factuality": "3/5", "Consistency": 5,'
        ' "Realism": 4.0, "Quality": {"score": 4}},}',
        '{"format_score": 4, "factuality_score": 3, "consistency_score": 5,'
        ' "realism_score": 4, "quality_score": 4, "note": "a } inside a string",}',
        "Format: 4\nFactuality: 3\nConsistency: 5\nRealism: 4\nQuality: 4",
        '<final_evaluation>{"format": 4, "factuality": 3, "consistency": 5, "realism": 4,'
        ' "quality": 4}</final_evaluation>',
    ],
)
def test_lenient_answers(answer):
    verdict = parse_judge_output(answer)
    assert verdict.ok, verdict.error
    assert verdict.scores == {
        "format": 4,
        "factuality": 3,
        "consistency": 5,
        "realism": 4,
        "quality": 4,
    }


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "answered nothing"),
        ('{"format": 4, "factuality": 3}', "missing consistency"),
        (
            '{"format": 80, "factuality": 70, "consistency": 90, "realism": 60, "quality": 75}',
            "outside 1-5",
        ),
        (
            '{"format": <1-5>, "factuality": <1-5>, "consistency": <1-5>, "realism": <1-5>,'
            ' "quality": <1-5>}',
            "unreadable",
        ),
        ("The simulation looks fine to me.", "unreadable"),
    ],
)
def test_unreadable_answers_fail_with_a_reason(answer, reason):
    verdict = parse_judge_output(answer)
    assert not verdict.ok and reason in verdict.error


def test_scores_out_of_ten_are_rescaled_and_cut_off_reasoning_is_not_read():
    grades = '"factuality": 3, "consistency": 5, "realism": 4, "quality": 4}'
    assert parse_judge_output('{"format": "8/10", ' + grades).scores["format"] == 4
    assert not parse_judge_output('<think>maybe {"format": 4, ' + grades).ok


def test_judge_prompt_per_family_and_request_layout():
    prompts = {d: load_prompt(d) for d in ("mcp", "search", "terminal", "swe", "web", "zzz")}
    assert prompts["terminal"].system == prompts["swe"].system
    assert len({p.system for p in prompts.values()}) == 5
    assert all("$" not in p.system for p in prompts.values())
    assert "tool server" in prompts["mcp"].system
    row = _prediction(_row("terminal", 1, 2), "shown ```x``` here")
    system, user = judge_messages(row, prompts["terminal"])
    assert system["role"] == "system" and user["role"] == "user"
    assert "## Earlier turns" in user["content"] and "p1" in user["content"]
    assert "real 2" in user["content"] and "````\nshown ```x``` here\n````" in user["content"]
    _, short = judge_messages(row, prompts["terminal"], context_turns=0)
    assert "p1" not in short["content"] and "1 earlier turns left out" in short["content"]


def test_judge_prompts_can_be_replaced(tmp_path):
    (tmp_path / "judge_shell.md").write_text("name: my shell\n\n- check $HOME stays")
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "judge_system_prompt.txt").write_text("Grade this tool result.\n")
    shell = load_prompt("terminal", tmp_path)
    assert "What matters for my shell" in shell.system and "- check $HOME stays" in shell.system
    assert "Five dimensions" in shell.system  # the frame is still ours
    whole = load_prompt("mcp", tmp_path)
    assert whole.system == "Grade this tool result." and whole.family.startswith("mcp")
    assert load_prompt("search", tmp_path).system == load_prompt("search").system


# -- scoring ----------------------------------------------------------------------------


def _row(domain, row_id, turn=1):
    return BenchRow(
        task=domain,
        id=row_id,
        turn_idx=turn,
        total_turns=turn,
        system_str="sys",
        prompt=[f"p{i}" for i in range(1, turn + 1)],
        response=[f"**Environment Observation:**\nreal {i}" for i in range(1, turn + 1)],
        current_prompt=f"p{turn}",
        reference=f"**Environment Observation:**\nreal {turn}",
    )


def _prediction(row, observation="sim", failed=False):
    return prediction_row(
        row,
        prediction=None if failed else Prediction(observation=observation, raw=observation),
        error="WorldModelError: down" if failed else None,
        attempts=1,
        world_model={"backend": "test"},
    )


def _graded(row, scores):
    verdict = JudgeVerdict(scores=dict(zip(DIMS, scores, strict=True)))
    return _judged(_prediction(row), "ok", verdict)


def _judged(prediction, status, verdict=None, error=None):
    return judged_row(
        prediction,
        status=status,
        verdict=verdict,
        error=error,
        raw="",
        attempts=1,
        settings={"model": {"backend": "judge"}},
        prompt=None,
        latency_s=0.0,
        usage={"prompt_tokens": 0, "completion_tokens": 0},
    )


def hand_rows():
    """terminal: two graded rows (totals 4.0 and 2.4), a judge failure, an inference
    failure; mcp: one perfect row and one empty prediction."""
    return [
        _graded(_row("terminal", 1), [5, 4, 3, 4, 4]),
        _graded(_row("terminal", 2), [3, 2, 3, 2, 2]),
        _judged(_prediction(_row("terminal", 3)), "failed", error="unreadable judge answer"),
        _judged(_prediction(_row("terminal", 4), failed=True), "skipped", error="inference"),
        _graded(_row("mcp", 5), [5, 5, 5, 5, 5]),
        _judged(_prediction(_row("mcp", 6), observation=""), "skipped", error="empty"),
    ]


def test_score_arithmetic_on_hand_computed_rows():
    assert to_100(1) == 0 and to_100(5) == 100 and to_100(3.2) == pytest.approx(55)
    report = score_rows(hand_rows())
    term, mcp = report["domains"]["terminal"], report["domains"]["mcp"]
    # terminal means: format (5+3)/2=4 -> 75; the others 3 -> 50; total (4.0+2.4)/2=3.2 -> 55
    assert term["scores"] == {
        "format": 75.0,
        "factuality": 50.0,
        "consistency": 50.0,
        "realism": 50.0,
        "quality": 50.0,
        "total": 55.0,
    }
    assert (term["rows"], term["graded"], term["infer_failed"], term["judge_failed"]) == (
        4,
        2,
        1,
        1,
    )
    assert term["failed"] == 2 and term["empty"] == 0
    # strict: failures are the lowest grade: (75 + 35 + 0 + 0) / 4
    assert term["total_strict"] == 27.5
    assert mcp["scores"]["total"] == 100.0 and mcp["empty"] == 1 and mcp["total_strict"] == 50.0
    macro = report["overall"]["macro"]
    assert macro["scores"]["total"] == 77.5  # (55 + 100) / 2: each domain counts once
    assert macro["scores"]["format"] == 87.5
    assert macro["total_strict"] == 38.75
    micro = report["overall"]["micro"]
    assert micro["scores"]["total"] == 70.0  # mean of 4.0, 2.4, 5.0 = 3.8 -> 70
    assert micro["scores"]["format"] == 83.33  # (5 + 3 + 5) / 3 -> 83.33
    assert micro["total_strict"] == 35.0  # (75 + 35 + 100) / 6
    assert micro["failed"] == 3 and micro["rows"] == 6


def test_rows_keep_the_reference_scripts_flat_fields():
    good, _, judge_failed, *_ = hand_rows()
    assert good["failed"] == 0.0 and good["total_score"] == 4.0 and good["format"] == 5
    assert judge_failed["failed"] == 1.0 and judge_failed["total_score"] == 0


def test_predictions_alone_give_rule_metrics_and_failures():
    rows = [_prediction(_row("terminal", 1), "real 1"), _prediction(_row("terminal", 2), "x")]
    rows.append(_prediction(_row("terminal", 3), failed=True))
    report = score_rows(rows)
    term = report["domains"]["terminal"]
    assert term["scores"]["total"] is None and term["total_strict"] is None
    assert term["infer_failed"] == 1 and term["not_judged"] == 2
    assert term["metrics"]["exact_match"] == {"mean": 0.5, "n": 2}
    assert report["overall"]["macro"]["domains_without_grades"] == ["terminal"]


# -- reports and comparison -------------------------------------------------------------


def test_reports(tmp_path):
    report = score_rows(hand_rows(), sources=["judged.jsonl"])
    markdown = to_markdown(report)
    assert "| terminal | 75.00 | 50.00 | 50.00 | 50.00 | 50.00 | 55.00 | 27.50 | 2/4 |" in markdown
    assert "1 inference, 1 judge" in markdown and "| overall (macro) |" in markdown
    page = to_html(report)
    assert "<table>" in page and ("<svg" in page or "image/png" in page)
    if chart_png(report) is None:  # matplotlib is optional; the SVG chart stands in
        assert "<svg" in page
    paths = write_reports(
        report,
        json_path=tmp_path / "r.json",
        markdown_path=tmp_path / "r.md",
        html_path=tmp_path / "r.html",
    )
    assert len(paths) == 3
    assert json.loads((tmp_path / "r.json").read_text())["overall"]["macro"]["scores"][
        "total"
    ] == pytest.approx(77.5)


def test_compare_two_runs(tmp_path):
    rows_a = hand_rows()
    rows_b = [_graded(_row("terminal", i), [4, 4, 4, 4, 4]) for i in (1, 2, 3)]
    rows_b.append(_graded(_row("mcp", 5), [3, 3, 3, 3, 3]))
    with RowWriter(tmp_path / "b.jsonl") as writer:
        for row in rows_b:
            writer.write(row)
    write_reports(score_rows(rows_a), json_path=tmp_path / "a.json")
    report_a, none = load_side(tmp_path / "a.json")
    report_b, loaded_b = load_side(tmp_path / "b.jsonl")
    assert none is None and len(loaded_b) == 4
    comparison = compare_reports(report_a, report_b)
    assert comparison["domains"]["terminal"]["total"] == {"a": 55.0, "b": 75.0, "delta": 20.0}
    assert comparison["domains"]["mcp"]["total"]["delta"] == -50.0
    assert comparison["overall"]["total"] == {"a": 77.5, "b": 62.5, "delta": -15.0}
    lines = compare_table(comparison)
    assert lines[1][:4] == ["mcp", "100.00", "50.00", "-50.00"]
    # Paired: only keys graded in both (terminal 1 and 2, mcp 5).
    pa, pb = paired_reports(rows_a, loaded_b)
    assert pa["domains"]["terminal"]["graded"] == 2 and pb["domains"]["terminal"]["graded"] == 2
    assert pa["domains"]["terminal"]["failed"] == 0
