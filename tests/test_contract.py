from simgym.core import contract
from simgym.core.contract import parse_output


def test_tagged_block_is_taken():
    out = parse_output("noise <predicted_observation>\nfile.txt\n</predicted_observation> tail")
    assert out.observation == "file.txt"
    assert out.tagged and out.reasoning is None


def test_last_of_several_blocks_wins():
    raw = "<predicted_observation>draft</predicted_observation>\n<predicted_observation>final</predicted_observation>"
    assert parse_output(raw).observation == "final"


def test_think_block_is_reasoning():
    out = parse_output(
        "<think>the file exists</think>\n<predicted_observation>ok</predicted_observation>"
    )
    assert out.observation == "ok"
    assert out.reasoning == "the file exists"


def test_unclosed_think_then_observation():
    out = parse_output(
        "<think>hmm, let me see <predicted_observation>ls output</predicted_observation>"
    )
    assert out.observation == "ls output"
    assert out.reasoning == "hmm, let me see"


def test_unclosed_think_without_observation_leaves_nothing():
    out = parse_output("<think>still thinking about it")
    assert out.observation == ""
    assert out.reasoning == "still thinking about it"


def test_only_closing_think_tag():
    out = parse_output("reasoning first</think>\nthe screen")
    assert out.observation == "the screen"
    assert out.reasoning == "reasoning first"
    assert not out.tagged


def test_unclosed_observation_tag_as_when_stopped_at_close_tag():
    out = parse_output('<predicted_observation>\n{"ok": true}\n')
    assert out.observation == '{"ok": true}'
    assert out.tagged


def test_fallback_to_plain_text_and_header_stripped():
    out = parse_output("**Environment Observation:**\ntotal 0\n")
    assert out.observation == "total 0"
    assert not out.tagged


def test_reasoning_content_field_is_kept():
    out = parse_output("<predicted_observation>x</predicted_observation>", "server-side thoughts")
    assert out.reasoning == "server-side thoughts"


def test_messages_round_trip_action_text():
    msg = contract.user_message(
        3, '[{"keystrokes": "ls\\n", "duration": 1}]', instruction="do it", control="make it fail"
    )
    assert msg["role"] == "user"
    assert msg["content"].startswith("### Turn 3")
    assert "**Task:** do it" in msg["content"]
    assert "**Control instruction:** make it fail" in msg["content"]
    assert contract.action_text_of(msg["content"]) == '[{"keystrokes": "ls\\n", "duration": 1}]'
    assert contract.assistant_message("abc")["content"] == "**Environment Observation:**\nabc"


def test_empty_trailing_tag_does_not_erase_the_observation():
    raw = "<predicted_observation>\nfile.txt\n</predicted_observation>\n<predicted_observation>\n"
    assert parse_output(raw).observation == "file.txt"
    unclosed = "<predicted_observation>\nfirst\n<predicted_observation>\n"
    assert parse_output(unclosed).observation == "first"
    assert parse_output("<predicted_observation>\n\n").observation == ""


def test_unclosed_block_after_a_closed_one_wins_when_it_has_text():
    raw = "<predicted_observation>old</predicted_observation>\n<predicted_observation>new"
    assert parse_output(raw).observation == "new"
