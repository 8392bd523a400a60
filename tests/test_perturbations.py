"""Perturbations (fault injection) and curricula: templates in each domain's format,
control instructions that reach the world model, seeded schedules that repeat on rerun."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

import simgym
from simgym import Action, FunctionWorldModel
from simgym.core import contract
from simgym.perturb.curriculum import (
    TIERS,
    Curriculum,
    difficulty,
    env_perturbations,
    perturbations_for_level,
)
from simgym.perturb.faults import FAULT_KINDS, Fault, control_instruction
from simgym.perturb.plan import PerturbationError, Perturbations, load_perturbations

ERROR_KINDS = {
    "auth_failure",
    "permission_denied",
    "timeout",
    "rate_limit",
    "server_error",
    "stale_data",
    "flaky_network",
}

MCP_SCENARIO = {
    "server_name": "crm",
    "tools": [
        {
            "name": "search_customers",
            "description": "Find customers.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
        {
            "name": "tag_customers",
            "description": "Tag several customers at once.",
            "parameters": {
                "type": "object",
                "properties": {"ids": {"type": "array", "items": {"type": "string"}}},
                "required": ["ids"],
            },
        },
    ],
    "state": {"customers": [{"id": "C-1", "name": "Ana"}]},
}


class Recorder:
    """A deterministic world model that keeps every request it was sent."""

    def __init__(self, reply: str = "") -> None:
        self.requests: list[list[dict]] = []
        self.reply = reply

    def __call__(self, messages):
        self.requests.append(messages)
        if self.reply:
            return self.reply
        # a plausible observation for any domain: echo for the terminal, JSON otherwise
        return '{"ok": true}'


def terminal_world(messages):
    action = json.loads(contract.action_text_of(messages[-1]["content"]))
    typed = "".join(k["keystrokes"] for k in action).strip()
    return f"dev@devbox:~$ {typed}\nout:{typed}\ndev@devbox:~$ "


def env_for(domain: str, plan, fn=None, **kw):
    return simgym.make(
        domain, world_model=FunctionWorldModel(fn or Recorder()), perturbations=plan, **kw
    )


async def one_step(domain, kind, action, *, mode="template", scenario=None, fn=None, **params):
    plan = {"seed": 1, "rules": [{"fault": kind, "mode": mode, "params": params}]}
    env = env_for(domain, load_perturbations(plan), fn=fn, scenario=scenario, seed=5)
    await env.reset("do the task")
    result = await env.step(action)
    return env, result, env.trajectory.turns[-1]


# -- templates: every fault kind in mcp, search and terminal ---------------------------------


@pytest.mark.parametrize("kind", FAULT_KINDS)
@pytest.mark.parametrize("output_format", ["json", "mcp", "text"])
async def test_mcp_templates_use_the_servers_output_format(kind, output_format):
    recorder = Recorder()
    scenario = {**MCP_SCENARIO, "output_format": output_format}
    action = {"name": "search_customers", "arguments": {"query": "ana"}}
    env, result, turn = await one_step("mcp", kind, action, scenario=scenario, fn=recorder)
    text = result.observation.text
    assert recorder.requests == []  # written by simgym, no world-model call
    assert turn.perturbation["fault"] == kind and turn.perturbation["mode"] == "template"
    assert turn.latency_s == 0 and turn.in_history and turn.error is None
    assert env.domain.check_observation(text, turn.action, env.scenario) == []
    if output_format == "json":
        value = json.loads(text)
        assert ("error" in value) == (kind in ERROR_KINDS), value
        if kind in ERROR_KINDS:
            assert isinstance(value["error"]["code"], int) and value["error"]["message"]
        if kind == "rate_limit":
            assert value["error"]["code"] == 429
            assert value["error"]["data"]["retry_after"] == turn.perturbation["retry_after"]
        if kind in ("pagination", "empty_results"):
            assert value["customers"] == []  # named after the server's own collection
        if kind == "pagination":
            assert value["has_more"] is True and value["next_cursor"]
    elif output_format == "mcp":
        envelope = json.loads(text)
        assert envelope["isError"] is (kind in ERROR_KINDS)
        assert envelope["content"][0]["type"] == "text" and envelope["content"][0]["text"]
    else:
        assert text.strip()
        assert text.startswith("Error") == (kind in ERROR_KINDS)


async def test_mcp_partial_batch_fails_some_items_of_a_list_argument():
    action = {"name": "tag_customers", "arguments": {"ids": ["C-1", "C-2", "C-3", "C-4"]}}
    _, result, _ = await one_step("mcp", "partial_batch", action, scenario=MCP_SCENARIO)
    value = json.loads(result.observation.text)
    assert value["status"] == "partial_failure"
    assert [r["item"] for r in value["results"]] == ["C-1", "C-2", "C-3", "C-4"]
    assert 0 < value["failed"] < 4 and value["succeeded"] + value["failed"] == 4
    assert sum(1 for r in value["results"] if not r["ok"]) == value["failed"]


SEARCH_ACTIONS = {
    "web_search": {
        "name": "web_search",
        "arguments": {"queries": ["python 3.13 release", "zebra migration"]},
    },
    "web_extractor": {
        "name": "web_extractor",
        "arguments": {"url": "https://www.python.org/downloads/release/python-3130/"},
    },
}


@pytest.mark.parametrize("kind", FAULT_KINDS)
@pytest.mark.parametrize("tool", sorted(SEARCH_ACTIONS))
async def test_search_templates_are_valid_result_pages(kind, tool):
    recorder = Recorder()
    env, result, turn = await one_step("search", kind, SEARCH_ACTIONS[tool], fn=recorder)
    text = result.observation.text
    assert recorder.requests == []
    assert env.domain.check_observation(text, turn.action, env.scenario) == []
    if kind in ERROR_KINDS - {"stale_data"}:
        assert text.startswith("Error: ")
    if kind == "empty_results" and tool == "web_search":
        assert text.count("No results found for") == 2 and "URL:" not in text
    if kind == "partial_batch" and tool == "web_search":
        # two queries: one fails, the other gets the scenario's matching page
        assert text.count("## Results for") == 2 and "Error: " in text
    if kind == "stale_data" and tool == "web_search":
        assert "Cached copy" in text and "Date: 2024-10-07" not in text
    if tool == "web_extractor" and kind not in ERROR_KINDS - {"stale_data"}:
        assert text.startswith("# ")


@pytest.mark.parametrize("kind", FAULT_KINDS)
async def test_terminal_templates_echo_the_command_and_end_like_a_terminal(kind):
    recorder = Recorder()
    env, result, turn = await one_step("terminal", kind, "cat notes.txt todo.txt", fn=recorder)
    lines = result.observation.text.splitlines()
    assert recorder.requests == []
    assert lines[0] == "dev@devbox:~$ cat notes.txt todo.txt"
    problems = env.domain.check_observation(result.observation.text, turn.action, env.scenario)
    if kind == "slow_load":
        # the command is still running: no prompt yet, exactly what a terminal shows
        assert lines == ["dev@devbox:~$ cat notes.txt todo.txt"]
        assert problems == ["the screen does not end with a shell or program prompt"]
        return
    assert problems == []
    if kind == "pagination":
        assert lines[-1] == "--More--"
    elif kind == "ui_dialog":
        assert lines[-1].endswith("[y/N]")
    else:
        assert lines[-1] == "dev@devbox:~$"
    if kind == "permission_denied":
        assert lines[1] == "cat: notes.txt: Permission denied"  # as GNU cat says it
    if kind == "empty_results":
        assert len(lines) == 2


@pytest.mark.parametrize(
    "command",
    [
        "cat missing.txt",
        "ls missing",
        "rm missing.txt",
        "mkdir gone/dir",
        "touch gone/file",
        "cp missing.txt copy.txt",
        "mv missing.txt other.txt",
        "cd missing",
        "echo hi > gone/a.txt",
        "head -n 3 missing.txt",
        "tail missing.txt",
        "wc -l missing.txt",
        "grep todo missing.txt",
        "sort missing.txt",
    ],
)
def test_a_local_programs_fault_is_worded_as_the_real_program_words_its_errors(command, tmp_path):
    """The fault lines of local programs have the form the real program gives a system
    error, checked with the one error a real shell gives on demand (a missing file)."""
    import subprocess

    from simgym.perturb.renderers.shell import _local_line, _words

    environ = {"PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8"}  # the simulated machine's
    real = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=environ, capture_output=True, text=True
    )
    words = _words(command)
    args = [w for w in words[1:] if not w.startswith("-") and not w.startswith(">")]
    ours = _local_line(words[0], args, command, "No such file or directory")
    # bash names itself "bash: line 1:" when it runs a -c string, "bash:" at a prompt
    assert real.stderr.strip().replace("bash: line 1: ", "bash: ") == ours


@pytest.mark.parametrize("kind", ["timeout", "rate_limit", "server_error", "flaky_network"])
async def test_network_and_local_programs_fail_differently(kind):
    _, local, _ = await one_step("terminal", kind, "cat notes.txt")
    _, remote, _ = await one_step("terminal", kind, "curl https://api.example.com/x")
    assert "HTTP" not in local.observation.text and "error:" not in local.observation.text
    assert local.observation.text.splitlines()[1].startswith("cat: notes.txt: ")
    assert remote.observation.text.splitlines()[1].startswith("curl: error: ")


async def test_terminal_template_keeps_the_current_prompt_and_script_permission_error():
    def world(messages):
        return "dev@devbox:~$ cd /tmp\ndev@devbox:/tmp$ "

    plan = load_perturbations({"fault": "permission_denied", "turns": [2]})
    env = env_for("terminal", plan, fn=world)
    await env.reset()
    await env.step("cd /tmp")  # the world now shows a prompt in /tmp; the fault keeps it
    result = await env.step("./deploy.sh")
    assert result.observation.text == (
        "dev@devbox:/tmp$ ./deploy.sh\nbash: ./deploy.sh: Permission denied\ndev@devbox:/tmp$"
    )


@pytest.mark.parametrize("domain", ["swe", "web", "os", "android"])
async def test_templates_in_the_other_domains_pass_their_format_checks(domain):
    action = {
        "swe": {"name": "bash", "arguments": {"command": "ls src"}},
        "web": "click('10')",
        "os": "pyautogui.click(10, 20)",
        "android": "tap('4')",
    }[domain]
    for kind in FAULT_KINDS:
        env, result, turn = await one_step(domain, kind, action)
        problems = env.domain.check_observation(result.observation.text, turn.action, env.scenario)
        assert problems == [], (kind, result.observation.text)


async def test_ui_dialog_sits_on_top_of_the_current_screen():
    env, result, _ = await one_step(
        "web", "ui_dialog", "click('10')", title="Newsletter", text="Sign up?", buttons=["No"]
    )
    text = result.observation.text
    assert "[10] button 'Checkout'" in text  # the page is still there, under the dialog
    tail = text.splitlines()[-3:]
    assert tail[0].strip().endswith("dialog 'Newsletter' modal focused")
    assert tail[1].strip() == "StaticText 'Sign up?'" and tail[2].strip().endswith("'No'")


# -- control mode: the instruction reaches the world model -----------------------------------


@pytest.mark.parametrize("kind", FAULT_KINDS)
@pytest.mark.parametrize(
    ("domain", "action"),
    [
        ("mcp", {"name": "search_customers", "arguments": {"query": "ana"}}),
        ("search", SEARCH_ACTIONS["web_search"]),
        ("terminal", "ls -la"),
    ],
)
async def test_control_mode_sends_the_instruction_to_the_world_model(kind, domain, action):
    recorder = Recorder()
    scenario = MCP_SCENARIO if domain == "mcp" else None
    env, result, turn = await one_step(
        domain, kind, action, mode="control", fn=recorder, scenario=scenario
    )
    assert len(recorder.requests) >= 1
    last_user = recorder.requests[0][-1]["content"]
    expected = control_instruction(kind, {k: v for k, v in turn.perturbation.items()})
    assert f"{contract.ACTION_HEADER}" in last_user
    assert f"**Control instruction:** {expected}" in last_user
    assert turn.control == expected
    assert turn.perturbation["fault"] == kind and turn.perturbation["mode"] == "control"
    # the agent sees only the world model's observation, never the label
    assert result.observation.metadata == {} and "perturbation" not in json.dumps(result.info)


async def test_control_fault_is_merged_with_the_callers_control():
    recorder = Recorder()
    env = env_for(
        "mcp", load_perturbations({"fault": "rate_limit", "mode": "control"}), fn=recorder
    )
    await env.reset()
    await env.step(
        {"name": "get_customer", "arguments": {"customer_id": "C-1001"}}, control="Be terse."
    )
    turn = env.trajectory.turns[0]
    assert turn.control.startswith("Be terse.\n") and "429" in turn.control
    assert turn.control in recorder.requests[0][-1]["content"]


async def test_a_custom_instruction_replaces_the_default():
    recorder = Recorder()
    plan = {"fault": "server_error", "mode": "control", "params": {"instruction": "Say 418."}}
    await one_step(
        "terminal", "server_error", "ls", mode="control", fn=recorder, instruction="Say 418."
    )
    assert "**Control instruction:** Say 418." in recorder.requests[0][-1]["content"]
    assert load_perturbations(plan).rules[0].params == {"instruction": "Say 418."}


# -- history, recording, what is left alone ----------------------------------------------------


async def test_a_templated_fault_joins_the_history_the_world_model_sees_next():
    recorder = Recorder()
    plan = load_perturbations({"fault": "timeout", "turns": [1], "params": {"seconds": 30}})
    env = env_for("mcp", plan, fn=recorder)
    await env.reset("find ana")
    first = await env.step({"name": "search_customers", "arguments": {"query": "ana"}})
    assert recorder.requests == []
    await env.step({"name": "search_customers", "arguments": {"query": "ana"}})
    sent = recorder.requests[0]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"].startswith("### Turn 1\n\n**Task:** find ana")
    assert sent[2]["content"] == contract.assistant_message(first.observation.text)["content"]
    assert "timed out after 30 seconds" in sent[2]["content"]
    assert env.trajectory.turns[1].perturbation is None


async def test_faults_are_recorded_in_the_written_trajectory(tmp_path):
    out = tmp_path / "t.jsonl"
    plan = load_perturbations({"fault": "empty_results", "turns": [2]})
    env = env_for("terminal", plan, fn=terminal_world, writer=simgym.TrajectoryWriter(out))
    await env.reset()
    for command in ("ls", "find / -name x", "pwd"):
        await env.step(command)
    await env.close(reason=None)
    saved = next(simgym.read_trajectories(out))
    assert [t.perturbation and t.perturbation["fault"] for t in saved.turns] == [
        None,
        "empty_results",
        None,
    ]
    assert saved.turns[1].perturbation == {
        "fault": "empty_results",
        "mode": "template",
        "rule": "rule1",
    }
    assert saved.metrics["perturbed"] == 1 and saved.metrics["errors"] == 0


async def test_invalid_and_final_actions_are_never_perturbed():
    plan = load_perturbations({"fault": "server_error"})
    env = env_for("mcp", plan)
    await env.reset()
    bad = await env.step({"name": "no_such_tool", "arguments": {}})
    assert bad.observation.kind == "error" and env.trajectory.turns[0].perturbation is None
    done = await env.step("The answer is 4.")
    assert done.done and env.trajectory.turns[1].perturbation is None
    env = env_for("terminal", plan, fn=terminal_world)
    await env.reset()
    res = await env.step("exit")
    assert res.done and env.trajectory.turns[0].perturbation is None


async def test_without_a_plan_nothing_changes():
    env = simgym.make("terminal", world_model=FunctionWorldModel(terminal_world))
    await env.reset()
    await env.step("ls")
    assert env.perturbations is None and env.trajectory.turns[0].perturbation is None


# -- schedules and seeds ------------------------------------------------------------------------


async def run_episode(plan, actions, *, seed=11, domain="terminal", fn=terminal_world):
    env = env_for(domain, plan, fn=fn, seed=seed, max_turns=100)
    await env.reset()
    for action in actions:
        await env.step(action)
    turns = env.trajectory.turns
    return [t.perturbation for t in turns], [t.observation.text for t in turns]


COMMANDS = [f"echo {i}" for i in range(30)]


async def test_a_seeded_schedule_repeats_exactly_on_rerun():
    spec = {
        "seed": 42,
        "rules": [
            {"fault": ["timeout", "rate_limit", "flaky_network"], "probability": 0.3},
            {"fault": "server_error", "mode": "control", "probability": 0.2},
        ],
    }
    first = await run_episode(load_perturbations(spec), COMMANDS)
    again = await run_episode(load_perturbations(json.loads(json.dumps(spec))), COMMANDS)
    assert first == again
    records = [r for r in first[0] if r]
    assert 5 <= len(records) <= 25  # about half the turns at these rates
    assert {r["fault"] for r in records} >= {"timeout", "rate_limit", "server_error"}
    other_plan = await run_episode(load_perturbations({**spec, "seed": 43}), COMMANDS)
    other_episode = await run_episode(load_perturbations(spec), COMMANDS, seed=12)
    assert other_plan[0] != first[0] and other_episode[0] != first[0]


async def test_concurrent_episodes_draw_independently_of_each_other():
    plan = load_perturbations({"seed": 3, "rules": [{"fault": "timeout", "probability": 0.5}]})
    alone = [await run_episode(plan, COMMANDS[:12], seed=s) for s in (1, 2, 3)]
    together = await asyncio.gather(*(run_episode(plan, COMMANDS[:12], seed=s) for s in (1, 2, 3)))
    assert list(together) == alone


async def test_without_an_env_seed_the_task_id_keeps_reruns_identical():
    plan = load_perturbations({"fault": "timeout", "probability": 0.5})

    async def run():
        env = env_for("terminal", plan, fn=terminal_world, max_turns=100)
        await env.reset({"id": "task-fixed", "instruction": "x"})
        for command in COMMANDS:
            await env.step(command)
        return [bool(t.perturbation) for t in env.trajectory.turns]

    first = await run()
    assert first == await run() and 0 < sum(first) < len(first)


async def test_turns_schedule():
    records, _ = await run_episode(
        load_perturbations({"fault": "timeout", "turns": [2, 4]}), COMMANDS[:5]
    )
    assert [bool(r) for r in records] == [False, True, False, True, False]


async def test_every_kth_call_counts_only_the_filtered_tools():
    plan = load_perturbations({"fault": "rate_limit", "every": 2, "tools": ["curl"]})
    actions = ["curl a", "ls", "curl b", "curl c", "ls", "curl d"]
    records, _ = await run_episode(plan, actions)
    assert [bool(r) for r in records] == [False, False, True, False, False, True]


async def test_after_successes_strikes_after_n_good_calls_then_counts_again():
    plan = load_perturbations({"fault": "auth_failure", "after_successes": 2})
    records, _ = await run_episode(plan, COMMANDS[:7])
    assert [bool(r) for r in records] == [False, False, True, False, False, True, False]
    capped = load_perturbations(
        {"fault": "auth_failure", "after_successes": 2, "max_per_episode": 1}
    )
    records, _ = await run_episode(capped, COMMANDS[:7])
    assert [bool(r) for r in records] == [False, False, True, False, False, False, False]


async def test_domain_filter_and_rule_order():
    plan = load_perturbations(
        [
            {"fault": "timeout", "domains": ["mcp"], "name": "mcp-timeouts"},
            {"fault": "empty_results", "turns": [1], "name": "first"},
        ]
    )
    records, _ = await run_episode(plan, ["ls", "ls"])
    assert records[0]["rule"] == "first" and records[1] is None


async def test_probability_zero_never_strikes_and_one_always_does():
    never = await run_episode(
        load_perturbations({"fault": "timeout", "probability": 0.0}), COMMANDS
    )
    always = await run_episode(load_perturbations({"fault": "timeout"}), COMMANDS[:5])
    assert not any(never[0]) and all(always[0])


async def test_fixed_params_override_the_drawn_ones():
    _, result, turn = await one_step(
        "search", "rate_limit", SEARCH_ACTIONS["web_search"], retry_after=7
    )
    assert turn.perturbation["retry_after"] == 7
    assert result.observation.text == "Error: 429 Too Many Requests: retry after 7 seconds"


async def test_make_passes_the_plan_to_the_environment():
    plan = load_perturbations({"fault": "timeout"})
    env = simgym.make(
        "terminal", world_model=FunctionWorldModel(terminal_world), perturbations=plan
    )
    assert env.perturbations is plan


def test_a_domain_without_templates_falls_back_to_control_and_says_so():
    plan = load_perturbations({"fault": "timeout"})
    fault = plan.decide(
        domain="my-domain",
        scenario=None,
        turn_index=1,
        action=Action.tool_call("x"),
        history=[],
        episode=1,
    )
    assert isinstance(fault, Fault) and fault.mode == "control"
    assert "no timeout template" in fault.record()["note"]


# -- loading specs --------------------------------------------------------------------------------


def test_specs_load_from_yaml_json_lists_and_single_rules(tmp_path):
    yaml_file = tmp_path / "faults.yaml"
    yaml_file.write_text("seed: 9\nrules:\n  - fault: timeout\n    probability: 0.25\n")
    json_file = tmp_path / "faults.json"
    json_file.write_text(json.dumps([{"fault": "ui_dialog", "mode": "control"}]))
    assert load_perturbations(yaml_file).seed == 9
    assert load_perturbations(str(yaml_file)).rules[0].probability == 0.25
    assert load_perturbations(json_file).rules[0].mode == "control"
    assert load_perturbations({"fault": "timeout"}).rules[0].kinds == ["timeout"]
    plan = Perturbations(rules=[])
    assert load_perturbations(plan) is plan


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"fault": "meteor_strike"}, "unknown fault 'meteor_strike'"),
        ({"fault": "timeout", "params": {"colour": 1}}, "unknown parameter 'colour'"),
        ({"fault": "timeout", "params": {"seconds": "soon"}}, "wrong type"),
        ({"fault": "noise"}, "has no template"),
        ({"fault": "timeout", "probability": 1.5}, "less than or equal to 1"),
        ({"fault": "timeout", "turns": [0]}, "count from 1"),
        ({"fault": "timeout", "every": 0}, "greater than or equal to 1"),
        ({"rules": [{"fault": "timeout"}], "sede": 1}, "sede"),
        ([{"fault": "timeout", "name": "a"}, {"fault": "timeout", "name": "a"}], "unique"),
        ("not-a-file.yaml", "not found"),
        (42, "expected a mapping"),
    ],
)
def test_bad_specs_give_clear_errors(spec, message):
    with pytest.raises(PerturbationError, match=message):
        load_perturbations(spec)


def test_malformed_yaml_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("rules: [fault: timeout\n")
    with pytest.raises(PerturbationError, match="bad.yaml"):
        load_perturbations(path)


# -- curricula --------------------------------------------------------------------------------------


def test_linear_step_and_exponential_schedules():
    linear = Curriculum(schedule="linear", start=0.0, end=0.5, steps=1000)
    assert [linear.level(s) for s in (0, 250, 500, 1000, 5000)] == [0.0, 0.125, 0.25, 0.5, 0.5]
    step = Curriculum(schedule="step", start=0.1, end=0.4, steps=100, stages=4)
    assert [step.level(s) for s in (0, 24, 25, 50, 99, 100)] == [0.1, 0.1, 0.2, 0.3, 0.4, 0.4]
    exp = Curriculum(schedule="exponential", start=0.0, end=1.0, steps=100)
    levels = [exp.level(s) for s in range(0, 101, 10)]
    assert levels[0] == 0.0 and levels[-1] == 1.0 and levels == sorted(levels)
    assert exp.level(50) < 0.5  # slow start: under the straight line (0.5 at half way)
    assert Curriculum(schedule="constant", start=0.3).level(10_000) == 0.3
    with pytest.raises(PerturbationError):
        linear.level(-1)


def test_curriculum_specs_parse_from_strings_mappings_and_files(tmp_path):
    assert Curriculum.parse("linear:0:0.5:1000") == Curriculum(start=0.0, end=0.5, steps=1000)
    assert Curriculum.parse("step:0:1:10:5").stages == 5
    path = tmp_path / "cur.yaml"
    path.write_text("schedule: exponential\nend: 0.8\nsteps: 50\n")
    assert Curriculum.parse(path).level(50) == 0.8
    assert Curriculum.parse({"schedule": "linear", "steps": 10}).level(5) == 0.5
    for bad, message in [
        ("wobbly:0:1:10", "schedule"),
        ("linear:zero:1:10", "not a number"),
        ("linear:0:2:10", "less than or equal to 1"),
        ("missing.yaml", "not found"),
    ]:
        with pytest.raises(PerturbationError, match=message):
            Curriculum.parse(bad)


def test_levels_scale_fault_rate_kinds_noise_and_depth():
    easy, hard = difficulty(0.1), difficulty(1.0)
    assert easy.kinds == TIERS[0] and set(hard.kinds) == set(FAULT_KINDS)
    assert easy.fault_rate < hard.fault_rate and easy.noise < hard.noise
    assert easy.task_depth < hard.task_depth
    assert perturbations_for_level(0.0).rules == []
    plan = perturbations_for_level(0.5, "mcp", seed=4)
    faults, noise = plan.rules
    assert faults.probability == difficulty(0.5).fault_rate and faults.domains == ["mcp"]
    assert noise.fault == "noise" and noise.mode == "control" and plan.seed == 4
    with pytest.raises(PerturbationError):
        difficulty(1.5)


async def test_a_higher_level_perturbs_more_turns():
    low = await run_episode(perturbations_for_level(0.1), COMMANDS)
    high = await run_episode(perturbations_for_level(0.9), COMMANDS)
    assert sum(map(bool, low[0])) < sum(map(bool, high[0]))


def test_env_perturbations_takes_one_source(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("rules: [{fault: timeout}]\n")
    assert env_perturbations() is None
    assert env_perturbations(perturb=path, seed=5).seed == 5
    assert (
        env_perturbations(difficulty_level=0.3).rules[0].probability == difficulty(0.3).fault_rate
    )
    at_step = env_perturbations(curriculum="linear:0:1:100", step=50)
    assert at_step.rules[0].probability == difficulty(0.5).fault_rate
    with pytest.raises(PerturbationError, match="choose one"):
        env_perturbations(perturb=path, difficulty_level=0.2)


def test_scaled_multiplies_probabilities():
    plan = load_perturbations([{"fault": "timeout", "probability": 0.4}, {"fault": "rate_limit"}])
    scaled = plan.scaled(2.0)
    assert [r.probability for r in scaled.rules] == [0.8, 1.0]
    assert [r.probability for r in plan.rules] == [0.4, 1.0]


# -- a real model ------------------------------------------------------------------------------------


async def test_control_fault_reaches_a_real_model_server(llama_server):
    wm = simgym.world_model("openai", base_url=llama_server, temperature=0.0, max_tokens=24)
    plain = simgym.make("mcp", world_model=wm, seed=1, validation_retries=0)
    plan = load_perturbations({"fault": "rate_limit", "mode": "control"})
    faulty = simgym.make("mcp", world_model=wm, seed=1, validation_retries=0, perturbations=plan)
    action = {"name": "get_customer", "arguments": {"customer_id": "C-1001"}}
    for env in (plain, faulty):
        await env.reset("look up Ana")
        await env.step(action)
    base, turn = plain.trajectory.turns[0], faulty.trajectory.turns[0]
    assert turn.error is None and turn.observation.text
    assert turn.perturbation["fault"] == "rate_limit" and "429" in turn.control
    # the server read the instruction: the same request plus it costs more prompt tokens
    assert turn.usage.prompt_tokens > base.usage.prompt_tokens + 20
    await wm.aclose()


async def test_rollouts_with_a_curriculum_plan_repeat_their_faults():
    from simgym.agents import ScriptedAgent
    from simgym.rollout.runner import arollout

    call = {"name": "search_customers", "arguments": {"query": "ana"}}
    tasks = [
        simgym.Task(id=f"t{i}", domain="mcp", instruction="find ana", scenario=MCP_SCENARIO)
        for i in range(6)
    ]
    plan = Curriculum.parse("linear:0:0.8:100").perturbations(step=100, domain="mcp", seed=2)

    async def run():
        done = await arollout(
            tasks,
            agent=ScriptedAgent([call] * 5 + [{"answer": "Ana"}]),
            world_model=FunctionWorldModel(Recorder('{"customers": []}')),
            env_options={"perturbations": plan},
            seed=9,
        )
        return {t.task.id: [turn.perturbation for turn in t.turns] for t in done}

    first = await run()
    assert first == await run()
    struck = [r for records in first.values() for r in records if r]
    assert len(struck) >= 5 and {r["rule"] for r in struck} <= {"faults", "noise"}
