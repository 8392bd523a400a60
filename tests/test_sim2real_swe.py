"""Sim2real's repository tasks: disjoint held-out and training repositories; every kind
solved in a real sandboxed checkout by the reference plan and by the reader (which edits
what the files showed it), failed by a wrong plan, and played the same way in the grounded
twin, screen for screen, the submitted diff included (written as git writes it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from simgym.bench.sim2real import get_suite
from simgym.bench.sim2real.swe_tasks import (
    SWE_KINDS,
    swe_heldout_tasks,
    swe_training_tasks,
    swe_world,
)
from simgym.bench.sim2real.tasks import task_line
from simgym.domains.swe_ground import diff
from simgym.real.sandbox import bwrap_problem
from support import play_suite_plans, same_screens

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sim2real"


def test_heldout_and_training_repositories_share_no_name() -> None:
    heldout, training = swe_heldout_tasks(), swe_training_tasks()
    assert len(heldout) == 21 and len(training) == 70
    assert not {t.instruction for t in heldout} & {t.instruction for t in training}
    held = {p.split("/")[0] for t in heldout for p in t.scenario["files"]}
    trained = {p.split("/")[0] for t in training for p in t.scenario["files"]}
    assert held & trained == {"tests", "CHANGELOG.md"}  # the packages differ
    assert [t.metadata["kind"] for t in heldout[:6]] == list(SWE_KINDS)
    assert swe_world(3) == swe_world(3) and swe_world(3) != swe_world(4)
    assert get_suite("swe").domain == "swe"
    for name, tasks in (("swe-heldout.jsonl", heldout), ("swe-train.jsonl", training)):
        lines = (EXAMPLE / "tasks" / name).read_text(encoding="utf-8").splitlines()
        assert lines == [task_line(t) for t in tasks], f"regenerate {name}: run.py --write-tasks"


def _git_diff(root: Path, before: dict[str, str], after: dict[str, str]) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    git("init", "-q")
    for path, content in before.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    git("add", "-A")
    git("commit", "-qm", "start")
    for path in before:
        if path not in after:
            (root / path).unlink()
    for path, content in after.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    git("add", "-A")
    return git("diff", "--cached", "--no-color").rstrip("\n")


@pytest.mark.skipif(subprocess.run(["git", "--version"]).returncode != 0, reason="no git")
def test_the_twin_writes_a_diff_as_git_does(tmp_path: Path) -> None:
    files = swe_world(0)["scenario"]["files"]
    pricing = next(p for p in files if p.endswith("pricing.py"))
    config = next(p for p in files if p.endswith("config.py"))
    legacy = next(p for p in files if p.endswith("legacy.py"))
    after = dict(files)
    after[pricing] = files[pricing].replace(" > ", " >= ")  # a hunk under a def: a heading
    after[config] = files[config].replace("\n\n", "\n\n# tuned\n", 1)
    after["CHANGELOG.md"] = files["CHANGELOG.md"] + "- more\n"
    after["empty.txt"] = ""
    after["pkg/new.py"] = "x = 1\n"
    del after[legacy]
    assert diff(files, after) == _git_diff(tmp_path, files, after)


def _wrong(task: object) -> list[object]:
    return [
        {"name": "bash", "arguments": {"command": "echo nope >> CHANGELOG.md"}},
        {"name": "submit", "arguments": {}},
    ]


needs_sandbox = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))


@needs_sandbox
@pytest.mark.parametrize("play", ["reference", "reader", "wrong"])
def test_every_kind_in_a_real_checkout_and_the_twin(play: str, tmp_path: Path) -> None:
    report, episodes = play_suite_plans(swe_heldout_tasks(6), play, _wrong, tmp_path)
    expected = 0 if play == "wrong" else 6
    for backend in ("real", "sim"):
        cell = report["backends"][backend]
        assert (cell["successes"], cell["errors"]) == (expected, 0), (backend, cell)
        assert set(cell["by_kind"]) == set(SWE_KINDS)
    real, sim = episodes["real"], episodes["sim"]
    assert {t.world_model["backend"] for t in real.values()} == {"real-swe"}
    assert {t.metrics.get("state_source") for t in real.values()} == {"live"}
    # the grounded twin showed what the real tools showed, the submitted diff included
    assert same_screens(real, sim)
    assert all(real[k].done and sim[k].done for k in sim)
