"""The recorded dev set (devset/): real trajectories exported as AgentWorldBench rows.

Nothing is recorded here: the test reads the shipped files and checks their shape, that
every episode file made it into the rows, and that every real observation passes its
domain's own format check (with the scenario of the episode file it came from).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import simgym.domains  # noqa: F401  (registers the built-in domains)
from simgym.bench.data import BenchRow, clean_observation, load_rows
from simgym.core import contract
from simgym.core.domain import get_domain
from simgym.core.types import Action
from simgym.rollout.scripted import load_specs

DEVSET = Path(__file__).resolve().parents[1] / "devset"
ROWS = DEVSET / "rows.jsonl"
EPISODE_FILES = sorted((DEVSET / "episodes").glob("*/*.yaml"))
DOMAINS = {"terminal", "swe", "mcp", "search", "web"}
AWB_FIELDS = {
    "task",
    "id",
    "prompt",
    "response",
    "current_prompt",
    "system_str",
    "turn_idx",
    "total_turns",
}
TASK_LINE = re.compile(r"\*\*Task:\*\* (.*?)(?:\n\n|$)", re.DOTALL)

pytestmark = pytest.mark.skipif(not ROWS.exists(), reason="devset/rows.jsonl is not there")


@pytest.fixture(scope="module")
def rows() -> list[BenchRow]:
    return load_rows(ROWS)


@pytest.fixture(scope="module")
def specs_by_instruction() -> dict[str, object]:
    specs = load_specs(EPISODE_FILES)
    found = {spec.task.instruction.strip(): spec for spec in specs}
    assert len(found) == len(specs), "two episode files share an instruction"
    return found


def first_message(row: BenchRow) -> str:
    return row.prompt[0]


def instruction_of(row: BenchRow) -> str:
    match = TASK_LINE.search(first_message(row))
    assert match, f"{row.key}: the first user message names no task"
    return match.group(1).strip()


def episodes(rows: list[BenchRow]) -> dict[str, list[BenchRow]]:
    """Rows grouped by the episode they come from (its task instruction)."""
    grouped: dict[str, list[BenchRow]] = defaultdict(list)
    for row in rows:
        grouped[instruction_of(row)].append(row)
    return grouped


def test_plain_json_rows_have_exactly_the_awb_fields() -> None:
    with open(ROWS, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    assert records
    for record in records:
        assert set(record) == AWB_FIELDS
        assert record["task"] in DOMAINS
        assert isinstance(record["id"], int)
        assert 1 <= record["turn_idx"] <= record["total_turns"]
        # Every turn up to and including this one: the reference evaluation reads the
        # action to simulate as prompt[turn_idx - 1].
        assert len(record["prompt"]) == record["turn_idx"]
        assert len(record["response"]) == record["turn_idx"]
        assert record["current_prompt"] == record["prompt"][record["turn_idx"] - 1]
        assert record["response"][-1].startswith(contract.OBSERVATION_HEADER)
        assert record["system_str"]


def test_at_least_sixty_episodes_across_the_five_domains(rows: list[BenchRow]) -> None:
    firsts = [row for row in rows if row.turn_idx == 1]
    per_domain = Counter(row.domain for row in firsts)
    assert len(firsts) >= 60
    assert set(per_domain) == DOMAINS
    assert min(per_domain.values()) >= 10
    assert len({row.key for row in rows}) == len(rows)


def test_every_episode_file_is_in_the_rows(
    rows: list[BenchRow], specs_by_instruction: dict[str, object]
) -> None:
    grouped = episodes(rows)
    assert set(grouped) == set(specs_by_instruction)
    for instruction, group in grouped.items():
        spec = specs_by_instruction[instruction]
        turns = sorted(row.turn_idx for row in group)
        assert turns == list(range(1, len(group) + 1)), instruction
        assert {row.total_turns for row in group} == {len(group)}
        assert {row.domain for row in group} == {spec.task.domain}
        assert 3 <= len(group) <= 25


def test_long_horizon_episodes(rows: list[BenchRow]) -> None:
    long = {row.domain for row in rows if row.turn_idx == 1 and (row.total_turns or 0) >= 20}
    count = sum(1 for row in rows if row.turn_idx == 1 and (row.total_turns or 0) >= 20)
    assert count >= 5
    assert len(long) >= 4


def test_every_real_observation_passes_its_domain_check(
    rows: list[BenchRow], specs_by_instruction: dict[str, object]
) -> None:
    scenarios: dict[str, object] = {}
    failures = []
    for row in rows:
        spec = specs_by_instruction[instruction_of(row)]
        domain = get_domain(row.domain)
        if spec.task.id not in scenarios:
            scenarios[spec.task.id] = domain.scenario(spec.task.scenario)
        scenario = scenarios[spec.task.id]
        action_text = contract.action_text_of(row.current_prompt).strip()
        action = domain.validate_action(Action.parse(action_text), scenario)
        observation = clean_observation(row.reference)  # without the history header
        assert observation.strip(), f"{row.key}: empty observation"
        problems = domain.check_observation(observation, action, scenario)
        if problems:
            failures.append((spec.task.id, row.turn_idx, problems))
    assert not failures, failures[:5]
