"""The experience store: indexing recorded transitions and finding them again.

Everything runs on real SQLite files (FTS5 from the standard library) and real simgym
output: trajectories written by SimEnv and TrajectoryWriter, the dev set's benchmark rows,
SFT rows from simgym's exporter.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import json
import pickle
import sqlite3
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

import simgym
from simgym import Observation, Task, Trajectory, TrajectoryWriter, Turn
from simgym.cli.main import app
from simgym.core.grounding import EXPERIENCE_HEADER, Experience, ExperienceSource
from simgym.experience import (
    ExperienceError,
    ExperienceStore,
    action_key,
    build_store,
    command_word,
    open_store,
)
from simgym.worldmodels.function import FunctionWorldModel

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "devset" / "rows.jsonl"
TRAJECTORIES = ROOT / "devset" / "trajectories.jsonl"


def keys_of(text: str) -> str:
    return json.dumps([{"keystrokes": text + "\n", "duration": 1}])


def call(name: str, **arguments) -> str:
    return json.dumps({"name": name, "arguments": arguments})


@pytest.fixture(scope="module")
def devset_store(tmp_path_factory) -> ExperienceStore:
    store = open_store(tmp_path_factory.mktemp("exp") / "devset.db")
    store.add_file(ROWS)
    yield store
    store.close()


# -- keys -------------------------------------------------------------------------------


def test_action_key_reads_every_rendered_form():
    assert action_key("terminal", keys_of("cat notes.txt")) == "cat"
    assert action_key("terminal", keys_of("sudo -E git log --oneline | head")) == "git"
    assert action_key("terminal", keys_of("FOO=1 BAR=2 ./run.sh --fast")) == "run.sh"
    assert action_key("terminal", keys_of("APP_ENV=staging")) == "="
    assert action_key("terminal", keys_of(": > scores.txt")) == ":"
    assert action_key("terminal", keys_of("python3 -c \"print('unbalanced")) == "python3"
    two = json.dumps([{"keystrokes": "", "duration": 1}, {"keystrokes": "C-c", "duration": 1}])
    assert action_key("terminal", two) == "C-c"
    assert action_key("terminal", "/usr/bin/env ls -la\n") == "ls"
    assert action_key("mcp", call("get_customer", customer_id="C-1001")) == "get_customer"
    openai = json.dumps({"function": {"name": "web_search", "arguments": "{}"}})
    assert action_key("search", openai) == "web_search"
    assert action_key("web", "click('6')") == "click"
    assert action_key("web", "select_option('12', 'Express')") == "select_option"
    for odd in ("", "   ", "{", "[1, 2]", "{}", '"just a string"', "((("):
        assert isinstance(action_key("terminal", odd), str)
    assert command_word("echo hi; ls") == "echo"


# -- indexing ---------------------------------------------------------------------------


def test_indexes_trajectories_written_by_simgym(tmp_path):
    path = tmp_path / "run.jsonl"
    screens = iter(["dev@devbox:~$ ls\nnotes.txt\ndev@devbox:~$", "dev@devbox:~$ pwd\n/x\n$"])

    def world(messages):
        return f"<predicted_observation>\n{next(screens)}\n</predicted_observation>"

    with TrajectoryWriter(path) as writer:
        env = simgym.make("terminal", world_model=FunctionWorldModel(world), writer=writer)
        sync = env.sync()
        sync.reset()
        sync.step("ls")
        sync.step("pwd")
        sync.close()
        # Turns the world never answered for real are not demonstrations.
        writer.write(
            Trajectory(
                task=Task(id="edge"),
                domain="terminal",
                turns=[
                    Turn(index=1, action_text=keys_of("ok"), observation=Observation(text="ok")),
                    Turn(
                        index=2,
                        action_text=keys_of("x"),
                        observation=Observation(text="?"),
                        error="world model failed",
                    ),  # fmt: skip
                    Turn(
                        index=3,
                        action_text="done",
                        observation=Observation(text=""),
                        in_history=False,
                    ),  # fmt: skip
                    Turn(
                        index=4,
                        action_text=keys_of("y"),
                        observation=Observation(text="!"),
                        perturbation={"fault": "timeout"},
                    ),  # fmt: skip
                ],
            )
        )
        failed = Task(id="f", metadata={"factory": {"status": "failed"}})
        writer.write(
            Trajectory(
                task=failed,
                domain="terminal",
                turns=[Turn(index=1, action_text="ls", observation=Observation(text="x"))],
            )
        )

    store = open_store(tmp_path / "exp.db")
    report = store.add_file(path)
    assert report.formats == {"trajectory": 3}
    assert report.added == 3 and report.malformed == 0
    assert report.skipped == {
        "turn with an error": 1,
        "turn the world never saw": 1,
        "turn with an injected fault": 1,
        "failed factory episode": 1,
    }
    assert store.stats() == {"terminal": 3}
    found = store.similar("terminal", keys_of("ls -la"), k=3)
    assert found[0].observation == "dev@devbox:~$ ls\nnotes.txt\ndev@devbox:~$"
    assert found[0].source == "run.jsonl:1#1"
    assert all(isinstance(item, Experience) for item in found)


def test_devset_rows_retrieve_the_same_command(devset_store):
    stats = devset_store.stats()
    assert set(stats) == {"terminal", "swe", "mcp", "search", "web"}
    assert sum(stats.values()) == len(devset_store) > 400
    found = devset_store.similar("terminal", keys_of("cat notes.txt"), k=3)
    assert len(found) == 3
    assert all(action_key("terminal", item.action) == "cat" for item in found)
    assert all(item.source.startswith("rows.jsonl:") for item in found)
    assert [item.score for item in found] == sorted((item.score for item in found), reverse=True)
    # A tool call finds the same tool; the exact call ranks first.
    tool = devset_store.similar("mcp", call("get_customer", customer_id="C-1003"), k=3)
    assert [action_key("mcp", item.action) for item in tool] == ["get_customer"] * 3
    assert '"C-1003"' in tool[0].action
    web = devset_store.similar("web", "fill('10', 'Ana Lima')", k=2)
    assert all(item.action.startswith("fill(") for item in web)


def test_the_same_key_comes_first_then_the_domain_fills_in(tmp_path):
    store = open_store(tmp_path / "exp.db")
    store.add("terminal", keys_of("cat a.txt"), "alpha", "t:1")
    store.add("terminal", keys_of("cat b.md"), "beta", "t:2")
    store.add("terminal", keys_of("grep x a.txt"), "x here", "t:3")
    store.add("terminal", keys_of("wc -l c.log"), "3 c.log", "t:4")
    found = store.similar("terminal", keys_of("cat a.txt"), k=3)
    assert [item.source for item in found] == ["t:1", "t:2", "t:3"]  # t:2 shares only "cat"
    assert found[0].score > found[1].score
    # No word in common with anything, but the key still finds its rows.
    assert [i.source for i in store.similar("terminal", keys_of("wc"), k=5)] == ["t:4"]
    assert store.similar("terminal", keys_of("cat a.txt"), k=0) == []


def test_reindexing_adds_nothing(tmp_path):
    store = open_store(tmp_path / "exp.db")
    first = store.add_file(ROWS)
    rows = len(store)
    again = store.add_file(ROWS)
    assert again.added == 0 and again.duplicates == first.transitions
    # The dev set's trajectories are the same transitions as its rows: nothing new.
    trajectories = store.add_file(TRAJECTORIES)
    assert trajectories.transitions > 400 and trajectories.added == 0
    assert len(store) == rows
    assert store.add("terminal", keys_of("ls"), "a  b") is True
    assert store.add("terminal", keys_of("ls"), "a  b\n") is False  # same once normalized
    assert store.add("swe", keys_of("ls"), "a  b") is True  # another domain is another row


def test_malformed_lines_are_counted_not_fatal(tmp_path):
    good = json.loads(ROWS.read_text().split("\n", 1)[0])
    lines = [
        json.dumps(good),
        "{not json",
        "[1, 2, 3]",
        json.dumps({"something": "else"}),
        json.dumps({**good, "turn_idx": 9}),  # no response for that turn
        json.dumps({"domain": "terminal", "turns": "nope"}),  # a broken trajectory
        "",
        json.dumps({"domain": "terminal", "action": keys_of("pwd"), "observation": "/x"}),
        json.dumps({"messages": [{"role": "user", "content": "**Action:**\nls"}]}),
        '{"task": "mcp", "id": 1, "turn_idx": 1, "response": ["trunc',  # cut short
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + ("\n".join(lines)).encode() + b"\n\xff\xfe\n")
    store = open_store(tmp_path / "exp.db")
    report = store.add_file(path)
    assert report.added == 2 and report.lines == 10
    assert report.malformed == 7
    assert report.skipped == {"chat row without a domain": 1}
    assert any(p.startswith("mixed.jsonl:2:") for p in report.problems)
    assert any(p.startswith("mixed.jsonl:11:") for p in report.problems)
    assert report.to_dict()["malformed"] == 7
    with pytest.raises(ExperienceError, match="no such file"):
        store.add_file(tmp_path / "missing.jsonl")


HOSTILE = [
    "",
    " ",
    '"',
    '""',
    "*",
    "NEAR",
    "NEAR(a b, 2)",
    "a AND OR NOT b",
    '" OR "x" *',
    "{scope}: d0 ^x",
    "terms:x",
    "(((",
    "\x00\x01",
    "é ü 中文 🙂",
    "x" * 10_000,
    "cat " + " ".join(f"w{i}" for i in range(5_000)),
    keys_of('cat "*" NEAR(x)'),
    '{"name": "\\"*NEAR", "arguments": {"q": "\\" OR *"}}',
    "[" * 5000,
]


def test_fts_hostile_input_never_raises(devset_store, tmp_path):
    for text in HOSTILE:
        for domain in ("terminal", "mcp", "web", "", '"', "*"):
            found = devset_store.similar(domain, text, k=3)
            assert isinstance(found, list) and len(found) <= 3
    assert devset_store.similar("terminal", None, k=3) == []  # type: ignore[arg-type]
    # Hostile text stored as actions is found again by its own words.
    store = open_store(tmp_path / "exp.db")
    for i, text in enumerate(HOSTILE):
        if text.strip():
            store.add("terminal", text, f"obs {i}", f"h:{i}")
    assert store.similar("terminal", "NEAR(a b, 2)", k=1)[0].source == "h:6"
    assert [e.source for e in store.similar("terminal", "é ü 中文 🙂", k=1)] == ["h:13"]


def test_domains_are_isolated(tmp_path):
    store = open_store(tmp_path / "exp.db")
    store.add("terminal", keys_of("cat notes.txt"), "terminal answer")
    store.add("swe", keys_of("cat notes.txt"), "swe answer")
    store.add("swe-2", keys_of("cat notes.txt"), "other answer")
    for domain in ("terminal", "swe", "swe-2"):
        found = store.similar(domain, keys_of("cat notes.txt"), k=5)
        assert len(found) == 1
    assert store.similar("swe", keys_of("cat notes.txt"), k=5)[0].observation == "swe answer"
    assert store.similar("web", keys_of("cat notes.txt"), k=5) == []
    assert store.stats() == {"swe": 1, "swe-2": 1, "terminal": 1}


def test_other_formats_gzip_and_factory_folders(tmp_path):
    from simgym.core.trajectories import read_trajectories
    from simgym.data.export import sft_examples

    trajectory = next(read_trajectories(TRAJECTORIES))
    chat = tmp_path / "sft.jsonl.gz"
    with gzip.open(chat, "wt") as f:
        for example in sft_examples(trajectory, mode="turn"):
            f.write(json.dumps(example) + "\n")
    store = open_store(tmp_path / "exp.db")
    without = store.add_file(chat)
    assert without.added == 0 and without.skipped["chat row without a domain"] > 0
    with_domain = store.add_file(chat, domain=trajectory.domain)
    assert with_domain.added == len([t for t in trajectory.turns if t.in_history])
    assert with_domain.formats == {"chat row": with_domain.lines}
    # The same transitions as a trajectory: already there.
    factory = tmp_path / "factory"
    factory.mkdir()
    (factory / "manifest.json").write_text(json.dumps({"format": "simgym-factory/1"}))
    (factory / "train.jsonl").write_text(trajectory.model_dump_json() + "\n")
    (factory / "raw.jsonl").write_text("not read when splits exist\n")
    report = store.add_file(factory)
    assert report.files == [str(factory / "train.jsonl")]
    assert report.added == 0 and report.duplicates == with_domain.added


def test_threads_readonly_and_pickling(tmp_path):
    path = tmp_path / "exp.db"
    report = build_store(path, [ROWS])
    assert report["total"] == sum(report["rows"].values()) == report["added"]
    assert report["store"] == str(path)
    reader = open_store(path, readonly=True)
    assert isinstance(reader, ExperienceSource)
    errors: list[BaseException] = []
    counts: list[int] = []

    def work() -> None:
        try:
            for _ in range(50):
                counts.append(len(reader.similar("terminal", keys_of("git status"), k=3)))
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and counts == [3] * 200
    with pytest.raises(ExperienceError, match="read-only"):
        reader.add("terminal", "ls", "x")
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.readonly and copy.stats() == reader.stats()
    reader.close()
    copy.close()
    with pytest.raises(ExperienceError, match="not found"):
        ExperienceStore(tmp_path / "none.db", readonly=True)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(ExperienceError, match="not an experience store"):
        open_store(foreign)


def test_env_shows_similar_transitions_to_the_world_model(devset_store):
    seen: list[list[dict]] = []

    def world(messages):
        seen.append(messages)
        return "<predicted_observation>\ndev@devbox:~$\n</predicted_observation>"

    env = simgym.make(
        "terminal",
        world_model=FunctionWorldModel(world),
        grounding="facts",
        experience=devset_store,
        experience_k=2,
    )

    async def play():
        await env.reset()
        return [await env.step("cat notes.txt"), await env.step("ls")]

    results = asyncio.run(play())
    last = seen[0][-1]["content"]
    assert EXPERIENCE_HEADER in last
    assert last.index(EXPERIENCE_HEADER) < last.index("**Action:**")
    assert "cat report.txt" in last  # a real `cat` from the dev set
    assert EXPERIENCE_HEADER not in results[0].observation.text  # the agent never sees it
    turns = env.trajectory.turns
    assert len(turns[0].grounding["experience"]) == 2
    assert all(s.startswith("rows.jsonl:") for s in turns[0].grounding["experience"])
    # Earlier messages never change: the second request extends the first.
    assert seen[1][: len(seen[0])] == seen[0]
    assert EXPERIENCE_HEADER in seen[1][-1]["content"]
    # A path is refused with the call that opens it: the core opens no files (the
    # command line and the integrations open the store and pass it in).
    with pytest.raises(TypeError, match="open_store"):
        simgym.make(
            "terminal",
            world_model=FunctionWorldModel(world),
            grounding="facts",
            experience=str(devset_store.path),
        )


def test_the_cli_builds_queries_and_counts(tmp_path, capsys):
    """``simgym experience`` (the one experience command line: no second one under
    ``python -m simgym.experience``)."""
    db = tmp_path / "cli.db"
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        done = runner.invoke(app, ["experience", *args])
        captured = capsys.readouterr()
        return done.exit_code, done.output + captured.out + captured.err

    code, built = run("build", str(db), str(ROWS))
    assert code == 0 and "terminal" in built and "malformed lines" in built
    code, found = run("query", str(db), "terminal", keys_of("cat a.txt"))
    assert code == 0 and "rows.jsonl:" in found
    code, counted = run("stats", str(db))
    assert code == 0 and "terminal" in counted and "total" in counted
    code, missing = run("build", str(db), str(tmp_path / "nope.jsonl"))
    assert code != 0 and "no such file" in missing
    assert importlib.util.find_spec("simgym.experience.__main__") is None
