"""Plugins: packages that add domains, backends, rewards, log readers and agents by entry
point, and the conformance checks they run.

The example plugin (``examples/plugins/simgym-sql``, a SQL console) is installed into a
temporary folder, never into the project's venv, and driven through the ``simgym``
command the way its users would: ``check_domain``, ``play``, ``run``, ``record``,
sim-vs-real and ``view``, with no line of ``src/simgym`` naming it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import simgym
from conftest import free_port
from simgym.core import domain as domain_registry
from simgym.core import worldmodel as backend_registry
from simgym.core.errors import ConformanceError, PluginError

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "plugins" / "simgym-sql"
EPISODE = PLUGIN / "examples" / "top_customer.yaml"


# -- the example plugin, installed into a temporary target ---------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """simgym-sql installed (no network, no build isolation) into a folder of its own."""
    work = tmp_path_factory.mktemp("plugin")
    source = work / "simgym-sql"
    # a copy, so the build leaves no build/ or egg-info in the repository
    shutil.copytree(
        PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    target = work / "site"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert (target / "simgym_sql" / "prompts" / "sql.md").is_file()
    return target


def _env(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT / "src")])
    return env


def simgym_cli(
    site: Path, *args: object, cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "simgym", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
        env=_env(site),
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_no_line_of_simgym_names_the_plugin():
    named = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "src" / "simgym").rglob("*.py")
        if "simgym_sql" in path.read_text(encoding="utf-8")
        or '"sql"' in path.read_text(encoding="utf-8")
    ]
    assert named == []


def test_the_plugins_own_tests_pass_where_it_is_installed(site, tmp_path):
    copy = tmp_path / "simgym-sql"
    shutil.copytree(PLUGIN / "tests", copy / "tests")
    shutil.copy(PLUGIN / "pyproject.toml", copy / "pyproject.toml")  # its own pytest root
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(copy / "tests")],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=copy,
        env=_env(site),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "6 passed" in proc.stdout or "5 passed, 1 skipped" in proc.stdout, proc.stdout


def test_domains_lists_the_plugin_and_play_is_answered_by_the_state(site, tmp_path):
    listed = simgym_cli(site, "domains", cwd=tmp_path)
    assert listed.returncode == 0 and "sql" in listed.stdout and "sqlite3 shell" in listed.stdout
    out = tmp_path / "play.jsonl"
    lines = [
        ".headers on",
        "SELECT name FROM customers WHERE city = 'London';",
        "DELETE FROM orders WHERE customer_id = 1;",
        "SELECT count(*) AS left FROM orders;",
        "answer 2",
    ]
    proc = simgym_cli(
        site, "play", "sql", "--out", out, cwd=tmp_path, stdin="\n".join(lines) + "\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("SQLite version 3.40.1")
    assert "name\nAda Lovelace\nsqlite>" in proc.stdout and "left\n2\nsqlite>" in proc.stdout
    [trajectory] = simgym.read_trajectories(out)
    assert trajectory.domain == "sql" and trajectory.answer == "2"
    sql_turns = [t for t in trajectory.turns if t.action and t.action.kind == "tool_call"]
    assert len(sql_turns) == 4
    # every statement was decided by the state (the embedded model was never asked)
    assert all(t.grounding and t.grounding.get("exact") for t in sql_turns)
    assert sql_turns[2].grounding["effects"]["script"] == [lines[2]]


def test_run_record_compare_and_view_an_episode(site, tmp_path):
    out = tmp_path / "run.jsonl"
    proc = simgym_cli(site, "run", EPISODE, "-o", out, "--compare", "real", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    [simulated] = simgym.read_trajectories(out)
    [real] = simgym.read_trajectories(tmp_path / "run.real.jsonl")
    assert simulated.total_reward == 1.0 and simulated.error is None
    assert real.world_model["name"] == "real-sql"  # the plugin's backend, by entry point
    sim_texts = [t.observation.text for t in simulated.turns]
    assert sim_texts == [t.observation.text for t in real.turns]
    assert "Grace Hopper|39.0\nsqlite> " in sim_texts
    rows = [json.loads(line) for line in (tmp_path / "run.compare.jsonl").read_text().splitlines()]
    assert rows and all(r["domain"] == "sql" for r in rows)

    recorded = tmp_path / "rec.jsonl"
    proc = simgym_cli(site, "record", EPISODE, "-o", recorded, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    [rec] = simgym.read_trajectories(recorded)
    assert rec.world_model["name"] == "real-sql" and rec.error is None
    assert [t.observation.text for t in rec.turns] == [t.observation.text for t in real.turns]

    pages = tmp_path / "site"
    proc = simgym_cli(
        site, "view", out, "--export", pages, "--index", tmp_path / "index.db", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    page = next(p for p in pages.glob("episode-*.html"))
    html = page.read_text(encoding="utf-8")
    # a domain with no family shows its observations as plain text
    assert '<pre class="obs text">Grace Hopper|39.0\nsqlite&gt; </pre>' in html


# -- the registries read entry points lazily, and say which plugin failed -------------


def _dist(
    site: Path, name: str, groups: dict[str, dict[str, str]], modules: dict[str, str]
) -> None:
    """A distribution as an installer leaves it: a .dist-info folder and its modules."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = []
    for group, points in groups.items():
        lines.append(f"[{group}]")
        lines += [f"{k} = {v}" for k, v in points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, code in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(code))


@pytest.fixture
def fresh(monkeypatch):
    """The registries' run-time entries, restored after the test (a plugin loaded here
    must not stay registered for the tests that follow)."""
    from simgym.agents import base as agents
    from simgym.logs.registry import READERS
    from simgym.rewards import registry as rewards

    for registry in (domain_registry._DOMAINS, backend_registry._BACKENDS, agents._AGENTS, READERS):
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
    monkeypatch.setattr(rewards, "_FACTORIES", dict(rewards._FACTORIES))


def test_a_plugin_is_listed_without_import_and_loaded_when_asked(tmp_path, monkeypatch, fresh):
    _dist(
        tmp_path,
        "kiosk-plugin",
        {"simgym.domains": {"kiosk": "kiosk_domain:KIOSK"}},
        {
            "kiosk_domain": """
                import dataclasses
                from simgym.core.domain import get_domain
                IMPORTED = True
                KIOSK = dataclasses.replace(get_domain("web"), name="kiosk", family="gui")
            """
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "kiosk" in simgym.domain_names()
    assert "kiosk_domain" not in sys.modules  # listed, not imported
    simgym.get_domain("terminal")
    assert "kiosk_domain" not in sys.modules  # a built-in never reads plugins
    kiosk = simgym.check_domain("kiosk")
    assert kiosk.family == "gui" and "kiosk_domain" in sys.modules
    # the family decides how the viewer and the judge treat it, not its name
    from simgym.bench.judge import family_of
    from simgym.viewer.blocks import observation_block

    assert family_of("kiosk") == "gui"
    assert 'class="obs tree"' in observation_block("[1] button 'Pay'", "kiosk")
    monkeypatch.delitem(sys.modules, "kiosk_domain")


def test_a_plugin_that_fails_to_load_names_itself_and_its_distribution(tmp_path, monkeypatch):
    _dist(
        tmp_path,
        "broken-plugin",
        {"simgym.domains": {"broken": "broken_domain:DOMAIN"}},
        {"broken_domain": "import a_module_nobody_has\n"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as caught:
        simgym.get_domain("broken")
    message = str(caught.value)
    assert "'broken'" in message and "broken-plugin 1.0" in message
    assert "simgym.domains" in message and "ModuleNotFoundError" in message
    assert "a_module_nobody_has" in message
    # the CLI reports it as an error, not a traceback
    proc = subprocess.run(
        [sys.executable, "-m", "simgym", "play", "broken"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")])},
    )
    assert proc.returncode != 0 and "broken-plugin 1.0" in proc.stderr
    assert "Traceback" not in proc.stderr
    # the doctor loads every installed plugin and shows the one that fails
    down = f"http://127.0.0.1:{free_port()}/v1"
    doctor = subprocess.run(
        [sys.executable, "-m", "simgym", "doctor", "-w", "openai", "--base-url", down],
        capture_output=True,
        text=True,
        timeout=120,
        env={  # wide enough that the table does not wrap the row (xdist sets COLUMNS=80)
            **os.environ,
            "COLUMNS": "250",
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")]),
        },
    )
    shown = " ".join(doctor.stdout.split())
    assert doctor.returncode == 1 and "plugin simgym.domains: broken" in shown
    assert "broken-plugin 1.0" in shown and "ModuleNotFoundError" in shown


def test_a_plugin_must_give_what_its_group_holds(tmp_path, monkeypatch, fresh):
    _dist(
        tmp_path,
        "odd-plugin",
        {
            "simgym.domains": {"notadomain": "odd_mod:VALUE", "misnamed": "odd_mod:WEB"},
            "simgym.worldmodels": {"notafactory": "odd_mod:VALUE"},
            "simgym.agents": {"notanagent": "odd_mod:VALUE"},
        },
        {
            "odd_mod": "from simgym.core.domain import get_domain\nVALUE = 3\nWEB = get_domain('web')\n"
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match="is a int, not a simgym.Domain"):
        simgym.get_domain("notadomain")
    with pytest.raises(PluginError, match="names a Domain called 'web'"):
        simgym.get_domain("misnamed")
    with pytest.raises(PluginError, match="not a factory"):
        simgym.world_model("notafactory")
    from simgym.agents.base import create_agent

    with pytest.raises(PluginError, match="plugin agent 'notanagent' is a int, not a factory"):
        create_agent("notanagent")


def test_two_distributions_declaring_one_name_is_an_error(tmp_path, monkeypatch, fresh):
    for n in ("one", "two"):
        _dist(tmp_path / n, f"twin-{n}", {"simgym.agents": {"twin": f"twin_{n}:Agent"}}, {})
        monkeypatch.syspath_prepend(str(tmp_path / n))
    from simgym.agents.base import create_agent

    with pytest.raises(PluginError, match="twin-one 1.0, twin-two 1.0|twin-two 1.0, twin-one 1.0"):
        create_agent("twin")


def test_rewards_agents_backends_and_log_readers_come_from_plugins(tmp_path, monkeypatch, fresh):
    _dist(
        tmp_path,
        "extras-plugin",
        {
            "simgym.rewards": {"always_half": "extras_mod:Half"},
            "simgym.agents": {"silent": "extras_mod:make_agent"},
            "simgym.worldmodels": {"echo": "extras_mod:make_backend"},
            "simgym.log_readers": {"lines": "extras_mod:read_lines"},
        },
        {
            "extras_mod": """
                from simgym.rewards.base import RewardResult
                from simgym.worldmodels.function import FunctionWorldModel

                class Half:
                    name = "always_half"
                    def __init__(self, **options):
                        self.options = options
                    async def score(self, trajectory):
                        return RewardResult(value=0.5, parts={"always_half": 0.5})

                def make_agent(**options):
                    return ("agent", options)

                def make_backend(**options):
                    return FunctionWorldModel(lambda messages: "echo")

                def read_lines(path, report):
                    return iter(())
            """
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from simgym.agents.base import agent_names, create_agent
    from simgym.logs.registry import READERS
    from simgym.rewards import build_reward, reward_names

    assert "always_half" in reward_names()
    reward = build_reward({"type": "always_half", "note": "x"})
    assert reward.options == {"note": "x"}
    assert "silent" in agent_names() and create_agent("silent", k=1) == ("agent", {"k": 1})
    assert "echo" in backend_registry.backend_names()
    assert "lines" in READERS.names() and READERS.get("lines").__name__ == "read_lines"
    described = simgym.check_backend("echo", domain="terminal", actions=["pwd"])
    assert described["name"] == "function"


def test_check_domain_lists_every_problem(tmp_path, fresh):
    prompt = tmp_path / "bare.md"
    prompt.write_text("You are a thing. $control\n")
    web = simgym.get_domain("web")
    bare = dataclasses.replace(
        web, name="bare", description="", family="screen", prompt_file=prompt, demonstrations=()
    )
    with pytest.raises(ConformanceError) as caught:
        simgym.check_domain(bare)
    message = str(caught.value)
    assert message.startswith("domain 'bare' does not conform:")
    for problem in (
        "description is empty",
        "family 'screen' is not one of shell, tool, search, gui",
        "0 demonstration(s)",
        "lacks <predicted_observation>, $demonstrations",
    ):
        assert problem in message, message


def test_check_backend_says_what_a_backend_lacks(monkeypatch, fresh):
    class Mute:
        name = "mute"

        def describe(self):
            return {"name": "mute"}

    backend_registry.register_backend("mute", Mute)
    with pytest.raises(ConformanceError, match="lacks predict, aclose"):
        simgym.check_backend("mute")
    with pytest.raises(ConformanceError, match="could not be built"):
        simgym.check_backend("function", options={"nonsense": 1})


@pytest.mark.slow  # the embedded model predicts one row: ~1.5 min on 2 cores
def test_bench_infers_and_scores_the_plugins_recorded_turns(site, tmp_path):
    recorded = tmp_path / "rec.jsonl"
    assert simgym_cli(site, "record", EPISODE, "-o", recorded, cwd=tmp_path).returncode == 0
    predictions = tmp_path / "pred.jsonl"
    proc = simgym_cli(
        site,
        "bench",
        "infer",
        "-d",
        recorded,
        "-o",
        predictions,
        "-w",
        "local",
        "--limit",
        "1",
        "--max-tokens",
        "32",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    [row] = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert row["domain"] == "sql" and row["status"] == "ok"
    assert row["system_str"].startswith("You are the sqlite3 command-line shell")
    scored = simgym_cli(site, "bench", "score", predictions, cwd=tmp_path)
    assert scored.returncode == 0 and "sql" in scored.stdout
