"""The swe domain: repository tool calls in, tool output out."""

import json
from pathlib import Path

import jsonschema
import pytest

import simgym
import simgym.domains.swe  # noqa: F401  (registers the domain)
from simgym import Action, ActionError, ScenarioError
from simgym.core.contract import action_text_of
from simgym.domains.swe import SWEScenario, tools
from simgym.rollout.scripted import load_specs, run_episode

SWE = simgym.get_domain("swe")
SCENARIO = SWE.scenario(None)
EXAMPLES = sorted((Path(__file__).parent.parent / "examples" / "swe").glob("*.yaml"))
PYTHON_EXAMPLE = next(p for p in EXAMPLES if p.name == "python_failing_test.yaml")


def render(raw, scenario=SCENARIO):
    return json.loads(SWE.render_action(SWE.coerce_action(raw, scenario, 16_000), scenario))


# -- tools and scenario -----------------------------------------------------------------


def test_tools_are_tool_specs_with_valid_schemas():
    specs = tools()
    assert [t.name for t in specs] == [
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "run_tests",
        "submit",
    ]
    for spec in specs:
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
        assert spec.to_openai()["function"]["name"] == spec.name


def test_scenario_normalizes_file_paths_and_checks_the_root():
    s = SWE.scenario(
        {"root": "/srv/app/", "files": {"/srv/app/src/a.py": "x", "./docs/": "", "b.txt": ""}}
    )
    assert isinstance(s, SWEScenario) and s.root == "/srv/app"
    assert list(s.files) == ["src/a.py", "docs/", "b.txt"]
    assert s.is_dir("src") and s.is_dir("docs") and not s.is_dir("b.txt")
    with pytest.raises(ScenarioError, match="outside the repository root"):
        SWE.scenario({"root": "/srv/app", "files": {"/etc/passwd": ""}})
    with pytest.raises(ScenarioError, match="escapes the repository root"):
        SWE.scenario({"files": {"../x.py": ""}})
    with pytest.raises(ScenarioError, match="absolute"):
        SWE.scenario({"root": "repo"})


def test_initial_observation_and_system_prompt():
    assert SWE.initial_observation(SCENARIO) == (
        "Repository acme/invoicing at /workspace/repo (branch main, HEAD 3f2a1c9 Add "
        "percentage discounts).\nTools: bash, read_file, write_file, edit_file, list_dir, "
        "run_tests, submit."
    )
    prompt = SWE.system_prompt(SCENARIO)
    assert "return round(amount - percent, 2)" in prompt  # hidden files reach the model
    assert "tests/test_totals.py::test_percent_discount" in prompt
    assert "runs `python -m pytest -q`" in prompt and "1 failed, 5 passed in 0.21s" in prompt
    assert "$" not in prompt  # every slot filled, demonstrations included
    go = SCENARIO.model_copy(update={"test_command": "go test ./..."})
    assert "FAIL\texample.com/core\t0.004s" in SWE.system_prompt(go)  # this runner's demo


# -- actions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, rendered",
    [
        ("git status", {"name": "bash", "arguments": {"command": "git status"}}),
        ("ls -la\n", {"name": "bash", "arguments": {"command": "ls -la"}}),
        (
            {"name": "bash", "arguments": {"command": "make", "timeout": 300}},
            {"name": "bash", "arguments": {"command": "make", "timeout": 300}},
        ),
        (
            {"name": "read_file", "arguments": {"path": "/workspace/repo/./src/../lib/a.py"}},
            {"name": "read_file", "arguments": {"path": "lib/a.py"}},
        ),
        (
            {"name": "read_file", "arguments": {"path": "a.py", "start_line": 3, "end_line": 3}},
            {"name": "read_file", "arguments": {"path": "a.py", "start_line": 3, "end_line": 3}},
        ),
        (
            {"name": "edit_file", "arguments": {"path": "a.py", "old_str": "x", "new_str": ""}},
            {"name": "edit_file", "arguments": {"path": "a.py", "old_str": "x", "new_str": ""}},
        ),
        ({"name": "list_dir", "arguments": {}}, {"name": "list_dir", "arguments": {}}),
        (
            {"function": {"name": "run_tests", "arguments": '{"target": "tests/test_a.py::t"}'}},
            {"name": "run_tests", "arguments": {"target": "tests/test_a.py::t"}},
        ),
        ({"name": "submit", "arguments": {}}, {"name": "submit", "arguments": {}}),
        # other harnesses' tool names
        (
            {"name": "execute_bash", "arguments": {"command": "pwd"}},
            {"name": "bash", "arguments": {"command": "pwd"}},
        ),
        ({"name": "finish", "arguments": {}}, {"name": "submit", "arguments": {}}),
        (
            {
                "name": "str_replace_editor",
                "arguments": {"command": "view", "path": "a.py", "view_range": [4, -1]},
            },
            {"name": "read_file", "arguments": {"path": "a.py", "start_line": 4}},
        ),
        (
            {"name": "str_replace_editor", "arguments": {"command": "view", "path": "tests"}},
            {"name": "list_dir", "arguments": {"path": "tests"}},
        ),
        (
            {
                "name": "str_replace_editor",
                "arguments": {"command": "str_replace", "path": "a.py", "old_str": "1"},
            },
            {"name": "edit_file", "arguments": {"path": "a.py", "old_str": "1", "new_str": ""}},
        ),
        (
            {
                "name": "str_replace_editor",
                "arguments": {"command": "create", "path": "n.py", "file_text": "x = 1\n"},
            },
            {"name": "write_file", "arguments": {"path": "n.py", "content": "x = 1\n"}},
        ),
    ],
)
def test_actions_render_as_json_tool_calls(raw, rendered):
    assert render(raw) == rendered


def test_rendering_is_compact_json():
    action = SWE.coerce_action("grep -n 'é' a.py", SCENARIO, 1000)
    assert SWE.render_action(action, SCENARIO) == (
        '{"name": "bash", "arguments": {"command": "grep -n \'é\' a.py"}}'
    )


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            {"name": "grep", "arguments": {}},
            "unknown tool 'grep': the repository tools are bash, read_file, write_file, "
            "edit_file, list_dir, run_tests, submit",
        ),
        (
            {"name": "read_file", "arguments": {}},
            "invalid arguments for tool 'read_file': arguments: 'path' is a required property",
        ),
        (
            {"name": "read_file", "arguments": {"path": "a.py", "start_line": "7"}},
            "start_line: '7' is not of type 'integer'",
        ),
        (
            {"name": "read_file", "arguments": {"path": "a.py", "start_line": 0}},
            "start_line: 0 is less than the minimum of 1",
        ),
        (
            {"name": "read_file", "arguments": {"path": "a.py", "start_line": 9, "end_line": 2}},
            "read_file: end_line 2 is before start_line 9",
        ),
        (
            {"name": "read_file", "arguments": {"path": "../../etc/passwd"}},
            "path '../../etc/passwd' escapes the repository root /workspace/repo",
        ),
        (
            {"name": "write_file", "arguments": {"path": "/etc/passwd", "content": "x"}},
            "path '/etc/passwd' is outside the repository root /workspace/repo",
        ),
        (
            {"name": "list_dir", "arguments": {"path": "/workspace/repository"}},
            "is outside the repository root",
        ),
        ({"name": "write_file", "arguments": {"path": "a.py"}}, "'content' is a required"),
        (
            {"name": "edit_file", "arguments": {"path": "a.py", "old_str": "", "new_str": "y"}},
            "old_str: '' should be non-empty",
        ),
        (
            {"name": "bash", "arguments": {"command": "ls", "cwd": "/"}},
            "Additional properties are not allowed ('cwd' was unexpected)",
        ),
        ({"name": "bash", "arguments": {"command": "ls", "timeout": 0}}, "timeout: 0 is less"),
        ({"name": "bash", "arguments": {"command": "  "}}, "bash: the command is blank"),
        ("   ", "bash: the command is blank"),
        ({"name": "submit", "arguments": {"patch": "x"}}, "'patch' was unexpected"),
        (
            {"name": "read_file", "arguments": {"path": "a\x00b"}},
            "path contains a NUL byte",
        ),
        ([{"keystrokes": "ls\n"}], "the swe domain takes tool calls"),
        (
            {"name": "str_replace_editor", "arguments": {"command": "insert", "path": "a.py"}},
            "command 'insert' is not supported",
        ),
    ],
)
def test_bad_actions_are_rejected_with_clear_messages(raw, message):
    with pytest.raises(ActionError) as info:
        SWE.coerce_action(raw, SCENARIO, 16_000)
    assert message in str(info.value)


def test_submit_is_final_and_nothing_else_is():
    assert SWE.is_final(Action.tool_call("submit"))
    assert not SWE.is_final(Action.tool_call("bash", {"command": "exit"}))
    assert not SWE.is_final(Action.say("done"))


@pytest.mark.parametrize(
    "line, action",
    [
        ("git log --oneline -3", Action.tool_call("bash", {"command": "git log --oneline -3"})),
        ("FOO=1 make test", Action.tool_call("bash", {"command": "FOO=1 make test"})),
        ("bash ls {a,b}", Action.tool_call("bash", {"command": "ls {a,b}"})),
        ("read_file a.py", Action.tool_call("read_file", {"path": "a.py"})),
        (
            "read_file a.py 5 8",
            Action.tool_call("read_file", {"path": "a.py", "start_line": 5, "end_line": 8}),
        ),
        (
            "read_file path=a.py start_line=5",
            Action.tool_call("read_file", {"path": "a.py", "start_line": 5}),
        ),
        (
            "edit_file path=a.py old_str='x = 1' new_str='x = 2'",
            Action.tool_call("edit_file", {"path": "a.py", "old_str": "x = 1", "new_str": "x = 2"}),
        ),
        (
            'write_file {"path": "n.txt", "content": "hi\\n"}',
            Action.tool_call("write_file", {"path": "n.txt", "content": "hi\n"}),
        ),
        ("list_dir", Action.tool_call("list_dir", {})),
        ("list_dir src", Action.tool_call("list_dir", {"path": "src"})),
        ("run_tests", Action.tool_call("run_tests", {})),
        (
            "run_tests tests/test_a.py::test_x",
            Action.tool_call("run_tests", {"target": "tests/test_a.py::test_x"}),
        ),
        ("submit", Action.tool_call("submit", {})),
        ('{"name": "list_dir", "arguments": {}}', Action.tool_call("list_dir", {})),
    ],
)
def test_play_input(line, action):
    assert SWE.parse_input(line, SCENARIO) == action


def test_play_input_errors():
    with pytest.raises(ActionError, match="needs key=value pairs or JSON"):
        SWE.parse_input("write_file notes.txt", SCENARIO)
    with pytest.raises(ActionError, match="usage: read_file PATH"):
        SWE.parse_input("read_file a.py first", SCENARIO)
    with pytest.raises(ActionError, match="cannot split the arguments"):
        SWE.parse_input("edit_file path=a.py old_str='x", SCENARIO)
    with pytest.raises(ActionError, match="not valid JSON"):
        SWE.parse_input('edit_file {"path": ', SCENARIO)


# -- observations --------------------------------------------------------------------------

BASH = Action.tool_call("bash", {"command": "ls"})
TESTS = Action.tool_call("run_tests", {})
READ = Action.tool_call("read_file", {"path": "a.py"})
READ_AT_7 = Action.tool_call("read_file", {"path": "a.py", "start_line": 7})
WRITE = Action.tool_call("write_file", {"path": "a.py", "content": "x\n"})
EDIT = Action.tool_call("edit_file", {"path": "a.py", "old_str": "x", "new_str": "y"})
LIST = Action.tool_call("list_dir", {})
SUBMIT = Action.tool_call("submit", {})

GOOD = [
    (BASH, "README.md\nsrc\ntests\n[exit code: 0]"),
    (BASH, "[exit code: 0]"),
    (BASH, "bash: line 1: rg: command not found\n[exit code: 127]\n"),
    (
        TESTS,
        "..F.   [100%]\nFAILED tests/test_a.py::test_x - assert 1 == 2\n"
        "1 failed, 3 passed in 0.04s\n[exit code: 1]",
    ),
    (
        TESTS,
        "==================== 4 passed, 1 warning in 0.12s ====================\n[exit code: 0]",
    ),
    (TESTS, "==================== 1 error in 0.08s ====================\n[exit code: 2]"),
    (
        TESTS,
        "......\n------------------------------------------------------------\n"
        "Ran 6 tests in 0.004s\n\nOK\n[exit code: 0]",
    ),
    (
        TESTS,
        "FAIL src/a.test.js\nTests:       1 failed, 13 passed, 14 total\n"
        "Snapshots:   0 total\nTime:        1.2 s\n[exit code: 1]",
    ),
    (
        TESTS,
        "--- FAIL: TestRefill (0.00s)\nFAIL\nFAIL\texample.com/svc/limiter\t0.005s\n[exit code: 1]",
    ),
    (
        TESTS,
        "panic: test timed out after 30s\n\ngoroutine 6 [sync.Mutex.Lock]:\n"
        "FAIL\texample.com/ratelimiter/limiter\t30.012s\nFAIL\n[exit code: 1]",
    ),
    (TESTS, "ok  \texample.com/svc/limiter\t(cached)\n[exit code: 0]"),
    (
        TESTS,
        "running 3 tests\n...\ntest result: ok. 3 passed; 0 failed; 0 ignored; "
        "0 measured; 0 filtered out; finished in 0.00s\n[exit code: 0]",
    ),
    (TESTS, "/usr/bin/python: No module named pytest\n[exit code: 1]"),
    (TESTS, "Running tests... killed\n[exit code: 137]"),
    (READ, "     1  import os\n     2  \n     3  print(os.getcwd())"),
    (READ, "1\timport os\n2\t"),  # cat -n style tabs are fine too
    (READ_AT_7, "     7  def slug(text):\n     8      return text"),
    (READ, "Error: file not found: a.py"),
    (READ, "(empty file)"),
    (READ, "     1  x = 1\n[... 200 more lines]"),
    (WRITE, "Created a.py (1 lines)"),
    (WRITE, "Overwrote a.py (12 lines)"),
    (WRITE, "Error: src is a directory"),
    (EDIT, "Edited a.py\n     3  def f():\n     4      return y"),
    (EDIT, "Edited src/validate.js"),
    (EDIT, "Error: old_str not found in a.py"),
    (EDIT, "Error: old_str occurs 2 times in a.py"),
    (LIST, "README.md\nsrc/\ntests/"),
    (LIST, "Error: directory not found: docs"),
    (SUBMIT, "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n[submitted]"),
    (SUBMIT, "No changes.\n[submitted]"),
]

BAD = [
    (BASH, "", "empty observation"),
    (BASH, "README.md\nsrc", "does not end with an [exit code: N] line"),
    (BASH, "<predicted_observation>\nok\n[exit code: 0]", "stray '<predicted_observation'"),
    (BASH, "<think>hmm</think>\n[exit code: 0]", "stray '<think>'"),
    (TESTS, "1 failed, 3 passed in 0.04s", "does not end with an [exit code: N] line"),
    (TESTS, "All good!\n[exit code: 0]", "no test runner summary line"),
    (TESTS, "1 failed, 3 passed in 0.04s\n[exit code: 0]", "reports failures but the exit code"),
    (READ, "import os\nprint(1)", "line not numbered: 'import os'"),
    (READ, "     1  a\n     3  c", "line numbers jump from 1 to 3"),
    (READ_AT_7, "     1  a\n     2  b", "numbering starts at 1, not at start_line 7"),
    (WRITE, "Done!", "write_file output should be"),
    (EDIT, "The file was edited.", "edit_file output should start with 'Edited PATH'"),
    (EDIT, "Edited a.py\nreturn y", "line not numbered"),
    (LIST, "src\n[exit code: 0]", "list_dir output has an [exit code] line"),
    (SUBMIT, "diff --git a/a.py b/a.py\n+y", "does not end with [submitted]"),
    (SUBMIT, "Thanks for submitting!\n[submitted]", "should show a git diff"),
]


@pytest.mark.parametrize("action, text", GOOD)
def test_well_formed_observations_pass(action, text):
    assert SWE.check_observation(text, action, SCENARIO) == []


@pytest.mark.parametrize("action, text, problem", BAD)
def test_broken_observations_are_flagged(action, text, problem):
    problems = SWE.check_observation(text, action, SCENARIO)
    assert any(problem in p for p in problems), problems


# -- episodes ------------------------------------------------------------------------------

# What a real run of python_failing_test.yaml prints, turn by turn (action -> output).
PYTHON_EPISODE = {
    "run_tests {}": """\
..F.                                                                     [100%]
=================================== FAILURES ===================================
____________________________ test_percent_discount _____________________________

    def test_percent_discount():
>       assert apply_discount(200, 10) == 180
E       assert 190 == 180
E        +  where 190 = apply_discount(200, 10)

tests/test_totals.py:14: AssertionError
=========================== short test summary info ============================
FAILED tests/test_totals.py::test_percent_discount - assert 190 == 180
1 failed, 3 passed in 0.04s
[exit code: 1]""",
    "read_file": """\
     5  def apply_discount(amount, percent):
     6      if not 0 <= percent <= 100:
     7          raise ValueError("percent must be between 0 and 100")
     8      return round(amount - percent, 2)""",
    "edit_file": """\
Edited invoicing/totals.py
     6      if not 0 <= percent <= 100:
     7          raise ValueError("percent must be between 0 and 100")
     8      return round(amount * (100 - percent) / 100, 2)""",
    "run_tests tests/test_totals.py": """\
....                                                                     [100%]
4 passed in 0.02s
[exit code: 0]""",
    "submit": """\
diff --git a/invoicing/totals.py b/invoicing/totals.py
index 4c1e2d7..b0f93a1 100644
--- a/invoicing/totals.py
+++ b/invoicing/totals.py
@@ -5,4 +5,4 @@ def subtotal(lines):
 def apply_discount(amount, percent):
     if not 0 <= percent <= 100:
         raise ValueError("percent must be between 0 and 100")
-    return round(amount - percent, 2)
+    return round(amount * (100 - percent) / 100, 2)
[submitted]""",
}


def last_call(messages) -> dict:
    return json.loads(action_text_of(messages[-1]["content"]))


def python_world(messages) -> str:
    call = last_call(messages)
    key = call["name"]
    if key == "run_tests":
        key = " ".join(["run_tests", call["arguments"].get("target", "{}")])
    return f"<predicted_observation>\n{PYTHON_EPISODE[key]}\n</predicted_observation>"


def generic_world(scenario: SWEScenario):
    """Well-formed (if unremarkable) output for any tool call in ``scenario``."""

    def numbered(lines, first=1):
        return "\n".join(f"{n:>6}  {line}" for n, line in enumerate(lines, first))

    def observe(name: str, args: dict) -> str:
        path = args.get("path", ".")
        if name == "bash":
            return "[exit code: 0]"
        if name == "run_tests":
            return "1 passed in 0.01s\n[exit code: 0]"
        if name == "read_file":
            if path not in scenario.files:
                return f"Error: file not found: {path}"
            start = args.get("start_line", 1)
            lines = scenario.files[path].splitlines()[start - 1 : args.get("end_line")]
            return numbered(lines, start) if lines else "(empty file)"
        if name == "write_file":
            verb = "Overwrote" if path in scenario.files else "Created"
            return f"{verb} {path} ({len(args['content'].splitlines())} lines)"
        if name == "edit_file":
            return f"Edited {path}\n" + numbered(args["new_str"].splitlines() or [""])
        if name == "list_dir":
            prefix = "" if path == "." else path + "/"
            names = {p[len(prefix) :].split("/")[0] for p in scenario.files if p.startswith(prefix)}
            return "\n".join(sorted(names))
        return "No changes.\n[submitted]"

    def world(messages) -> str:
        call = last_call(messages)
        text = observe(call["name"], call["arguments"])
        return f"<predicted_observation>\n{text}\n</predicted_observation>"

    return world


async def test_submit_is_simulated_and_ends_the_episode():
    seen = []

    def world(messages):
        seen.append(messages)
        return "<predicted_observation>No changes.\n[submitted]</predicted_observation>"

    env = simgym.make("swe", world_model=simgym.FunctionWorldModel(world))
    await env.reset("Fix the failing test")
    bad = await env.step({"name": "read_file", "arguments": {"path": "../secrets"}})
    assert bad.observation.kind == "error" and "escapes the repository root" in bad.observation.text
    res = await env.step({"name": "submit", "arguments": {}})
    assert res.done and res.observation.text == "No changes.\n[submitted]"
    assert len(seen) == 1  # the rejected action never reached the world model
    assert '"name": "submit"' in seen[0][-1]["content"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
async def test_examples_run_without_errors(path):
    (spec,) = load_specs([path])
    assert spec.task.domain == "swe" and 3 <= len(spec.actions) <= 5
    scenario = SWE.scenario(spec.task.scenario)
    env = simgym.make("swe", world_model=simgym.FunctionWorldModel(generic_world(scenario)))
    trajectory = await run_episode(env, spec)
    assert len(trajectory.turns) == len(spec.actions)
    for turn in trajectory.turns:
        assert turn.observation.kind == "observation", turn.observation.text
        assert turn.format_problems == [], (turn.action_text, turn.observation.text)
    ends_with_submit = trajectory.turns[-1].action.name == "submit"
    assert trajectory.done == ends_with_submit


def test_there_are_at_least_five_examples():
    assert len(EXAMPLES) >= 5


async def test_record_and_replay_round_trip(tmp_path):
    (spec,) = load_specs([PYTHON_EXAMPLE])
    path = tmp_path / "swe.jsonl"
    with simgym.TrajectoryWriter(path) as writer:
        env = simgym.make("swe", world_model=simgym.FunctionWorldModel(python_world), writer=writer)
        recorded = await run_episode(env, spec)
    assert recorded.done and all(not t.format_problems for t in recorded.turns)

    replay = simgym.make("swe", world_model="replay", trajectories=path)
    replayed = await run_episode(replay, spec)
    assert replayed.done and not replayed.error
    assert [t.observation.text for t in replayed.turns] == [
        t.observation.text for t in recorded.turns
    ]
    scenario = SWE.scenario(spec.task.scenario)
    for turn in replayed.turns:
        assert SWE.check_observation(turn.observation.text, turn.action, scenario) == []


async def test_embedded_model_simulates_two_turns():
    # One attempt per turn (no format retries): the machine is slow and content is not judged.
    # render_known: the model renders even what the state determines (a file read).
    env = simgym.make(
        "swe", world_model="local", max_tokens=40, seed=5, validation_retries=0, render_known=True
    )
    first = await env.reset("Fix the failing test")
    assert first.text.startswith("Repository acme/invoicing")
    await env.step({"name": "read_file", "arguments": {"path": "invoicing/totals.py"}})
    await env.step("git status --short")
    turns = env.trajectory.turns
    assert len(turns) == 2
    for turn in turns:
        assert turn.observation.kind == "observation" and turn.observation.text.strip()
        assert turn.usage.prompt_tokens > 100 and turn.usage.completion_tokens > 0
    assert env.trajectory.world_model["backend"] == "local"
