"""Hostile and broken input to the `simgym` command: one line and exit 2, a skipped and
counted line, or an error turn; never a traceback, a hang or a blown-up output file.

Every CLI case runs the real command in a subprocess. The world model is a replay of a
tiny recording (or a closed port for `bench infer`, which must fail before using one),
so no case waits on a model.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

import simgym
from conftest import free_port
from simgym.cli.errors import friendly_errors
from simgym.core.safeload import YAML_ALIAS_BUDGET, load_yaml
from simgym.worldmodels.function import FunctionWorldModel

ROOT = Path(__file__).resolve().parents[1]
BENCH_ROW = (ROOT / "tests" / "data" / "agentworldbench" / "mcp_test.jsonl").open().readline()


def simgym_cli(
    *args: object, stdin: bytes = b"", timeout: float = 120
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "simgym", *map(str, args)],
        input=stdin,
        capture_output=True,
        timeout=timeout,
    )
    proc.stdout = proc.stdout.decode("utf-8", errors="replace")
    proc.stderr = proc.stderr.decode("utf-8", errors="replace")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The failure message, checked to be the single `error:` line of stderr."""
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """A terminal episode recorded with a function world model: the replay backend."""
    out = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    writer = simgym.TrajectoryWriter(out)
    env = simgym.SimEnv(
        "terminal", FunctionWorldModel(lambda messages: "notes.txt\n$ "), writer=writer
    ).sync()
    env.reset(simgym.Task(id="rec", domain="terminal"))
    env.step("ls")
    env.close()
    writer.close()
    return out


def laughs(levels: int = 6) -> str:
    """A billion laughs: 9**levels copies of a string from ~300 bytes of YAML."""
    lines = ['    a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, levels):
        lines.append(f"    a{n}: &a{n} [" + ",".join([f"*a{n - 1}"] * 9) + "]")
    return "\n".join(lines)


# -- YAML aliases -----------------------------------------------------------------------


def test_run_refuses_a_billion_laughs_episode_file(tmp_path, recording):
    episode = tmp_path / "laughs.yaml"
    episode.write_text(
        "task:\n  id: t1\n  domain: terminal\n  metadata:\n" + laughs() + '\nactions: ["ls"]\n'
    )
    assert episode.stat().st_size < 400
    out = tmp_path / "out.jsonl"
    proc = simgym_cli("run", episode, "-o", out, "-w", "replay", "--replay", recording)
    assert "aliases expand beyond" in one_error_line(proc)
    assert not out.exists() or out.stat().st_size == 0


def test_scenario_and_perturbation_files_refuse_alias_bombs(tmp_path, recording):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("notes:\n" + laughs())
    proc = simgym_cli("play", "terminal", "--scenario", bomb, "-w", "replay", "--replay", recording)
    assert "aliases expand beyond" in one_error_line(proc)
    episode = tmp_path / "ok.yaml"
    episode.write_text("task: {id: ok, domain: terminal}\nactions: [ls]\n")
    proc = simgym_cli(
        "run", episode, "-o", tmp_path / "o.jsonl", "--perturb", bomb, "-w", "replay",
        "--replay", recording,
    )  # fmt: skip
    assert "aliases expand beyond" in one_error_line(proc)
    proc = simgym_cli(
        "run", episode, "-o", tmp_path / "o.jsonl", "--reward", bomb, "-w", "replay",
        "--replay", recording,
    )  # fmt: skip
    assert "aliases expand beyond" in one_error_line(proc)
    proc = simgym_cli(
        "serve", "--mcp", "-d", "terminal", "--scenario", bomb, "-o", tmp_path / "s.jsonl",
        "-w", "replay", "--replay", recording,
    )  # fmt: skip
    assert "aliases expand beyond" in one_error_line(proc)


def test_ordinary_anchors_and_merge_keys_still_load():
    data = load_yaml("base: &b {user: dev, shell: bash}\nscenario: {<<: *b, user: root}\n")
    assert data["scenario"] == {"user": "root", "shell": "bash"}
    shared = load_yaml("s: &s " + json.dumps("x" * 1000) + "\nl: [" + ", ".join(["*s"] * 100) + "]")
    assert len(shared["l"]) == 100  # 100 KB of expansion is well inside the budget
    # dates stay the text they were written as (a datetime would not survive json.dumps)
    assert load_yaml("d: 2024-01-01\nt: 2024-01-01 10:00:00") == {
        "d": "2024-01-01",
        "t": "2024-01-01 10:00:00",
    }
    with pytest.raises(yaml.YAMLError, match="recursive"):
        load_yaml("a: &a [1, *a]")
    with pytest.raises(yaml.YAMLError, match=f"{YAML_ALIAS_BUDGET:,}"):
        load_yaml("s: &s " + json.dumps("x" * 10_000) + "\nl: [" + ", ".join(["*s"] * 200) + "]")


# -- one bad episode --------------------------------------------------------------------


def test_a_null_action_fails_only_its_own_episode(tmp_path, recording):
    files = []
    for name, actions in [("bad", "[null]"), ("good1", "[ls]"), ("good2", "[ls]")]:
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"task: {{id: {name}, domain: terminal}}\nactions: {actions}\n")
        files.append(path)
    out = tmp_path / "out.jsonl"
    proc = simgym_cli("run", *files, "-o", out, "-w", "replay", "--replay", recording)
    # the run goes on, and exits 1 naming the errored episode's cause
    assert proc.returncode == 1, proc.stderr
    assert "1 of 3 episode(s) errored" in proc.stderr and "null" in proc.stderr
    episodes = {t.task.id: t for t in simgym.read_trajectories(out)}
    assert sorted(episodes) == ["bad", "good1", "good2"]
    assert "null" in episodes["bad"].error and episodes["bad"].truncated
    assert episodes["good1"].error is None and len(episodes["good1"].turns) == 1


def test_a_line_separator_inside_a_json_string_does_not_split_the_task(tmp_path, recording):
    tasks = tmp_path / "tasks.jsonl"
    line = {"id": "sep", "domain": "terminal", "instruction": "a\u2028b", "actions": ["ls"]}
    tasks.write_text(json.dumps(line, ensure_ascii=False) + "\r\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = simgym_cli("run", tasks, "-o", out, "-w", "replay", "--replay", recording)
    assert proc.returncode == 0, proc.stderr
    [episode] = simgym.read_trajectories(out)
    assert episode.task.instruction == "a\u2028b"


# -- files that are not what they claim -------------------------------------------------

BAD_INPUTS = {
    "binary.yaml": (b"\xff\xfe\x00\x01binary", "not UTF-8"),
    "latin1.jsonl": ('{"id": "caf\xe9", "domain": "terminal"}\n'.encode("latin-1"), "not UTF-8"),
    "deep.json": (b"[" * 5000 + b"]" * 5000, "nested"),
    "deep-line.jsonl": (
        b'{"id": "d", "domain": "terminal", "metadata": {"x": ' + b"[" * 900 + b"]" * 900 + b"}}",
        "nested",
    ),
    "bigint.jsonl": (b'{"id": ' + b"9" * 5000 + b', "domain": "terminal"}', "4,300 digits"),
    "bigint.yaml": (b"task: {id: " + b"9" * 5000 + b", domain: terminal}", "4,300 digits"),
    "list.jsonl": (b"[1, 2, 3]\n", "must be a JSON object"),
    "surrogate.json": (
        b'{"task": {"id": "s", "domain": "terminal", "metadata": {"a": "\\ud800"}}}',
        "lone UTF-16 surrogate",
    ),
    "set.yaml": (
        b"task: {id: s, domain: mcp}\nactions: [{name: x, arguments: {a: !!set {b}}}]",
        "set",
    ),
    "metadata.jsonl": (b'{"id": "m", "domain": "terminal", "metadata": [1]}', "valid dictionary"),
    "task.yaml": (b"task: {id: [1], domain: terminal}\nactions: [ls]", "id: Input should be"),
    "scenario.yaml": (
        b"task: {id: s, domain: mcp, scenario: {tools: not-a-list}}\nactions: [ls]",
        "invalid mcp scenario",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_run_gives_one_line_for_bad_files(tmp_path, recording, name):
    content, message = BAD_INPUTS[name]
    path = tmp_path / name
    path.write_bytes(content)
    proc = simgym_cli(
        "run", path, "-o", tmp_path / "o.jsonl", "-w", "replay", "--replay", recording
    )
    line = one_error_line(proc)
    assert Path(name).stem in line and message in line
    assert not (tmp_path / "o.jsonl").exists()  # refused before any episode ran


BAD_ROWS = {
    "binary": (b"\xff\xfe\x00\x01binary\n", "not UTF-8"),
    "deep": (b"[" * 5000 + b"]" * 5000 + b"\n", "nested"),
    "bigint": (BENCH_ROW.replace('"id": ', '"id": ' + "9" * 5000 + ', "x": ', 1).encode(), "4,300"),
    "list": (b"[1, 2, 3]\n", "must be a JSON object"),
    "infinity": (BENCH_ROW.replace('"id": ', '"id": Infinity, "x": ', 1).encode(), "Infinity"),
    "overflow": (BENCH_ROW.replace('"id": ', '"id": 1e999, "x": ', 1).encode(), "out of range"),
}


@pytest.mark.parametrize("name", sorted(BAD_ROWS))
def test_bench_infer_gives_one_line_for_bad_rows(tmp_path, name):
    content, message = BAD_ROWS[name]
    data = tmp_path / f"{name}.jsonl"
    data.write_bytes(content)
    out = tmp_path / "results.jsonl"
    dead = f"http://127.0.0.1:{free_port()}/v1"
    proc = simgym_cli(
        "bench", "infer", "-d", data, "-o", out, "-w", "openai", "--base-url", dead, "--model", "m"
    )
    line = one_error_line(proc)
    assert f"{name}.jsonl:1" in line and message in line
    assert not out.exists()  # in particular no `"id": Infinity`, which is not JSON


def test_bench_results_are_valid_json_even_with_nan_scores(tmp_path):
    from simgym.bench.store import RowWriter, read_rows

    path = tmp_path / "r.jsonl"
    writer = RowWriter(path)
    writer.write({"key": "mcp/1/1", "id": float("inf"), "scores": [float("nan"), 1.0]})
    writer.close()
    line = path.read_text().strip()
    assert json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in {line}"))["id"] is None
    assert read_rows(path)[0][0]["scores"] == [None, 1.0]


# -- export -----------------------------------------------------------------------------

BAD_TRAJECTORY_LINES = [
    b"\xff\xfe\x00\x01binary",
    b"[" * 5000,
    b"[" * 3000 + b"]" * 3000,
    b'{"a": ' + b"9" * 5000 + b"}",
    b"[1, 2, 3]",
    b"not json at all",
]


def test_export_of_only_unreadable_lines_fails(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(BAD_TRAJECTORY_LINES) + b"\n")
    proc = simgym_cli("export", bad, "-o", tmp_path / "rows.jsonl")
    assert "6 unreadable" in one_error_line(proc)
    skipped = [line for line in proc.stderr.splitlines() if "skipping unreadable" in line]
    assert len(skipped) == 6 and all(line.startswith(f"{bad}:") for line in skipped)


def test_export_skips_and_counts_unreadable_lines_among_good_ones(tmp_path, recording):
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"\n".join(BAD_TRAJECTORY_LINES) + b"\n" + recording.read_bytes())
    rows = tmp_path / "rows.jsonl"
    proc = simgym_cli("export", mixed, "-o", rows)
    assert proc.returncode == 0, proc.stderr
    assert "wrote 1 awb rows" in proc.stderr and "6 unreadable lines skipped" in proc.stderr
    assert len(rows.read_text().splitlines()) == 1


# -- simgym play ------------------------------------------------------------------------


def test_play_mcp_survives_random_bytes(tmp_path, recording):
    noise = random.Random(17).randbytes(3000).replace(b"\n", b"")
    lines = [noise[i : i + 60] for i in range(0, len(noise), 60)]
    lines += [b'get_customer name="unclosed', b"get_customer id=" + b"9" * 5000]
    out = tmp_path / "mcp.jsonl"
    proc = simgym_cli(
        "play", "mcp", "-w", "replay", "--replay", recording, "--out", out, "--max-turns", "500",
        stdin=b"\n".join(lines) + b"\nanswer done\n",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "No closing quotation" in proc.stderr  # said as an invalid action, not raised
    assert "not UTF-8 text" in proc.stderr
    [episode] = simgym.read_trajectories(out)
    assert episode.done and episode.turns[-1].action.text == "done"  # play went on to the end


def test_play_terminal_ignores_an_undecodable_line_and_goes_on(tmp_path, recording):
    out = tmp_path / "term.jsonl"
    proc = simgym_cli(
        "play", "terminal", "-w", "replay", "--replay", recording, "--out", out,
        stdin=b"\xff\xfe\xfd\nls\n",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "not UTF-8 text; ignored" in proc.stderr
    [episode] = simgym.read_trajectories(out)
    assert [t.action_text for t in episode.turns] == ['[{"keystrokes": "ls\\n", "duration": 1}]']
    assert "notes.txt" in proc.stdout  # the replayed screen: the line after the bad one ran


# -- the backstop in cli_errors ---------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "not UTF-8 text"),
        (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
    ],
)
def test_friendly_errors_turns_input_errors_into_one_line(error, message):
    app = typer.Typer()

    @app.command()
    @friendly_errors
    def fails() -> None:
        raise error

    result = CliRunner().invoke(app, [])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert message in result.output and len(result.output.strip().splitlines()) == 1
