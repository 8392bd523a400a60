"""Rule metrics, checked against values worked out by hand."""

import random

import pytest

from simgym.bench.metrics import (
    edit_similarity,
    exact_match,
    format_check,
    json_metrics,
    lcs_length,
    length_ratio,
    line_f1,
    rule_metrics,
)

TERMINAL_PROMPT = (
    '### Turn 1\n\n**Action:**\n```json\n[{"keystrokes": "ls\\n", "duration": 1}]\n```'
)


def test_exact_match_ignores_trailing_space_and_blank_edges():
    assert exact_match("a  \nb\n\n", "\na\nb") == 1.0
    assert exact_match("a\nb", "a\nc") == 0.0


def test_edit_similarity_is_normalized_indel():
    # LCS(kitten, sitting) = "ittn" (4): 2 * 4 / (6 + 7)
    assert edit_similarity("kitten", "sitting") == pytest.approx(8 / 13)
    assert edit_similarity("", "") == 1.0
    assert edit_similarity("abc", "") == 0.0
    assert edit_similarity("same\n", "same") == 1.0


def test_bit_parallel_lcs_matches_the_textbook_table():
    def table(a, b):
        prev = [0] * (len(b) + 1)
        for x in a:
            cur = [0]
            for j, y in enumerate(b):
                cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
            prev = cur
        return prev[-1]

    rng = random.Random(5)
    for _ in range(300):
        a = "".join(rng.choice("ab\nc") for _ in range(rng.randint(0, 25)))
        b = "".join(rng.choice("abd ") for _ in range(rng.randint(0, 25)))
        assert lcs_length(a, b) == table(a, b)


def test_line_f1():
    # common lines a, b: precision 2/3, recall 2/4 -> F1 4/7
    assert line_f1("a\nb\nc", "a\nb\nd\ne") == pytest.approx(4 / 7)
    assert line_f1("x  \n\n", "x") == 1.0
    assert line_f1("", "") == 1.0
    assert line_f1("a", "") == 0.0
    # multisets: a repeated line counts as often as it appears in both
    assert line_f1("a\na", "a") == pytest.approx(2 * (0.5 * 1) / 1.5)


def test_json_validity_and_key_overlap():
    reference = '{"id": 1, "user": {"name": "x", "email": "y"}, "tags": [{"k": 1}]}'
    prediction = '{"id": 2, "user": {"name": "z"}, "extra": 1}'
    # reference paths: id user user.name user.email tags tags[].k; prediction: id user
    # user.name extra -> 3 shared of 7
    assert json_metrics(prediction, reference) == (1.0, pytest.approx(3 / 7))
    assert json_metrics("not json", reference) == (0.0, 0.0)
    assert json_metrics("```json\n" + reference + "\n```", reference) == (1.0, 1.0)
    # Not a JSON observation: a number on a terminal screen parses as JSON but is no object.
    assert json_metrics("41", "42") == (None, None)
    assert json_metrics("{}", "[]") == (1.0, None)


def test_length_ratio():
    assert length_ratio("abcd", "ab") == 2.0
    assert length_ratio("", "") == 1.0
    assert length_ratio("x", "") is None


def test_format_check_uses_the_domain_validator_only_where_it_fits():
    good = "root@box:/app# ls\napp.py\nroot@box:/app#"
    assert format_check(good, good, "terminal", TERMINAL_PROMPT) == (1.0, [], None)
    ok, problems, skipped = format_check("app.py", good, "terminal", TERMINAL_PROMPT)
    assert ok == 0.0 and problems and skipped is None
    # Unknown domain, an unreadable action, or a check the real observation fails itself:
    # the metric does not apply (None), it is never a pass.
    assert format_check(good, good, "spaceship", TERMINAL_PROMPT)[0] is None
    assert format_check(good, good, "terminal", "**Action:**\n{broken")[0] is None
    ok, _, skipped = format_check(good, "no prompt at the end", "terminal", TERMINAL_PROMPT)
    assert ok is None and "real observation fails" in skipped
    mcp_prompt = '**Action:**\n{"name": "get_issue", "arguments": {"issue_id": 4}}'
    assert format_check('{"id": 4}', '{"id": 4, "state": "open"}', "mcp", mcp_prompt)[0] == 1.0
    assert format_check("Issue 4 is open", '{"id": 4}', "mcp", mcp_prompt)[0] == 0.0


def test_rule_metrics_row():
    metrics = rule_metrics(
        "root@box:/app# ls\napp.py\nroot@box:/app#",
        "root@box:/app# ls\napp.py  data\nroot@box:/app#",
        domain="terminal",
        current_prompt=TERMINAL_PROMPT,
    )
    assert metrics["exact_match"] == 0.0
    assert metrics["line_f1"] == pytest.approx(2 / 3)
    assert metrics["json_valid"] is None and metrics["json_key_overlap"] is None
    assert metrics["format_ok"] == 1.0
    assert 0 < metrics["edit_similarity"] < 1 and metrics["length_ratio"] < 1
