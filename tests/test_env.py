import json

import pytest

import simgym
from simgym import Action, EpisodeStateError, FunctionWorldModel, Task, WorldModelError
from simgym.core import contract


def echo_world(messages):
    """A tiny rules-based world: the screen shows the command and a fresh prompt."""
    action = json.loads(contract.action_text_of(messages[-1]["content"]))
    typed = "".join(k["keystrokes"] for k in action).strip()
    return f"<think>easy</think><predicted_observation>dev@devbox:~$ {typed}\nout:{typed}\ndev@devbox:~$ </predicted_observation>"


def make_env(fn=echo_world, **kw):
    return simgym.make("terminal", world_model=FunctionWorldModel(fn), **kw)


async def test_reset_and_step_build_the_contract_history():
    env = make_env()
    first = await env.reset("list files")
    assert first.kind == "initial" and first.text == "dev@devbox:~$"
    res = await env.step("ls")
    assert res.observation.text == "dev@devbox:~$ ls\nout:ls\ndev@devbox:~$"
    assert not res.done and not res.truncated
    res = await env.step(Action.keys("pwd\n"))
    msgs = env.messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant"]
    assert msgs[1]["content"].startswith("### Turn 1\n\n**Task:** list files")
    assert msgs[3]["content"].startswith("### Turn 2\n\n**Action:**")
    assert msgs[2]["content"].startswith(contract.OBSERVATION_HEADER)
    turn = env.trajectory.turns[0]
    assert (
        turn.reasoning == "easy" and turn.action_text == '[{"keystrokes": "ls\\n", "duration": 1}]'
    )


async def test_scenario_fills_system_prompt():
    env = make_env(
        scenario={
            "user": "ci",
            "hostname": "build01",
            "files": {"/home/ci/build.log": "BUILD OK\n"},
        }
    )
    await env.reset()
    system = env.messages[0]["content"]
    assert "build01" in system and "BUILD OK" in system and "$environment" not in system
    assert "ci@build01:~$" in system


async def test_user_system_prompt_file_overrides(tmp_path):
    path = tmp_path / "mine.md"
    path.write_text("My own terminal prompt for $prompt_example. $unknown_slot stays.")
    env = make_env(system_prompt_file=path)
    await env.reset()
    assert (
        env.messages[0]["content"]
        == "My own terminal prompt for dev@devbox:~$. $unknown_slot stays."
    )


async def test_turn_limit_truncates_and_writes(tmp_path):
    writer = simgym.TrajectoryWriter(tmp_path / "t.jsonl")
    env = make_env(max_turns=2, writer=writer)
    await env.reset(Task(id="t1"))
    assert not (await env.step("a")).truncated
    res = await env.step("b")
    assert res.truncated and not res.done
    with pytest.raises(EpisodeStateError):
        await env.step("c")
    saved = list(simgym.read_trajectories(tmp_path / "t.jsonl"))
    assert len(saved) == 1 and saved[0].truncated and len(saved[0].turns) == 2


async def test_exit_is_simulated_then_ends_episode():
    env = make_env()
    await env.reset()
    res = await env.step("exit")
    assert res.done and "exit" in res.observation.text


async def test_malformed_and_oversized_actions_become_error_observations():
    calls = []
    env = make_env(lambda m: calls.append(1) or echo_world(m), max_action_chars=50)
    await env.reset()
    bad = await env.step('[{"keystrokes": 5')
    assert bad.observation.kind == "error" and "does not parse" in bad.info["error"]
    big = await env.step("x" * 51)
    assert big.info["error_type"] == "action" and "too large" in big.observation.text
    assert calls == []  # the world model never saw them
    ok = await env.step("ls")
    assert ok.observation.kind == "observation"
    # the rejected turns are recorded but stay out of the model's history
    assert len(env.trajectory.turns) == 3
    assert env.messages[1]["content"].startswith("### Turn 1")


async def test_world_model_failure_ends_episode_cleanly(tmp_path):
    def broken(messages):
        raise WorldModelError("server down")

    writer = simgym.TrajectoryWriter(tmp_path / "t.jsonl")
    env = make_env(broken, writer=writer)
    await env.reset()
    res = await env.step("ls")
    assert res.truncated and res.observation.kind == "error"
    assert "server down" in res.info["error"]
    saved = next(simgym.read_trajectories(tmp_path / "t.jsonl"))
    assert saved.error == "server down"


async def test_untagged_output_falls_back_and_bad_format_is_retried():
    outputs = iter(
        [
            "",
            "<predicted_observation>no prompt here</predicted_observation>",
            "just text\ndev@devbox:~$",
        ]
    )
    env = make_env(lambda m: next(outputs), validation_retries=2)
    await env.reset()
    res = await env.step("ls")
    turn = env.trajectory.turns[-1]
    assert turn.attempts == 3 and turn.format_problems == []
    assert res.observation.text == "just text\ndev@devbox:~$"


async def test_persistent_bad_format_is_kept_and_flagged():
    env = make_env(lambda m: "### Turn 9\n**Action:** more", validation_retries=1)
    await env.reset()
    res = await env.step("ls")
    assert res.info["format_problems"]
    assert env.trajectory.turns[-1].attempts == 2


async def test_empty_output_every_time_is_an_error():
    env = make_env(lambda m: "<think>...</think>", validation_retries=1)
    await env.reset()
    res = await env.step("ls")
    assert res.observation.kind == "error" and "no observation" in res.info["error"]
    assert res.info["error_type"] == "empty_output" and not res.truncated  # the episode goes on
    assert env.trajectory.error is None and not env.trajectory.turns[-1].in_history


async def test_reset_mid_episode_writes_the_unfinished_one(tmp_path):
    writer = simgym.TrajectoryWriter(tmp_path / "t.jsonl")
    env = make_env(writer=writer)
    await env.reset(Task(id="first"))
    await env.step("ls")
    await env.reset(Task(id="second"))
    await env.close()
    saved = list(simgym.read_trajectories(tmp_path / "t.jsonl"))
    assert [t.task.id for t in saved] == ["first", "second"]
    assert saved[0].truncated and "reset" in saved[0].error


async def test_step_before_reset_raises():
    with pytest.raises(EpisodeStateError):
        await make_env().step("ls")


async def test_seeds_are_derived_per_episode():
    seen = []

    class Seeing(FunctionWorldModel):
        async def predict(self, messages, **kw):
            seen.append(kw["seed"])
            return await super().predict(messages, **kw)

    env = simgym.make("terminal", world_model=Seeing(echo_world), seed=10)
    await env.reset()
    await env.step("ls")
    await env.reset()
    await env.step("ls")
    assert seen == [10_000, 11_000]
    assert env.trajectory.seed == 11


async def test_control_instruction_reaches_model_not_agent():
    env = make_env()
    await env.reset()
    res = await env.step("ls", control="make the disk full")
    assert "make the disk full" in env.messages[-2]["content"]
    assert "disk full" not in res.observation.text
    assert env.trajectory.turns[-1].control == "make the disk full"


def test_sync_wrapper_uses_one_background_loop():
    env = make_env().sync()
    env.reset()
    r1 = env.step("ls")
    r2 = env.step("pwd")
    assert "out:ls" in r1.observation.text and "out:pwd" in r2.observation.text
    env.close()


def test_unknown_domain_is_a_clear_error():
    with pytest.raises(simgym.UnknownDomainError, match="available: .*terminal"):
        simgym.make("spaceship", world_model=FunctionWorldModel(echo_world))


def test_invalid_scenario_is_a_clear_error():
    with pytest.raises(simgym.ScenarioError, match="invalid terminal scenario"):
        simgym.make(
            "terminal", world_model=FunctionWorldModel(echo_world), scenario={"user": "two words"}
        )


async def test_replay_backend_reproduces_a_recorded_episode(tmp_path):
    path = tmp_path / "rec.jsonl"
    writer = simgym.TrajectoryWriter(path)
    env = make_env(writer=writer)
    await env.reset(Task(id="r"))
    await env.step("ls")
    await env.step("bad" * 10_000)  # rejected, not part of the model's history
    await env.step("pwd")
    await env.close()
    replay = simgym.make("terminal", world_model="replay", trajectories=path)
    await replay.reset()
    assert (await replay.step("ls")).observation.text.endswith("out:ls\ndev@devbox:~$")
    assert "out:pwd" in (await replay.step("pwd")).observation.text
    miss = await replay.step("rm -rf /")
    assert miss.truncated and "no recorded observation" in miss.info["error"]


async def test_many_concurrent_episodes_share_one_backend():
    import asyncio

    backend = FunctionWorldModel(echo_world)

    async def episode(i):
        env = simgym.make("terminal", world_model=backend)
        await env.reset(Task(id=f"e{i}"))
        for k in range(3):
            await env.step(f"echo {i}-{k}")
        return env.trajectory

    trajs = await asyncio.gather(*(episode(i) for i in range(200)))
    assert all(f"out:echo {i}-2" in t.turns[-1].observation.text for i, t in enumerate(trajs))


async def test_scenario_can_ask_for_invalid_actions_to_be_simulated():
    seen = []

    def world(messages):
        seen.append(messages[-1]["content"])
        return '<predicted_observation>{"error": {"code": -32602, "message": "Unknown tool: nuke"}}</predicted_observation>'

    scenario = {**simgym.get_domain("mcp").default_scenario(), "simulate_invalid_actions": True}
    env = simgym.make("mcp", world_model=FunctionWorldModel(world), scenario=scenario)
    await env.reset()
    res = await env.step({"name": "nuke", "arguments": {}})
    assert res.observation.kind == "observation" and "Unknown tool" in res.observation.text
    assert '"name": "nuke"' in seen[0]
    assert env.trajectory.turns[0].action is None and env.trajectory.turns[0].in_history


async def test_real_executor_hooks_wrap_each_episode():
    events = []

    class Executor(FunctionWorldModel):
        async def start_episode(self, scenario, task):
            events.append(("start", task.id, scenario.hostname))
            return "real-screen$ "

        async def end_episode(self):
            events.append(("end",))

    env = simgym.make("terminal", world_model=Executor(echo_world), max_turns=1)
    first = await env.reset(Task(id="a"))
    assert first.text == "real-screen$ "
    res = await env.step("ls")  # the turn limit ends the episode: the world is torn down
    assert res.truncated and events == [("start", "a", "devbox"), ("end",)]
    await env.reset(Task(id="b"))
    await env.close()
    assert events[-2:] == [("start", "b", "devbox"), ("end",)]


async def test_the_settle_stage_writes_the_ledger_once_per_turn_and_types_its_record():
    """A turn's changes to the hidden state (certain effects, what the observation
    showed) are staged and written to the episode's ledger once; what strict mode did is
    a typed record, kept on the turn as the same dict as ever."""
    from simgym.core.grounding import SettleRecord, StrictRecord
    from simgym.core.state import StateLedger

    class CountingLedger(StateLedger):
        def __setattr__(self, name, value):
            if name == "state":
                object.__setattr__(self, "writes", getattr(self, "writes", 0) + 1)
            object.__setattr__(self, name, value)

    def noise(messages):
        # the model's own update (a note it keeps) comes with every answer
        return (
            "<predicted_observation>\nsomething else\n</predicted_observation>\n"
            '<state_update>{"note": "seen"}</state_update>'
        )

    env = simgym.make(
        "terminal", world_model=FunctionWorldModel(noise), grounding="strict", state_updates=True
    )
    await env.reset()
    ledger = CountingLedger(env._ledger.state, env._ledger.schema)
    ledger.writes = 0
    env._ledger = ledger
    for line in ("echo hi > a.txt", "mkdir d", "pwd"):
        await env.step({"keystrokes": line + "\n"})
    # one per turn, though two turns changed the state twice (the model's update, then
    # the certain effects on the files)
    assert ledger.writes == 3
    assert env.state["files"]["/home/dev/a.txt"] == "hi\n" and env.state["note"] == "seen"
    assert all(t.state_error is None for t in env.trajectory.turns)
    turns = env.trajectory.turns
    assert turns[2].grounding["strict"]["action"] == "corrected"
    assert turns[2].grounding["strict"]["first"] == "something else"

    strict = StrictRecord("unresolved", ["p"], first="x", left=["p"], reshaped="y")
    assert strict.as_dict() == {
        "problems": ["p"],
        "first": "x",
        "action": "unresolved",
        "left": ["p"],
        "contradiction": True,
        "reshaped": "y",
    }
    assert SettleRecord(experience=["a"], reshape_error="E").notes() == {
        "experience": ["a"],
        "reshape_error": "E",
    }
