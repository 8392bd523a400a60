"""The compact system prompts a small world model is trained and run with: every trained
domain has one with the same facts as the full prompt, environments take the style from
the backend, and exported rows and evaluation files are rebuilt with it."""

import json
import re

import pytest

import simgym
from simgym.core.domain import PROMPT_STYLES, get_domain
from simgym.core.errors import ScenarioError
from simgym.data.exchanges import restyle_trajectories, system_prompt_of
from simgym.data.sft import export_sft_file
from support import ls_trajectory

TRAINED = ("terminal", "swe", "mcp", "search", "web")
SLOT = re.compile(r"\$[a-z_]+")


@pytest.mark.parametrize("name", TRAINED)
def test_a_compact_prompt_is_short_and_fills_every_slot(name):
    domain = get_domain(name)
    scenario = domain.scenario(None)
    compact = domain.system_prompt(scenario, style="compact")
    full = domain.system_prompt(scenario)
    assert compact != full and len(compact) < 0.6 * len(full)
    assert not SLOT.findall(compact), SLOT.findall(compact)  # nothing left unfilled
    assert "<predicted_observation>" in compact
    assert domain.system_prompt(scenario, style="full") == full


def test_the_compact_prompt_keeps_the_scenario_facts():
    terminal = get_domain("terminal")
    scenario = terminal.scenario(None)
    compact = terminal.system_prompt(scenario, style="compact")
    assert "/home/dev/notes.txt" in compact and "buy milk" in compact
    mcp = get_domain("mcp")
    text = mcp.system_prompt(mcp.scenario(None), style="compact")
    # one line per tool, and the records the default server holds
    assert "- get_customer(customer_id): Fetch one customer by id." in text
    assert "C-1001" in text and '"parameters"' not in text


def test_a_domain_without_a_compact_prompt_uses_its_full_one():
    android = get_domain("android")
    scenario = android.scenario(None)
    assert android.system_prompt(scenario, style="compact") == android.system_prompt(scenario)
    with pytest.raises(ScenarioError, match="unknown prompt style"):
        android.prompt_template(style="tiny")
    assert PROMPT_STYLES == ("full", "compact")


class _Screen:
    """A terminal world model that says which prompt style it wants."""

    def __init__(self, style: str | None) -> None:
        self.prompt_style = style
        self.seen: list[str] = []

    def __call__(self, messages):
        self.seen.append(messages[0]["content"])
        return (
            "<predicted_observation>dev@devbox:~$ ls\nnotes.txt  project\n</predicted_observation>"
        )


@pytest.mark.parametrize(
    ("wanted", "given", "used"),
    [
        ("compact", None, "compact"),
        (None, None, "full"),
        ("compact", "full", "full"),  # the environment's own choice wins
    ],
)
async def test_the_environment_takes_the_style_from_the_backend(wanted, given, used):
    screen = _Screen(wanted)
    model = simgym.FunctionWorldModel(screen)
    model.prompt_style = screen.prompt_style  # type: ignore[attr-defined]
    env = simgym.make("terminal", world_model=model, prompt_style=given, grounding="off")
    await env.reset("look around")
    await env.step("ls\n")
    terminal = get_domain("terminal")
    expected = terminal.system_prompt(env.default_scenario, style=used)
    assert screen.seen and set(screen.seen) == {expected}
    assert env.trajectory.system_prompt == expected


def test_exported_rows_and_evaluation_files_carry_the_chosen_prompt(tmp_path):
    trajectory = ls_trajectory(system_prompt="a recorded full prompt")
    assert system_prompt_of(trajectory) == "a recorded full prompt"
    compact = system_prompt_of(trajectory, style="compact")
    assert compact.startswith("You simulate a Linux terminal") and "dev@box" in compact

    source = tmp_path / "test.jsonl"
    source.write_text(trajectory.model_dump_json() + "\n" + '{"task": "not a trajectory"}\n')
    out = restyle_trajectories(source, tmp_path / "eval" / "test-data.jsonl", "compact")
    first, second = out.read_text().splitlines()
    assert json.loads(first)["system_prompt"] == compact
    assert json.loads(first)["turns"] == json.loads(trajectory.model_dump_json())["turns"]
    assert second == '{"task": "not a trajectory"}'

    def count(text: str) -> int:
        return len(text.split())

    rows = tmp_path / "rows.jsonl"
    source.write_text(trajectory.model_dump_json() + "\n")
    assert export_sft_file([source], rows, count=count, prompt_style="compact").rows == 1
    assert json.loads(rows.read_text())["messages"][0]["content"] == compact
    assert export_sft_file([source], rows, count=count).rows == 1
    assert json.loads(rows.read_text())["messages"][0]["content"] == "a recorded full prompt"
