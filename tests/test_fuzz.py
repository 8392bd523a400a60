"""Property-based fuzzing of every parser that reads user or agent input.

The property is the same everywhere: any input gives either a parsed value or the
parser's documented error (a :class:`SimgymError`, a JSON/YAML error, a pydantic
validation error), never another exception. Example counts are modest so the file runs
in well under a minute on a loaded two-core machine; hypothesis keeps the failing
examples it finds in its database and tries them first next time.
"""

from __future__ import annotations

import asyncio
import json
import warnings

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import simgym
from simgym.bench.data import load_rows, row_from_record
from simgym.core.errors import SimgymError
from simgym.core.safeload import MAX_DEPTH, load_yaml, loads_json
from simgym.core.trajectories import UnreadableLineWarning, read_trajectories
from simgym.core.types import Action
from simgym.rollout.scripted import load_specs
from simgym.worldmodels.function import FunctionWorldModel

FUZZ = settings(
    max_examples=60,
    deadline=None,
    # tmp_path is function-scoped but every example writes its own file name anew.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# JSON-shaped values, with the awkward corners: huge ints, NaN/inf, odd keys, nesting.
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**30, max_value=10**40)
    | st.floats()
    | st.text(max_size=30)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=15,
)


@st.composite
def hostile_text(draw: st.DrawFn) -> str:
    """Text that looks like what the parsers expect, broken in the ways people break it."""
    choice = draw(st.integers(0, 6))
    if choice == 0:
        return draw(st.text(max_size=80))
    if choice == 1:  # deep nesting, opened (and maybe closed)
        # past MAX_DEPTH, and past the interpreter's recursion limit, every time it's drawn
        depth = draw(st.sampled_from([MAX_DEPTH + 1, 1200, 5000]) | st.integers(50, 3000))
        opener = draw(st.sampled_from(["[", '{"a":']))
        closer = "]" if opener == "[" else "}"
        return opener * depth + (closer * depth if draw(st.booleans()) else "")
    if choice == 2:  # an integer past Python's 4,300-digit conversion limit
        return draw(st.sampled_from(["", "x=", '{"n": ', "get_customer id="])) + "9" * 4400
    if choice == 3:
        return draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", '{"id": NaN}']))
    if choice == 4:  # a tool name and arguments in the domains' short forms
        name = draw(st.sampled_from(["get_customer", "search", "open", "answer", "click", "run"]))
        rest = draw(st.text(alphabet="{}[]\"'=:, \\abc0123", max_size=40))
        return f"{name} {rest}"
    if choice == 5:
        return json.dumps(draw(json_values))
    return draw(st.binary(max_size=60)).decode("utf-8", errors="replace")


@pytest.mark.parametrize("name", simgym.domain_names())
def test_typed_input_of_every_domain_parses_or_is_an_action_error(name: str) -> None:
    domain = simgym.get_domain(name)
    scenario = domain.scenario(None)

    @FUZZ
    @given(hostile_text())
    def check(line: str) -> None:
        try:
            action = domain.parse_input(line, scenario)
        except SimgymError:
            return
        assert isinstance(action, Action)

    check()


@pytest.mark.parametrize("name", simgym.domain_names())
def test_agent_actions_of_every_domain_are_checked_or_refused(name: str) -> None:
    """What an agent or a file sends (any JSON value, or text) goes through the domain's
    own parse, size check and validation."""
    domain = simgym.get_domain(name)
    scenario = domain.scenario(None)

    @FUZZ
    @given(json_values | hostile_text())
    def check(raw: object) -> None:
        try:
            action = domain.coerce_action(raw, scenario, 10_000)
        except SimgymError:
            return
        assert isinstance(action, Action)
        json.dumps(action.model_dump(mode="json"), allow_nan=False)  # it can be recorded

    check()


@pytest.mark.parametrize("name", ["terminal", "mcp", "search"])
def test_an_episode_steps_through_any_action_without_raising(name: str) -> None:
    """SimEnv turns every bad action into an error turn instead of raising."""
    env = simgym.SimEnv(name, FunctionWorldModel(lambda messages: '{"content": []}')).sync()

    @settings(FUZZ, max_examples=30)
    @given(json_values | hostile_text())
    def check(raw: object) -> None:
        env.reset()  # a text action may end an episode (mcp: the final answer)
        result = env.step(raw)
        assert result.observation.text or result.done

    try:
        check()
    finally:
        env.close()


@pytest.mark.parametrize("name", simgym.domain_names())
def test_any_world_model_output_becomes_an_observation(name: str) -> None:
    """A model's text is input too: deep brackets, huge numbers, broken state updates and
    envelopes end as an observation or an error turn, never as an exception from step."""
    said: list[str] = [""]
    calls: list[int] = []

    def world(messages: object) -> str:
        calls.append(1)
        return said[0]

    options = {"state_updates": True, "grounding": "strict"}
    env = simgym.SimEnv(name, FunctionWorldModel(world), **options).sync()
    domain = simgym.get_domain(name)
    # an action each domain simulates (the mcp demonstration names a tool of another world)
    action = (
        {"name": "get_customer", "arguments": {"customer_id": "C-1"}}
        if name == "mcp"
        else domain.demonstrations[0].action
    )

    @settings(FUZZ, max_examples=30)
    @given(hostile_text(), st.sampled_from(["", "<state_update>", '{"content": [{"text": "']))
    def check(text: str, wrapper: str) -> None:
        said[0] = wrapper + text
        env.reset()
        result = env.step(action)
        assert isinstance(result.observation.text, str)

    try:
        check()
    finally:
        env.close()
    assert calls  # the outputs did reach the environment


@FUZZ
@given(hostile_text())
def test_safe_json_raises_only_decode_errors(text: str) -> None:
    try:
        value = loads_json(text)
    except json.JSONDecodeError:
        return
    json.dumps(value, allow_nan=False)  # whatever it accepts can be written back as JSON


@FUZZ
@given(hostile_text() | st.text(alphabet="&*ab:[]{}- \n!<>'\"", max_size=80))
def test_safe_yaml_raises_only_yaml_errors(text: str) -> None:
    try:
        load_yaml(text)
    except yaml.YAMLError:
        return


@FUZZ
@given(st.integers(2, 12), st.integers(2, 12))
def test_yaml_alias_expansion_is_bounded(width: int, levels: int) -> None:
    """A billion laughs of any shape either stays small or is refused."""
    lines = ['a0: &a0 ["' + "x" * 10 + '"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    try:
        data = load_yaml("\n".join(lines))
    except yaml.YAMLError as exc:
        assert "alias" in str(exc)
        return
    assert len(json.dumps(data)) < 20_000_000


def _write(tmp_path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return path


episode_keys = st.sampled_from(
    ["task", "actions", "metadata", "scenario", "domain", "id", "instruction", "answer"]
)
yaml_scalars = st.sampled_from(
    ["2024-01-01", "2024-01-01 10:00:00", "!!set {a, b}", "!!binary aGk=", ".nan", "-.inf",
     "!!omap [a: 1]", "0x1F", "1_000", "~", "yes", "!!python/name:os.system", "*undefined"]
)  # fmt: skip
episode_files = st.one_of(
    st.builds(
        lambda value, argument: (
            f"task: {{id: t, domain: mcp, metadata: {{v: {value}}}}}\n"
            f"actions: [{{name: get_customer, arguments: {{a: {argument}}}}}]\n"
        ).encode(),
        yaml_scalars,
        yaml_scalars,
    ),
    st.dictionaries(episode_keys, json_values, max_size=5).map(lambda d: json.dumps(d).encode()),
    hostile_text().map(str.encode),
    st.binary(max_size=80),
    st.builds(
        lambda task, actions: json.dumps({"task": task, "actions": actions}).encode(),
        json_values,
        json_values,
    ),
    st.builds(
        lambda meta, actions: yaml.safe_dump(
            {"task": {"id": "t", "domain": "terminal", "metadata": meta}, "actions": actions}
        ).encode(),
        json_values.filter(lambda v: v == v),  # NaN != NaN breaks nothing, but dumps oddly
        st.lists(json_values, max_size=3),
    ),
)


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".jsonl"])
def test_episode_files_load_or_are_one_clear_error(tmp_path, suffix: str) -> None:
    counter = iter(range(10**6))

    @FUZZ
    @given(episode_files)
    def check(content: bytes) -> None:
        path = _write(tmp_path, f"e{next(counter)}{suffix}", content)
        try:
            specs = load_specs([path], domain="terminal")
        except SimgymError as exc:
            assert "\n" not in str(exc).strip()  # one line on stderr
            return
        for spec in specs:
            assert isinstance(spec.actions, list)
            spec.task.model_dump_json()  # the task can go into a trajectory line
            json.dumps(spec.actions, allow_nan=False)  # and the actions into prompts

    check()


bench_records = st.fixed_dictionaries(
    {"task": st.sampled_from(["mcp", "agentworld/terminal"]) | json_values, "id": json_values},
    optional={
        "turn_idx": json_values | st.integers(-3, 5),
        "total_turns": json_values,
        "prompt": json_values | st.lists(st.text(max_size=20), max_size=3),
        "response": json_values | st.lists(st.text(max_size=20), max_size=3),
        "current_prompt": json_values,
        "system_str": json_values,
    },
)


@FUZZ
@given(bench_records)
def test_bench_rows_validate_or_name_the_problem(record: dict) -> None:
    try:
        row = row_from_record(record, "rows.jsonl:1")
    except SimgymError as exc:
        assert str(exc).startswith("rows.jsonl:1")
        return
    json.dumps(row.sample(), allow_nan=False)  # results embed the row: it must be JSON


def test_bench_files_load_or_are_one_clear_error(tmp_path) -> None:
    counter = iter(range(10**6))

    @FUZZ
    @given(st.lists(hostile_text().map(str.encode) | st.binary(max_size=40), max_size=4))
    def check(lines: list[bytes]) -> None:
        path = _write(tmp_path, f"b{next(counter)}.jsonl", b"\n".join(lines))
        try:
            load_rows(path)
        except SimgymError as exc:
            assert str(path) in str(exc)

    check()


def test_trajectory_files_yield_trajectories_or_skip_lines(tmp_path) -> None:
    counter = iter(range(10**6))
    good = simgym.Trajectory(task=simgym.Task(id="t", domain="terminal"), domain="terminal")

    @FUZZ
    @given(st.lists(hostile_text().map(str.encode) | st.binary(max_size=40), max_size=4))
    def check(lines: list[bytes]) -> None:
        content = b"\n".join([*lines, good.model_dump_json().encode()])
        path = _write(tmp_path, f"t{next(counter)}.jsonl", content)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreadableLineWarning)
            read = list(read_trajectories(path))
        assert read and read[-1].task.id == "t"

    check()


def test_experience_lines_are_read_or_counted_as_malformed() -> None:
    from simgym.experience.sources import IndexReport, read_line

    @FUZZ
    @given(hostile_text().map(str.encode) | st.binary(max_size=60))
    @example(b'{"turns": ' + b"9" * 5000 + b"}")
    def check(raw: bytes) -> None:
        report = IndexReport()
        transitions = list(read_line(raw, "x.jsonl:1", report))
        assert transitions or report.malformed == 1 or report.skipped  # counted, not lost

    check()


def test_sft_files_read_or_name_the_bad_line(tmp_path) -> None:
    from simgym.train.sft_data import read_records

    counter = iter(range(10**6))

    @FUZZ
    @given(st.lists(hostile_text().map(str.encode) | st.binary(max_size=40), max_size=3))
    @example([b'{"messages": ' + b"9" * 5000 + b"}"])
    def check(lines: list[bytes]) -> None:
        path = _write(tmp_path, f"s{next(counter)}.jsonl", b"\n".join(lines))
        try:
            list(read_records(path))
        except SimgymError as exc:
            assert str(exc).startswith(f"{path}:")

    check()


def _openenv():
    pytest.importorskip("openenv")
    from simgym.integrations import openenv_server

    return openenv_server


openenv_messages = st.dictionaries(
    st.sampled_from(["name", "arguments", "text", "keystrokes", "answer", "type", "other"]),
    json_values | hostile_text(),
    max_size=3,
)


def test_openenv_actions_validate_or_are_validation_errors() -> None:
    """An OpenEnv step body becomes a SimgymAction or a pydantic validation error, and a
    text action becomes the domain's action or an ActionError."""
    server = _openenv()
    from pydantic import ValidationError

    scenario = simgym.get_domain("mcp").scenario(None)

    @FUZZ
    @given(openenv_messages)
    def check(message: dict) -> None:
        try:
            action = server.SimgymAction.of(message)
        except ValidationError:
            return
        if action.text is not None:
            try:
                server._read_text(simgym.get_domain("mcp"), scenario, action.text)
            except SimgymError:
                pass

    check()


def test_mcp_tool_calls_answer_as_tool_results() -> None:
    """What an MCP client sends after JSON-RPC decoding (a tool name and an arguments
    object), answered with whatever the model writes, always comes back as a tool result:
    an error result for a bad call, never an exception or a crash of simgym itself."""
    pytest.importorskip("mcp")
    from simgym.integrations.mcp_server import SimMCPServer, World

    said = ['{"content": [{"type": "text", "text": "{}"}]}']
    facade = SimMCPServer("mcp", FunctionWorldModel(lambda messages: said[0]))
    names = st.sampled_from(["get_customer", "search_customers", "submit_answer"]) | st.text(
        max_size=20
    )

    async def call_all(calls: list[tuple[str, dict]]) -> list:
        world = World(facade, "fuzz", {})
        await world.start()
        return [await world.call(name, arguments) for name, arguments in calls]

    @settings(FUZZ, max_examples=25)
    @given(
        st.lists(
            st.tuples(names, st.dictionaries(st.text(max_size=8), json_values, max_size=3)),
            min_size=1,
            max_size=3,
        ),
        st.just(said[0]) | hostile_text(),
    )
    @example(calls=[("get_customer", {"customer_id": "C-1"})], output="[" * 5000)
    def check(calls: list[tuple[str, dict]], output: str) -> None:
        said[0] = output
        for result in asyncio.run(call_all(calls)):
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert "simgym failed" not in text, text

    check()


def test_gymnasium_actions_are_read_or_refused() -> None:
    """An agent's action in the Gymnasium env: an answer, an action for SimEnv (which
    reports its problems as an error turn), or an ActionError."""
    pytest.importorskip("gymnasium")
    from simgym.integrations.gymnasium_env import _read_action

    domain = simgym.get_domain("mcp")
    scenario = domain.scenario(None)

    @FUZZ
    @given(hostile_text() | json_values)
    @example("[" * 5000)
    def check(action: object) -> None:
        try:
            _read_action(domain, scenario, action)
        except SimgymError:
            pass

    check()


def test_depth_limit_is_what_the_parsers_enforce() -> None:
    assert loads_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(json.JSONDecodeError, match="nested deeper"):
        loads_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


# -- log files and the world folders built from them (issue 43) -----------------------------

LOG_ROW = {
    "session": "s1",
    "time": "2025-03-03T08:00:00Z",
    "operation": "GET /customers/{customer_id}",
    "method": "GET",
    "path": "/customers/C-1",
    "request": {"customer_id": "C-1"},
    "response": {"id": "C-1", "name": "Ada Meyer", "email": "ada@bank.test"},
    "status": 200,
}
LOG_SUFFIXES = {
    "jsonl": ".jsonl",
    "csv": ".csv",
    "otlp": ".jsonl",
    "mcp": ".jsonl",
    "trajectories": ".jsonl",
    "har": ".har",
    "ocel": ".json",
    "xes": ".xes",
}
log_contents = st.one_of(
    hostile_text().map(str.encode),
    st.binary(max_size=120),
    st.lists(json_values, max_size=4).map(
        lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode()
    ),
    st.dictionaries(st.sampled_from(list(LOG_ROW)), json_values, max_size=8).map(
        lambda row: (json.dumps({**LOG_ROW, **row}) + "\n").encode()
    ),
    json_values.map(lambda v: json.dumps({"log": {"entries": [v]}, "events": [v]}).encode()),
    st.text(alphabet="<>/=\"' &;!abcDOCTYPE[]ENTITY", max_size=120).map(
        lambda t: f'<?xml version="1.0"?><log><trace>{t}</trace></log>'.encode()
    ),
)


@pytest.mark.parametrize("fmt", sorted(LOG_SUFFIXES))
def test_log_files_give_records_skips_or_one_clear_error(tmp_path, fmt: str) -> None:
    """Any bytes, read as any log format: records, counted skips, or a SimgymError naming
    the file; never another exception."""
    from simgym.logs import ImportReport, read_logs

    counter = iter(range(10**6))

    @settings(FUZZ, max_examples=40)
    @given(log_contents)
    def check(content: bytes) -> None:
        path = _write(tmp_path, f"log{next(counter)}{LOG_SUFFIXES[fmt]}", content)
        report = ImportReport()
        try:
            records = list(read_logs([path], report, format=fmt))
        except SimgymError:
            return
        assert len(records) == report.records

    check()


@pytest.fixture(scope="module")
def built_world(tmp_path_factory):
    from simgym.logs import ImportReport, build_world, read_logs

    base = tmp_path_factory.mktemp("world")
    log = base / "calls.jsonl"
    rows = []
    for i in range(6):
        rows.append({**LOG_ROW, "session": f"s{i}", "path": f"/customers/C-{i}"})
        rows.append(
            {
                **LOG_ROW,
                "session": f"s{i}",
                "operation": "POST /customers/{customer_id}/notes",
                "method": "POST",
                "path": f"/customers/C-{i}/notes",
                "request": {"customer_id": f"C-{i}", "text": "hello"},
                "response": {"id": f"N-{i}", "customer_id": f"C-{i}", "text": "hello"},
                "status": 201,
            }
        )
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = ImportReport()
    build_world(read_logs([log], report), base / "w", report=report)
    return base / "w"


def _mutate(value, path: list[int], replacement):
    """``value`` with the node reached by following ``path`` (indexes into the children
    of each dict or list, taken modulo their number) replaced."""
    if not path or not isinstance(value, dict | list) or not value:
        return replacement
    keys = list(value) if isinstance(value, dict) else list(range(len(value)))
    key = keys[path[0] % len(keys)]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[key] = _mutate(value[key], path[1:], replacement)
    return copy


def test_world_folders_load_or_are_one_clear_error(tmp_path, built_world) -> None:
    """A world folder whose files were edited by hand (any file replaced by hostile text,
    or one value anywhere in it replaced by any JSON value) gives an mcp scenario or a
    SimgymError naming the problem, never another exception."""
    import shutil

    from simgym.logs.twin import world_scenario

    names = sorted(p.name for p in built_world.iterdir() if p.is_file())
    assert "interface.json" in names
    counter = iter(range(10**6))

    @settings(FUZZ, max_examples=80)
    @given(
        st.sampled_from(names),
        st.lists(st.integers(0, 50), max_size=6),
        json_values | hostile_text(),
        st.booleans(),
    )
    def check(name: str, path: list[int], replacement, whole: bool) -> None:
        world = tmp_path / f"w{next(counter)}"
        shutil.copytree(built_world, world)
        target = world / name
        if whole or not name.endswith(".json"):
            text = replacement if isinstance(replacement, str) else json.dumps(replacement)
            target.write_text(text, encoding="utf-8", errors="surrogatepass")
        else:
            data = json.loads(target.read_text())
            target.write_text(json.dumps(_mutate(data, path, replacement)))
        try:
            scenario = world_scenario(world)
            simgym.get_domain("mcp").scenario(scenario)
        except SimgymError:
            return

    check()
