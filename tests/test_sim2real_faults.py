"""The controlled sim2real condition: faults injected into the twin on a curriculum, a
sampler that retries what a retry can clear, and rows trained easy to hard."""

from __future__ import annotations

import json

import pytest

from simgym.bench.sim2real import ReaderAgent, evaluate, faults_table, training_tasks
from simgym.bench.sim2real.reader import transient_fault
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Action
from simgym.perturb import Curriculum, Perturbations, Rule
from simgym.train.sim2real import RETRYABLE, collect_curriculum, fault_plan, faults_met


@pytest.mark.parametrize(
    ("observation", "fault"),
    [
        ('{"error": {"code": 503, "message": "Service Unavailable"}}', True),
        ('{"content": [{"type": "text", "text": "Error 429"}], "isError": true}', True),
        ('{"status": "pending", "message": "still processing"}', True),
        ('{"id": "C-2001", "email": "a@b.example"}', False),
        ('{"customers": [], "total": 0}', False),
        ("Error 500: not JSON, so not a structured fault", False),
        # a terminal: the failing command's error line, then the prompt back
        (
            "dev@box:~$ cat a.txt\ncat: error: operation timed out after 30 seconds\ndev@box:~$",
            True,
        ),
        ("dev@box:~$ cat a.txt\ncat: a.txt: Stale file handle\ndev@box:~$", True),
        ("dev@box:~$ cat a.txt\ncat: a.txt: No such file or directory\ndev@box:~$", False),
        ("dev@box:~$ cat a.txt\ncat: error: oops\nmore output", False),  # no prompt back
        ("dev@box:~$ cat a.txt\nerror: 42 lines\ndev@box:~$", False),
        # a search engine: a whole-call failure, not a refusal or a missing page
        ("Error: 429 Too Many Requests: retry after 2 seconds", True),
        ("Error: the search request timed out after 30 seconds", True),
        ("Error: 404 Not Found for URL https://wiki.example/teams/x", False),
        ("Error: 401 Unauthorized: the search API key was rejected", False),
        ('## Results for "q"\nError: 503 Service Unavailable for this query', False),
        # a repository's tools: bash's error and exit code, a file tool's Error: line
        ("rm: error: operation timed out after 30 seconds\n[exit code: 124]", True),
        ("[command still running after 30 seconds: killed]\n[exit code: 124]", True),
        ("Error: a.py changed on disk since it was last read; read it again", True),
        ("Error: old_str not found in a.py", False),
        ("Error: file not found: a.py", False),
        ("rm: cannot remove 'x': No such file or directory\n[exit code: 1]", False),
    ],
)
def test_a_transient_fault_is_told_from_an_answer(observation: str, fault: bool) -> None:
    assert transient_fault(observation) is fault


@pytest.mark.parametrize("domain", ["terminal", "swe", "search"])
def test_the_reader_retries_every_fault_a_retry_clears_as_simgym_writes_it(domain: str) -> None:
    import random

    from simgym.bench.sim2real import get_suite
    from simgym.core.domain import get_domain
    from simgym.perturb.faults import fault_params
    from simgym.perturb.renderers import RENDERERS, Context
    from simgym.train.sim2real import retryable

    suite = next(get_suite(n) for n in ("shell", "swe", "search") if get_suite(n).domain == domain)
    task = suite.heldout(1)[0]
    scenario = get_domain(domain).scenario(task.scenario)
    calls = [Action.parse(json.dumps(step)) for step in task.metadata["solution"] if "name" in step]
    for action in calls:
        if action.name == "submit":
            continue
        for kind in retryable(domain):
            if (domain, kind) == ("search", "stale_data"):
                continue  # dated results, no error: the plan goes on
            params = fault_params(kind, random.Random(0))
            text = RENDERERS[domain](kind, Context(scenario, action, "dev@box:~$ ", params))
            assert transient_fault(text), (action.name, kind, text)


def test_the_fault_plan_follows_the_curriculum_levels() -> None:
    assert fault_plan(0.0) is None  # the first stage meets no faults
    easy, hard = fault_plan(0.15), fault_plan(0.6)
    assert easy is not None and hard is not None
    (rule,) = easy.rules
    # the first tier's retryable kinds only, at difficulty's rate, templates, mcp only
    assert rule.kinds == ["timeout", "rate_limit", "server_error", "flaky_network"]
    assert (rule.probability, rule.mode, rule.domains) == (0.12, "template", ["mcp"])
    assert set(hard.rules[0].kinds) == set(RETRYABLE) and hard.rules[0].probability == 0.48
    # a level whose tiers hold none of the chosen kinds injects nothing
    assert fault_plan(0.1, kinds=["stale_data"]) is None
    # a terminal twin: its own domain, and no slow_load (a program left running)
    shell = fault_plan(0.6, domain="terminal")
    assert shell is not None and shell.rules[0].domains == ["terminal"]
    assert set(shell.rules[0].kinds) == set(RETRYABLE) - {"slow_load"}


def test_the_reader_retries_a_shell_command_that_failed_in_the_twin(tmp_path) -> None:
    from simgym.bench.sim2real.shell_tasks import shell_training_tasks

    task = next(t for t in shell_training_tasks(7) if t.metadata["kind"] == "append_line")
    report = evaluate(
        [task],
        agent=ReaderAgent([task], retries=2),
        k=1,
        backends=["sim"],
        perturbations=Perturbations(rules=[Rule(fault="timeout", turns=[1], domains=["terminal"])]),
        max_turns=8,
        out_dir=tmp_path,
    )
    sim = report["backends"]["sim"]
    assert sim["successes"] == 1 and sim["faults"]["retried"] == 1
    (episode,) = read_trajectories(tmp_path / "sim.jsonl")
    calls = [t for t in episode.turns if t.action and t.action.keystrokes]
    assert len(calls) == 2 and calls[0].action == calls[1].action
    assert "timed out" in calls[0].observation.text and calls[0].perturbation
    # the failed command changed nothing: the line is in the file once, from the retry
    line = task.metadata["solution"][0]["arguments"]["keystrokes"].split("'")[1]
    assert episode.final_state["files"]["/home/dev/todo.txt"].count(line) == 1


def _first_call_fails(times: int) -> Perturbations:
    return Perturbations(
        rules=[Rule(fault="server_error", turns=list(range(1, times + 1)), params={"status": 503})]
    )


@pytest.mark.parametrize(("retries", "solved"), [(0, 0), (2, 1)])
def test_the_reader_retries_a_failed_call_in_the_twin(tmp_path, retries, solved) -> None:
    task = next(t for t in training_tasks(7) if t.metadata["kind"] == "update_by_id")
    report = evaluate(
        [task],
        agent=ReaderAgent([task], retries=retries),
        k=1,
        backends=["sim"],
        perturbations=_first_call_fails(2),
        max_turns=8,
        out_dir=tmp_path,
    )
    sim = report["backends"]["sim"]
    assert sim["successes"] == solved
    assert report["perturbations"]["rules"][0]["fault"] == "server_error"
    after = {k: sim["faults"][k] for k in ("faults", "retried", "answered", "solved")}
    # without retries the script has nothing left after its failed update: it stops
    assert after == (
        {"faults": 2, "retried": 2, "answered": 0, "solved": 1}
        if retries
        else {"faults": 1, "retried": 0, "answered": 1, "solved": 0}
    )
    (episode,) = read_trajectories(tmp_path / "sim.jsonl")
    calls = [t for t in episode.turns if t.action and t.action.name]
    faults = [t.perturbation["fault"] for t in calls if t.perturbation]
    if retries:
        # the update failed twice with a 503, then went through on the third try
        assert [c.action.name for c in calls] == ["update_email"] * 3
        assert faults == ["server_error", "server_error"]
        assert json.loads(calls[-1].observation.text)["email"] in task.instruction
    else:
        assert len(calls) == 1 and faults == ["server_error"]


def test_a_curriculum_collects_easy_to_hard(tmp_path) -> None:
    tasks = training_tasks(4)
    curriculum = Curriculum(schedule="linear", start=0.0, end=0.6, steps=len(tasks))
    got = collect_curriculum(
        tasks,
        ReaderAgent(tasks, retries=3),
        tmp_path,
        curriculum,
        stages=2,
        max_turns=10,
    )
    assert got.episodes == 4 and len(got.kept) == 4
    # kept in stage order: the easy share's tasks first
    assert [t.task.id for t in got.kept] == [t.id for t in tasks]
    easy = json.loads((tmp_path / "stage-0" / "report.json").read_text())
    hard = json.loads((tmp_path / "stage-1" / "report.json").read_text())
    assert "perturbations" not in easy  # level 0: no plan at all
    assert hard["perturbations"]["rules"][0]["probability"] == 0.24  # level 0.3
    assert faults_met(got.kept[:2]) == 0
    assert faults_met(got.kept[2:]) >= 1  # seeded: the hard share met (and retried) faults


def test_rows_can_be_trained_in_their_written_order(tmp_path, tiny_base) -> None:
    from torch.utils.data import SequentialSampler

    from simgym.train.sft import SftOptions, prepare_sft

    rows = tmp_path / "rows.jsonl"
    with rows.open("w") as out:
        for episode in range(3):
            row = {
                "messages": [{"role": "user", "content": f"task {episode}"}],
                "completion": "Done.",
                "episode_id": f"e{episode}",
                "turn": 0,
            }
            out.write(json.dumps(row) + "\n")
    prepared = prepare_sft(
        SftOptions(data=rows, out=tmp_path / "run", base=str(tiny_base), order="sequential")
    )
    assert isinstance(prepared.trainer._get_train_sampler(), SequentialSampler)
    first = prepared.tokenizer.decode(prepared.trainer.train_dataset[0]["input_ids"])
    assert "task 0" in first


def test_the_faults_table_compares_policies_in_the_faulty_twin() -> None:
    def report(condition: str, wins: list[int], retried: int) -> dict:
        faults = {"faults": 4, "retried": retried, "other": 4 - retried, "answered": 0}
        cell = {
            "episodes": len(wins),
            "successes": sum(wins),
            "success_rate": sum(wins) / len(wins),
            "ci95": [0.0, 1.0],
            "per_task": {f"t{i}": [w] for i, w in enumerate(wins)},
            "faults": {**faults, "out_of_turns": 0, "episodes": 3, "solved": retried // 2},
        }
        return {
            "condition": condition,
            "tasks": ["t0", "t1", "t2", "t3"],
            "backends": {"sim": cell},
            "perturbations": {"rules": []},
        }

    table = faults_table(
        [report("sim-sft", [1, 0, 0, 0], 0), report("sim-faults", [1, 1, 1, 0], 4)]
    )
    lines = table.splitlines()
    assert lines[0].startswith("| condition | twin success with faults")
    assert lines[2].startswith("| sim-sft | 0.25") and "| 0 / 4 / 0 / 0 | 0 of 3 |" in lines[2]
    assert lines[3].startswith("| sim-faults | 0.75 [0.00, 1.00] | +0.50 [")
    assert "| 4 / 0 / 0 / 0 | 2 of 3 |" in lines[3]


def test_train_script_runs_the_controlled_condition_and_records_it(tmp_path, tiny_base):
    """examples/sim2real/train.py --curriculum, in tiny: collect in the faulty twin in
    stages, train in row order (a tiny random base, one step), export, write the record."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "sim2real" / "train.py"
    spec = importlib.util.spec_from_file_location("sim2real_train", path)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    record = tmp_path / "training.json"
    argv = ["--condition", "tiny-faults", "--curriculum", "linear:0:0.6", "--train-tasks", "4"]
    argv += ["--stages", "2", "--epochs", "1", "--base", str(tiny_base), "--threads", "1"]
    assert train.main([*argv, "--out", str(tmp_path / "run"), "--results", str(record)]) == 0
    written = json.loads(record.read_text())
    assert written["collection"]["curriculum"] == "linear:0:0.6"
    assert written["collection"]["episodes"] == 4 and written["collection"]["kept"] == 4
    assert written["collection"]["faults_met"] >= 1
    assert written["options"]["order"] == "sequential" and written["result"]["steps"] == 1
    assert written["policy"]["bytes"] == (tmp_path / "run" / "run" / "policy.gguf").stat().st_size
    rows = [json.loads(line) for line in (tmp_path / "run" / "rows.jsonl").read_text().splitlines()]
    episodes = list(dict.fromkeys(r["task_id"] for r in rows))
    assert episodes == [t.id for t in training_tasks(4)]  # easy stage first, in task order
