"""Sim2real's search tasks: disjoint held-out and training companies; every kind solved on
the real full-text engine by the reference plan and by the reader (which reads every URL
and value from what the engine shows), failed by a wrong plan; the twin's results list the
company's pages as its index holds them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simgym.bench.sim2real import get_suite
from simgym.bench.sim2real.plans import fill, reference_solution
from simgym.bench.sim2real.search_tasks import (
    SEARCH_KINDS,
    search_heldout_tasks,
    search_training_tasks,
    search_world,
)
from simgym.bench.sim2real.tasks import task_line
from simgym.worldmodels.function import FunctionWorldModel
from support import play_suite_plans

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sim2real"


def test_heldout_and_training_companies_share_no_name() -> None:
    heldout, training = search_heldout_tasks(), search_training_tasks()
    assert len(heldout) == 21 and len(training) == 70
    assert len({t.scenario["documents"][0]["url"] for t in heldout}) == 3

    def words(tasks: list) -> set[str]:
        pages = [d["content"] + d["title"] for t in tasks for d in t.scenario["documents"]]
        return {w for page in pages for w in page.replace(":", " ").split() if w.istitle()}

    # no company, team or person of a held-out wiki is in a training one
    held_names = {w for w in words(heldout)} - {"Project", "Lead", "Room", "Projects"}
    held_names -= {"Owner", "Deadline", "On-call", "The", "Trips", "Receipts", "Travel"}
    assert held_names and not held_names & words(training)
    assert not {t.instruction for t in heldout} & {t.instruction for t in training}
    assert [t.metadata["kind"] for t in heldout[:7]] == list(SEARCH_KINDS)
    for name, tasks in (("search-heldout.jsonl", heldout), ("search-train.jsonl", training)):
        lines = (EXAMPLE / "tasks" / name).read_text(encoding="utf-8").splitlines()
        assert lines == [task_line(t) for t in tasks], f"regenerate {name}: run.py --write-tasks"


def test_a_company_is_a_pure_function_of_its_seed() -> None:
    assert search_world(3) == search_world(3)
    assert search_world(3)["scenario"] != search_world(4)["scenario"]
    assert get_suite("search").domain == "search"


def test_the_plan_reads_urls_and_values_and_the_reference_fills_them_in() -> None:
    for task in search_heldout_tasks(7):
        answer = str(task.metadata["answer"])
        plan = task.metadata["solution"]
        assert all(answer not in str(step) for step in plan)  # read from the engine
        reference = reference_solution(task)
        assert reference[-1] == {"answer": answer}
        assert all("read" not in step for step in reference)
        assert not re.search(r"\{\w+\}", json.dumps(reference))  # every value filled in
    assert fill({"queries": ["a {x}"], "n": 2}, {"x": "b"}) == {"queries": ["a b"], "n": 2}


def test_an_answer_passes_on_the_value_alone() -> None:
    tasks = {t.metadata["kind"]: t for t in search_heldout_tasks(7)}
    extension = tasks["oncall_of_project"]
    value = str(extension.metadata["answer"])
    pattern = re.compile(extension.metadata["reward"]["pattern"])
    assert pattern.search(f"Call extension {value}.")
    assert not pattern.search(f"{value} or 1234") and not pattern.search(f"{value}1")
    lead = tasks["team_lead"]
    pattern = re.compile(lead.metadata["reward"]["pattern"])
    assert pattern.search(f"{lead.metadata['answer']} leads it.")
    assert not pattern.search("I could not find it.")


def _wrong(task: object) -> list[object]:
    query = {"queries": ["travel policy"]}
    return [{"name": "web_search", "arguments": query}, {"answer": "Ana Lopes, 2025-07-01"}]


INVENTED = (
    '## Results for "team"\n[1] Node v22.0.0 (Current) | Node.js\n'
    "URL: https://nodejs.org/en/blog/release/v22.0.0\nSnippet: Node.js 22 was released."
)


def _first_results(episode) -> list[str]:
    """The first result's URL line of every search in an episode."""
    return [
        turn.observation.text.split("\n")[2]
        for turn in episode.turns
        if turn.action is not None and turn.action.name == "web_search"
    ]


@pytest.mark.parametrize("play", ["reference", "reader", "wrong"])
def test_every_kind_on_the_real_engine_and_the_reader_in_the_twin(
    play: str, tmp_path: Path
) -> None:
    backends = ("real", "sim") if play == "reader" else ("real",)
    # The twin's model makes up every results page (as the embedded one did, a Node.js
    # release for a team's name); strict grounding must still list the wiki's pages first.
    invented = FunctionWorldModel(
        lambda messages: f"<predicted_observation>\n{INVENTED}\n</predicted_observation>"
    )
    report, episodes = play_suite_plans(
        search_heldout_tasks(7), play, _wrong, tmp_path, backends=backends, world_model=invented
    )
    for backend in backends:
        cell = report["backends"][backend]
        assert (cell["successes"], cell["errors"]) == (0 if play == "wrong" else 7, 0), cell
        assert set(cell["by_kind"]) == set(SEARCH_KINDS)
    real = episodes["real"]
    assert {t.world_model["backend"] for t in real.values()} == {"real-search"}
    if play == "reader":
        # the company's page came first for every query the plan sent, on both sides
        sim = episodes["sim"]
        for key, episode in real.items():
            firsts = _first_results(episode)
            assert firsts and all(line.startswith("URL: https://wiki.") for line in firsts)
            assert _first_results(sim[key]) == firsts
