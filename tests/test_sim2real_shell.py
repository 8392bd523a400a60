"""Sim2real's terminal tasks: disjoint held-out and training machines; every kind solved
in a real sandboxed shell by the reference plan and by the reader (which reads every fact
from the screen), failed by a wrong plan, and played the same way in the grounded twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simgym.agents import ScriptedAgent
from simgym.bench.sim2real import evaluate
from simgym.bench.sim2real.plans import reference_solution
from simgym.bench.sim2real.shell_tasks import (
    SHELL_KINDS,
    shell_heldout_tasks,
    shell_training_tasks,
    shell_world,
)
from simgym.bench.sim2real.tasks import task_line
from simgym.core.trajectories import read_trajectories
from simgym.real.sandbox import bwrap_problem
from support import play_suite_plans, same_screens

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sim2real"


def test_heldout_and_training_machines_share_no_fact() -> None:
    heldout, training = shell_heldout_tasks(), shell_training_tasks()
    assert len(heldout) == 21 and len(training) == 70
    assert not {t.id for t in heldout} & {t.id for t in training}
    assert not {t.instruction for t in heldout} & {t.instruction for t in training}
    # other machines: other secrets, codes and logs
    held_files = {p: c for t in heldout for p, c in t.scenario["files"].items() if c}
    for task in training:
        files = task.scenario["files"]
        assert not set(files.values()) & {
            c for p, c in held_files.items() if p.endswith(("app.env", ".log"))
        }
    answers = {str(t.metadata.get("answer")) for t in training}
    secrets = {str(t.metadata["answer"]) for t in heldout if t.metadata["kind"] == "config_value"}
    assert secrets and not secrets & answers
    # every kind on every machine, in turn
    assert [t.metadata["kind"] for t in heldout[:7]] == list(SHELL_KINDS)
    # deterministic: the committed files are what the generators make
    for name, tasks in (("shell-heldout.jsonl", heldout), ("shell-train.jsonl", training)):
        lines = (EXAMPLE / "tasks" / name).read_text(encoding="utf-8").splitlines()
        assert lines == [task_line(t) for t in tasks], f"regenerate {name}: run.py --write-tasks"


def test_a_machine_is_a_pure_function_of_its_seed() -> None:
    assert shell_world(3) == shell_world(3)
    assert shell_world(3)["scenario"]["files"] != shell_world(4)["scenario"]["files"]


def test_the_reference_plan_holds_the_answer_and_the_reader_plan_does_not() -> None:
    for task in shell_heldout_tasks(7):
        plan = task.metadata["solution"]
        reference = reference_solution(task)
        if task.metadata["reward"]["type"] == "contains":
            answer = str(task.metadata["answer"])
            assert all(answer not in str(step) for step in plan)  # read from the screen
            assert reference[-1] == {"answer": answer}
        assert all("read" not in step for step in reference)


def _wrong(task: object) -> list[object]:
    """A plan that does the wrong thing: answers a made-up value, writes the wrong line."""
    keys = {"keystrokes": "echo 'nope' >> todo.txt\n"}
    return [{"name": "send_keys", "arguments": keys}, {"answer": "42"}]


needs_sandbox = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))


@needs_sandbox
@pytest.mark.parametrize("play", ["reference", "reader", "wrong"])
def test_every_kind_on_the_real_shell_and_the_twin(play: str, tmp_path: Path) -> None:
    report, episodes = play_suite_plans(shell_heldout_tasks(7), play, _wrong, tmp_path)
    expected = 0 if play == "wrong" else 7
    for backend in ("real", "sim"):
        cell = report["backends"][backend]
        assert (cell["successes"], cell["errors"]) == (expected, 0), (backend, cell)
        assert set(cell["by_kind"]) == set(SHELL_KINDS)
    real, sim = episodes["real"], episodes["sim"]
    # the real shell's files were read back from the sandbox; the twin's from its ledger
    assert {t.world_model["backend"] for t in real.values()} == {"real-terminal"}
    assert {t.metrics.get("state_source") for t in real.values()} == {"live"}
    assert all(t.metrics.get("state_source") != "live" for t in sim.values())
    # the grounded twin showed what the real shell showed, screen for screen
    assert same_screens(real, sim)


def test_a_lookup_passes_on_the_value_as_a_whole_token() -> None:
    import re

    task = shell_heldout_tasks(1)[0]
    value = task.metadata["answer"]
    pattern = re.compile(task.metadata["reward"]["pattern"])
    for good in (value, f"CACHE_SECRET={value}", f"The value is {value}."):
        assert pattern.search(good), good
    for bad in (f"x{value}", f"{value}9", "I could not find it."):
        assert not pattern.search(bad), bad


def test_a_count_passes_only_as_the_one_number_in_the_answer() -> None:
    import re

    task = next(t for t in shell_heldout_tasks() if t.metadata["kind"] == "count_lines")
    count = task.metadata["answer"]
    pattern = re.compile(task.metadata["reward"]["pattern"])
    for good in (count, f"{count} logs/app.log", f"It has {count} lines.\n"):
        assert pattern.search(good), good
    # the untrained policy's real false pass: the count inside a made-up timestamp
    for bad in (f"12:22:{count}.192", f"{count}0", f"{count} or {int(count) + 1}", "none"):
        assert not pattern.search(bad), bad


@needs_sandbox
def test_rescore_applies_a_fixed_check_to_the_stored_episodes(tmp_path: Path) -> None:
    import json

    from simgym.bench.sim2real import rescore
    from simgym.core.errors import SimgymError

    task = next(t for t in shell_heldout_tasks() if t.metadata["kind"] == "count_lines")
    count = task.metadata["answer"]
    loose = task.model_copy(deep=True)  # the whole-token check the count first had
    loose.metadata["reward"] = {"type": "regex", "pattern": rf"(?<![A-Za-z0-9]){count}(?![0-9])"}
    agent = ScriptedAgent(by_task={task.id: [{"answer": f"12:22:{count}.192"}]})
    report = evaluate([loose], agent=agent, k=1, backends=["real"], out_dir=tmp_path)
    assert report["backends"]["real"]["successes"] == 1  # the false pass
    with open(tmp_path / "real.jsonl", "ab") as f:
        f.write(b"{not an episode\n")
    with pytest.raises(SimgymError, match="give them all"):
        rescore(tmp_path, [t for t in shell_heldout_tasks() if t.id != task.id])
    fixed = rescore(tmp_path, [task])
    assert fixed["backends"]["real"]["successes"] == 0
    assert fixed["rescored"]["changed"] == {"real": 1}
    assert json.loads((tmp_path / "report.json").read_text())["backends"]["real"]["successes"] == 0
    (episode,) = read_trajectories(tmp_path / "real.jsonl")
    assert (episode.total_reward, episode.metrics["rescored_from"]) == (0.0, 1.0)
    assert episode.task.metadata["reward"] == task.metadata["reward"]
    assert b"{not an episode\n" in (tmp_path / "real.jsonl").read_bytes()  # nothing lost
    again = rescore(tmp_path, [task])  # a second pass changes nothing
    assert again["rescored"]["changed"] == {"real": 0}


def _typed_on_both(typed: list[str], out: Path) -> tuple[Any, Any, list[str]]:
    """Type ``typed`` on the real shell and in the twin (one held-out machine); the two
    episodes and the real screens. Every twin screen must be simgym's own (exact)."""
    task = shell_heldout_tasks(1)[0]
    steps: list[object] = [{"name": "send_keys", "arguments": {"keystrokes": k}} for k in typed]
    agent = ScriptedAgent(by_task={task.id: [*steps, {"answer": "Done."}]})
    evaluate([task], agent=agent, k=1, max_turns=8, out_dir=out)
    (real,) = read_trajectories(out / "real.jsonl")
    (sim,) = read_trajectories(out / "sim.jsonl")
    screens = [t.observation.text for t in real.turns[: len(typed)]]
    assert [t.observation.text for t in sim.turns[: len(typed)]] == screens
    assert all(t.grounding and t.grounding.get("exact") for t in sim.turns[: len(typed)])
    return real, sim, screens


@needs_sandbox
def test_an_open_quote_reads_on_in_the_twin_as_in_the_real_shell(tmp_path: Path) -> None:
    """bash shows its continuation prompt for a line with a quote left open and reads the
    next line into the same command; C-c drops it. The twin shows the same screens."""
    typed = ["echo 'abc\n", "def'\n", 'echo "x\n', "C-c", "echo 'done' >> todo.txt\n"]
    real, sim, screens = _typed_on_both(typed, tmp_path)
    assert screens[0].endswith("echo 'abc\n>") and screens[1].startswith("> def'\nabc\ndef\n")
    todo = "/home/dev/todo.txt"
    assert sim.final_state["files"][todo] == real.final_state["files"][todo]
    assert sim.final_state["files"][todo].endswith("done\n")


@needs_sandbox
def test_a_final_backslash_reads_on_in_the_twin_as_in_the_real_shell(tmp_path: Path) -> None:
    """A backslash at the end of a line escapes its newline: bash shows ``>`` and joins
    the next line to it; an escaped ``;`` starts no comment. The twin shows the same."""
    typed = ["echo ab\\\n", "cd\n", "echo a\\;#b\n"]
    _, _, screens = _typed_on_both(typed, tmp_path)
    assert screens[0].endswith("echo ab\\\n>") and screens[1].startswith("> cd\nabcd\n")
    assert "\na;#b\n" in screens[2]


@needs_sandbox
def test_a_command_reading_the_keyboard_waits_in_the_twin_as_in_the_real_shell(
    tmp_path: Path,
) -> None:
    """grep with a pattern and no file (or a bare cat) reads the keyboard: no prompt comes
    back until C-c. The twin shows the same screens."""
    typed = ["grep -l logs/today.log\n", "C-c", "echo hi; cat\n", "C-c", "wc -l < todo.txt\n"]
    _, _, screens = _typed_on_both(typed, tmp_path)
    assert screens[0].endswith("$ grep -l logs/today.log")  # no prompt: grep waits
    assert screens[2].endswith("$ echo hi; cat\nhi")
