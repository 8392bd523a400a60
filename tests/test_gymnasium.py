"""simgym as a Gymnasium text environment: Gymnasium's own env checker, whole episodes with
rewards, seeded resets, truncation, and registration with gymnasium.make."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import pytest
import yaml
from gymnasium.utils.env_checker import check_env

import simgym
from simgym.integrations.gymnasium_env import TEXT_CHARSET, SimgymTextEnv, register_envs
from support import scripted_world

ROOT = Path(__file__).resolve().parent.parent
BANK = yaml.safe_load((ROOT / "examples" / "mcp" / "bank_customers.yaml").read_text())
BEN = '{"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org"}'


def shell_world(messages: list[dict[str, str]]) -> str:
    """A terminal whose screen names the logged-in user (from the system prompt, so it
    depends on the scenario) and echoes the command."""
    user = re.search(r"Logged in as `([^`]+)`", messages[0]["content"]).group(1)
    typed = re.findall(r'"keystrokes": "([^"]*)', messages[-1]["content"])
    shown = typed[0].replace("\\n", "") if typed else "?"
    return (
        "<predicted_observation>\n"
        f"{user}@box:~$ {shown}\nran {shown} as {user}\n{user}@box:~$ \n"
        "</predicted_observation>"
    )


def shell(**options: Any) -> SimgymTextEnv:
    return SimgymTextEnv("terminal", simgym.FunctionWorldModel(shell_world), **options)


def test_gymnasium_env_checker_passes() -> None:
    # Direct construction: everything but the render modes, which need a spec.
    env = shell(task=["one", "two", "three"], max_turns=5)
    check_env(env)
    env.close()
    # Through gymnasium.make: the spec lets the checker also remake it (render, close).
    register_envs()
    world = simgym.FunctionWorldModel(scripted_world([BEN] * 10))
    made = gymnasium.make("simgym/MCP-v0", world_model=world, scenario=BANK["scenario"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(made.unwrapped)
    # The one remark left: an ansi text env declares no frame rate.
    assert [str(w.message) for w in caught if "render_fps" not in str(w.message)] == []
    made.close()


def test_a_full_episode_with_a_reward(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    task = {
        "id": "bank-1",
        "instruction": "Ben's email?",
        "metadata": {"answer": "ben@example.org"},
    }
    with simgym.TrajectoryWriter(out) as writer:
        env = SimgymTextEnv(
            "mcp",
            simgym.FunctionWorldModel(scripted_world([BEN, BEN])),
            scenario=BANK["scenario"],
            task=task,
            reward="exact",
            writer=writer,
        )
        obs, info = env.reset(seed=0)
        assert "customer-records" in obs and env.observation_space.contains(obs)
        assert info["instruction"] == "Ben's email?" and info["task_id"] == "bank-1"
        assert [t["function"]["name"] for t in info["tools"]][:2] == [
            "search_customers",
            "get_customer",
        ]

        obs, reward, terminated, truncated, info = env.step("get_customer customer_id=C-1002")
        assert (obs, reward, terminated, truncated) == (BEN, 0.0, False, False)
        assert info["turn"] == 1 and "error" not in info

        # Errors are observations and turns, not exceptions.
        obs, _, terminated, _, info = env.step({"name": "get_customer", "arguments": {"id": 1}})
        assert "customer_id" in info["error"] and info["error"] in obs and not terminated
        obs, _, _, _, info = env.step('get_customer "unclosed')
        assert info["error_type"] == "action" and "quotation" in info["error"]
        obs, _, _, _, info = env.step('{"answer": "x", "name": "get_customer"}')
        assert "nothing else" in info["error"]
        obs, _, _, _, info = env.step(42)  # type: ignore[arg-type]
        assert "string or a dict" in info["error"]

        obs, reward, terminated, truncated, info = env.step(
            '{"name": "get_customer", "arguments": {"customer_id": "C-1002"}}'
        )
        assert obs == BEN and info["turn"] == 6

        obs, reward, terminated, truncated, info = env.step('{"answer": "ben@example.org"}')
        assert (obs, reward, terminated, truncated) == ("", 1.0, True, False)
        assert info["reward_parts"] == {"exact": 1.0}
        with pytest.raises(gymnasium.error.ResetNeeded):
            env.step("get_customer customer_id=C-1002")
        env.close()
    [episode] = simgym.read_trajectories(out)
    assert episode.answer == "ben@example.org" and episode.total_reward == 1.0
    assert len(episode.turns) == 7 and episode.done and not episode.truncated
    assert episode.agent == {"name": "gymnasium"}


def test_a_seeded_reset_is_reproducible() -> None:
    tasks = [
        {"id": f"t-{user}", "instruction": f"work as {user}", "scenario": {"user": user}}
        for user in ("ana", "ben", "cruz", "dia")
    ]
    env = shell(task=tasks)

    def episode_start(seed: int) -> tuple[str, str, str]:
        obs, info = env.reset(seed=seed)
        screen, *_ = env.step("whoami")
        return info["task_id"], obs, screen

    runs = {seed: episode_start(seed) for seed in range(8)}
    for seed, first in runs.items():
        assert episode_start(seed) == first  # the same task, world and screens
        task_id, obs, screen = first
        user = task_id.removeprefix("t-")
        assert obs.startswith(f"{user}@") and f"ran whoami as {user}" in screen
    assert len({task_id for task_id, _, _ in runs.values()}) > 1  # the seed picks the task
    env.close()


def test_the_turn_limit_truncates(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    with simgym.TrajectoryWriter(out) as writer:
        env = shell(
            task={"instruction": "say hi", "metadata": {"answer": "hi"}},
            reward="exact",
            writer=writer,
            max_turns=2,
        )
        env.reset()
        assert env.step("ls")[2:4] == (False, False)
        obs, reward, terminated, truncated, info = env.step("pwd")
        assert "ran pwd" in obs and (terminated, truncated) == (False, True)
        assert reward == 0.0 and info["reward_parts"] == {"exact": 0.0}
        with pytest.raises(gymnasium.error.ResetNeeded):
            env.step("ls")
        env.close()
    [episode] = simgym.read_trajectories(out)
    assert episode.truncated and not episode.done and len(episode.turns) == 2


def test_reset_options_and_unfinished_episodes(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    with simgym.TrajectoryWriter(out) as writer:
        env = shell(task=[{"id": "a", "instruction": "A"}, {"id": "b", "instruction": "B"}])
        env.writer = writer
        assert env.reset(options={"task_id": "b"})[1]["instruction"] == "B"
        env.step("ls")
        _, info = env.reset(options={"task": "my own task"})  # the running one is written
        assert info["instruction"] == "my own task" and info["task_id"] not in ("a", "b")
        # a served task named by its text (or id) is that task, not a new one
        assert env.reset(options={"task": "A"})[1]["task_id"] == "a"
        assert env.reset(options={"task": "b"})[1]["task_id"] == "b"
        with pytest.raises(simgym.SimgymError, match="not both"):
            env.reset(options={"task": "A", "task_id": "a"})
        with pytest.raises(simgym.SimgymError, match="unknown reset option"):
            env.reset(options={"colour": "red"})
        with pytest.raises(simgym.SimgymError, match="unknown task_id"):
            env.reset(options={"task_id": "zzz"})
        env.step("pwd")
        env.close()
        env.close()  # a second close is harmless
    first, *_, last = simgym.read_trajectories(out)
    assert first.task.id == "b" and first.error == "reset before the episode ended"
    assert last.truncated and last.error == "environment closed before the episode ended"


def test_registration_and_rendering() -> None:
    ids = register_envs()
    assert {"simgym/Terminal-v0", "simgym/MCP-v0", "simgym/SWE-v0"} <= set(ids)
    assert register_envs() == ids  # registering again changes nothing
    env = gymnasium.make(
        "simgym/Terminal-v0",
        world_model=simgym.FunctionWorldModel(shell_world),
        render_mode="ansi",
        max_turns=3,
    )
    assert env.spec is not None and env.spec.id == "simgym/Terminal-v0"
    obs, _ = env.reset(seed=1)
    assert env.render() == obs
    obs, *_ = env.step("echo hi")
    assert env.render() == obs and "ran echo hi as dev" in obs
    env.close()


def test_text_outside_the_space_is_flagged_not_altered() -> None:
    def emoji(messages: list[dict[str, str]]) -> str:
        return "<predicted_observation>\ndev@devbox:~$ echo 🙂\n🙂\ndev@devbox:~$ \n</predicted_observation>"

    env = SimgymTextEnv("terminal", simgym.FunctionWorldModel(emoji))
    env.reset()
    obs, _, _, _, info = env.step("echo 🙂")
    assert "🙂" in obs and "🙂" not in TEXT_CHARSET
    assert info["outside_observation_space"] is True
    assert "─" in TEXT_CHARSET and "é" in TEXT_CHARSET and "\n" in TEXT_CHARSET
    env.close()
