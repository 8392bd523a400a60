"""Issue 43's hostile surfaces, each tried as a careless user or a hostile page would:
regexes in user files (bounded time), the servers' Origin and Host checks (a real second
origin on loopback), the viewer (an unreadable line, its refusal's wording), a sandbox's
total disk, log masking on long values, one guarded YAML loader, and errors that name
their cause. The viewer's stored-XSS sweep in Chromium is in tests/test_view_xss.py."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import simgym
from simgym.core.errors import SimgymError
from simgym.core.types import Task, Trajectory

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
REDOS = r"^(a+)+$"
REDOS_TEXT = "a" * 37 + "b"  # Python's re: minutes; the issue saw it run past 90 s


def _bounded(code: str, seconds: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that must finish in ``seconds`` (a backtracking
    regex holds the GIL, so a thread could not be given up on)."""
    return subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, timeout=seconds, cwd=ROOT
    )


# -- item 5: every user-supplied regex runs in bounded time -------------------------------


def test_a_case_check_regex_runs_in_linear_time() -> None:
    code = f"""
import time
from simgym.core.types import Task, Trajectory
from simgym.safety.checks import Check, check_hits
t = Trajectory(task=Task(id="t", instruction="x", domain="terminal"), domain="terminal",
               answer={REDOS_TEXT!r})
check = Check(kind="answer", pattern={REDOS!r})
start = time.perf_counter()
assert check_hits(check, t) is False
print(time.perf_counter() - start)
"""
    done = _bounded(code)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 1.0


def test_a_regex_reward_runs_in_linear_time() -> None:
    code = f"""
import time
from simgym.core.types import Task, Trajectory
from simgym.rewards import RegexMatch
t = Trajectory(task=Task(id="t", instruction="x", domain="terminal"), domain="terminal",
               answer={REDOS_TEXT!r})
start = time.perf_counter()
assert RegexMatch({REDOS!r}, mode="fullmatch").check(t).value == 0.0
t.task.metadata["pattern"] = {REDOS!r}
assert RegexMatch().check(t).value == 0.0
print(time.perf_counter() - start)
"""
    done = _bounded(code)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 1.0


def test_a_pattern_re2_cannot_run_is_cut_off_and_said() -> None:
    """Look-around has no linear algorithm: such a pattern runs with a time limit per
    match, and running out of it is an error, never "no match"."""
    from simgym.core.patterns import PatternTimeout, compile_pattern

    pattern = compile_pattern(r"^(a|a)+(?<!x)$")
    assert pattern.engine == "regex"
    start = time.perf_counter()
    with pytest.raises(PatternTimeout, match="ran past"):
        pattern.search("a" * 40 + "b")
    assert time.perf_counter() - start < 10
    from simgym.rewards import RegexMatch

    t = Trajectory(
        task=Task(id="t", instruction="x", domain="terminal"), domain="terminal", answer="a" * 40
    )
    bad = RegexMatch(r"^(a|a)+(?<!x)$").check(
        Trajectory(**{**t.model_dump(), "answer": "a" * 40 + "b"})
    )
    assert bad.value == 0.0 and "ran past" in bad.details["error"]


@pytest.mark.parametrize(
    ("pattern", "texts"),
    [
        (r"rm\s+-rf", ["rm  -rf /", "rm\u00a0-rf", "rm-rf"]),
        (r"\bdelete\b", ["please delete it", "undeleted"]),
        (r"^\d{3}-\d{4}$", ["555-1234", "555-1234\n", "555-12345", "٥٥٥-١٢٣٤"]),
        (r"abc\Z", ["xabc", "abc\n"]),
        (r"[\w.+-]+@example\.com", ["café.ops@example.com", "x@example.org"]),
        (r"(?i)secret", ["SECRET", "sec ret"]),
        (r"(?<![A-Za-z0-9])fwu9(?![A-Za-z0-9])", ["key fwu9.", "xfwu9"]),
        (r"^\D*(?<!\d)36(?!\d)\D*$", ["36 lines", "136"]),
        (r"(\w)\1", ["aa", "ab"]),
        (r"x{,3}y", ["xxy", "x{,3}y"]),
        (r"[^\W\d]+", ["abc", "123"]),
    ],
)
def test_bounded_patterns_mean_what_python_means(pattern: str, texts: list[str]) -> None:
    from simgym.core.patterns import compile_pattern

    compiled = compile_pattern(pattern, ignore_case=True)
    for text in texts:
        for how in ("search", "fullmatch"):
            want = getattr(re, how)(pattern, text, re.IGNORECASE) is not None
            assert (getattr(compiled, how)(text) is not None) == want, (pattern, text, how)


def test_invalid_patterns_are_refused_with_the_reason() -> None:
    from simgym.core.patterns import PatternError, compile_pattern

    for bad in ["(abc", "a**", r"\p{L}", "[z-a]"]:
        with pytest.raises(PatternError, match="invalid pattern"):
            compile_pattern(bad)
    from simgym.safety.checks import Check

    with pytest.raises(ValueError, match="bad regex"):
        Check(kind="record", collection="c", where={"email": {"regex": "(unclosed"}})


# -- item 13: masking is linear in a value's length ---------------------------------------


def test_masking_a_long_value_is_linear() -> None:
    code = """
import time
from simgym.logs.mask import Masker
run = "lorem.ipsum-dolor_sit+amet%consectetur." * 6000   # 234 KB without an "@"
text = run + " mail ada.meyer@bank.test, account 123456789012"
start = time.perf_counter()
masked = Masker().text(text)
assert "ada.meyer@bank.test" not in masked and "123456789012" not in masked
assert masked.startswith(run)
print(time.perf_counter() - start)
"""
    done = _bounded(code, 60)  # the backtracking pattern took minutes on this
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 2.0


def test_masking_keeps_its_rules() -> None:
    from simgym.logs.mask import Masker

    m = Masker()
    same = Masker()
    assert m.text("v1.123456789012") == "v1.123456789012"  # a dotted number is kept
    assert m.text("-123456789012") == "-123456789012"
    assert m.text("x 123456789012.5") == "x 123456789012.5"
    assert m.text("12345678") == "12345678"  # too short to be an account
    masked = m.text("pay 123456789012 to a.b@c.example.org")
    assert "123456789012" not in masked and "a.b@c.example.org" not in masked
    assert masked == same.text("pay 123456789012 to a.b@c.example.org")
    assert re.fullmatch(r"pay \d{12} to user-[0-9a-f]{6}@example\.com", masked)


# -- item 14: one guarded loader for every user YAML --------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_no_direct_yaml_load_on_user_input() -> None:
    """Every YAML a user hands over goes through simgym.core.safeload.load_yaml (its alias
    budget, depth limit and JSON-only types); nothing in the package calls PyYAML's
    loaders itself."""
    direct = re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\(")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "src" / "simgym").rglob("*.py"))
        if path.name != "safeload.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if direct.search(line)
    ]
    assert offenders == []


def test_an_alias_bomb_in_a_case_file_or_policy_is_refused(tmp_path: Path) -> None:
    from simgym.safety.cases import CaseError
    from simgym.safety.gate import load_policy
    from simgym.safety.suite import load_file

    case = tmp_path / "bomb.yaml"
    case.write_text(BOMB + "cases: []\n")
    start = time.perf_counter()
    with pytest.raises(CaseError, match="alias"):
        load_file(case)
    policy = tmp_path / "policy.yaml"
    policy.write_text(BOMB)
    with pytest.raises(SimgymError, match="alias"):
        load_policy(policy)
    assert time.perf_counter() - start < 5
    scenario = tmp_path / "world.yaml"
    scenario.write_text(BOMB)
    case.write_text(
        "cases:\n- id: c1\n  domain: terminal\n  kind: benign\n  category: benign\n"
        "  instruction: look\n  scenario: world.yaml\n"
    )
    with pytest.raises(CaseError, match="alias"):
        load_file(case)


# -- items 8 and 9: Origin and Host on every endpoint --------------------------------------


def _echo_world(messages):
    return "<predicted_observation>ok</predicted_observation>"


def test_openenv_refuses_other_origins_and_foreign_hosts(tmp_path: Path) -> None:
    """A page served from another origin on loopback (a real second server) opens a
    WebSocket to the OpenEnv server the way a browser does, with its Origin: refused before
    any episode starts; a rebinding name in Host is refused (421); the server's own origin,
    and clients that send no Origin, work."""
    pytest.importorskip("openenv")
    import httpx
    from test_openenv import serving
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    from simgym.integrations.openenv_server import create_openenv_app

    out = tmp_path / "episodes.jsonl"
    app = create_openenv_app(
        "terminal",
        simgym.FunctionWorldModel(_echo_world),
        task="Look",
        writer=simgym.TrajectoryWriter(out),
        keep_empty_episodes=True,
    )
    page = tmp_path / "site"
    page.mkdir()
    (page / "index.html").write_text("<p>another site</p>")
    other = subprocess.Popen(
        [PYTHON, "-m", "http.server", "0", "--bind", "127.0.0.1", "-d", str(page)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = other.stdout.readline()  # "Serving HTTP on 127.0.0.1 port NNNN ..."
        other_origin = "http://127.0.0.1:" + re.search(r"port (\d+)", line).group(1)
        assert httpx.get(other_origin + "/index.html").status_code == 200
        with serving(app) as url:
            ws = url.replace("http://", "ws://") + "/ws"
            for origin in (other_origin, "http://attacker.example", "null"):
                with pytest.raises(InvalidStatus):
                    with connect(ws, additional_headers={"Origin": origin}, open_timeout=10):
                        pass
            reset = {"type": "reset", "data": {}}
            with connect(ws, additional_headers={"Origin": url}, open_timeout=10) as conn:
                conn.send(json.dumps(reset))
                assert json.loads(conn.recv(timeout=30))["type"] == "observation"
            with connect(ws, open_timeout=10) as conn:  # no Origin: not a browser
                conn.send(json.dumps(reset))
                assert json.loads(conn.recv(timeout=30))["type"] == "observation"
            with httpx.Client(base_url=url, timeout=30) as http:
                foreign = http.post("/reset", json={}, headers={"Origin": other_origin})
                assert foreign.status_code == 403
                rebound = http.get("/health", headers={"Host": "attacker.example"})
                assert rebound.status_code == 421
                port = url.rsplit(":", 1)[1]
                assert http.get("/health", headers={"Host": f"localhost:{port}"}).status_code == 200
                assert http.post("/reset", json={}, headers={"Origin": url}).status_code == 200
    finally:
        other.terminate()
        other.wait(timeout=10)


def test_the_viewer_refuses_other_origins_and_foreign_hosts(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from simgym.viewer.app import Viewer, create_app

    runs = tmp_path / "runs.jsonl"
    t = Trajectory(task=Task(id="t1", instruction="x", domain="terminal"), domain="terminal")
    runs.write_text(t.model_dump_json() + "\n")
    viewer = Viewer.open([runs], tmp_path / "index.sqlite")
    with TestClient(create_app(viewer), base_url="http://127.0.0.1:8765") as client:
        assert client.get("/api/episodes").json()["total"] == 1
        assert (
            client.get("/api/episodes", headers={"Host": "attacker.example:8765"}).status_code
            == 421
        )
        assert (
            client.get("/api/episodes", headers={"Origin": "http://evil.test"}).status_code == 403
        )
        assert (
            client.get("/api/poll", headers={"Origin": "http://127.0.0.1:9999"}).status_code == 403
        )
        assert (
            client.get("/api/poll", headers={"Origin": "http://127.0.0.1:8765"}).status_code == 200
        )
    viewer.index.close()


def test_the_mcp_server_refuses_other_origins(tmp_path: Path) -> None:
    """The SDK lets a page on any localhost port in; simgym allows only the server's own."""
    pytest.importorskip("mcp")
    from starlette.testclient import TestClient

    from simgym.integrations.mcp_server import SimMCPServer

    server = SimMCPServer("terminal", simgym.FunctionWorldModel(_echo_world))
    app = server.http_app(host="127.0.0.1")
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        foreign = client.post("/mcp", json=body, headers={"Origin": "http://127.0.0.1:3000"})
        assert foreign.status_code == 403
        rebound = client.post("/mcp", json=body, headers={"Host": "attacker.example"})
        assert rebound.status_code == 421


# -- item 11: the viewer's unreadable line and its refusal's wording -----------------------


def test_an_invalid_trajectory_line_is_a_page_that_says_why(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from simgym.viewer.app import Viewer, create_app
    from simgym.viewer.export import export_site

    runs = tmp_path / "runs.jsonl"
    good = Trajectory(task=Task(id="t1", instruction="x", domain="terminal"), domain="terminal")
    bad = {"episode_id": "ep-bad", "task": {"id": "t2"}, "domain": "terminal", "turns": "many"}
    runs.write_text(good.model_dump_json() + "\n" + json.dumps(bad) + "\n")
    viewer = Viewer.open([runs], tmp_path / "index.sqlite")
    with TestClient(
        create_app(viewer), base_url="http://127.0.0.1", raise_server_exceptions=False
    ) as client:
        assert client.get("/api/episodes").json()["total"] == 2
        page = client.get("/episode/2")
        assert page.status_code == 422
        assert "runs.jsonl:2 is not a valid trajectory" in page.text and "turns" in page.text
        assert client.get("/episode/1").status_code == 200
    assert export_site(viewer, tmp_path / "site") > 0
    assert "not a valid trajectory" in (tmp_path / "site" / "episode-2.html").read_text()
    viewer.index.close()


def test_the_viewer_refusal_beyond_loopback_speaks_of_the_viewer(tmp_path: Path) -> None:
    from simgym.cli.main import app

    runs = tmp_path / "runs.jsonl"
    runs.write_text("")
    refused = CliRunner().invoke(
        app, ["view", str(runs), "--host", "0.0.0.0", "--index", str(tmp_path / "i.sqlite")]
    )
    assert refused.exit_code == 2
    said = " ".join(refused.output.split())
    assert "read every trajectory" in said and "world model" not in said


# -- item 12: a sandbox's total disk --------------------------------------------------------


def _sandbox_ready() -> str | None:
    from simgym.real.sandbox import bwrap_problem

    # mounting a size-limited tmpfs needs root (simgym.real.sandbox.disk_problem)
    return "not root" if os.geteuid() != 0 else bwrap_problem()


@pytest.mark.skipif(_sandbox_ready() is not None, reason="needs bwrap and mount rights")
def test_a_write_storm_stays_inside_the_sandbox_disk_limit() -> None:
    from simgym.real.sandbox import Limits, Sandbox, isolation

    assert isolation()["disk"].startswith("tmpfs")

    async def storm() -> None:
        sandbox = Sandbox(files={}, limits=Limits(disk_mb=48, file_mb=512)).build()
        try:
            done = await sandbox.exec(
                "for i in 1 2 3; do dd if=/dev/zero of=/tmp/f$i bs=1M count=100 2>&1 | head -1 & "
                "done; wait; du -sm /tmp"
            )
            assert "No space left on device" in done.output
            assert done.disk_full
            used, allowed = sandbox.disk_usage()
            assert allowed == 48 << 20 and used <= allowed
            files = [f.lstat() for f in sandbox.root.rglob("*") if not f.is_symlink()]
            assert sum(st.st_blocks * 512 for st in files) <= allowed
            assert (await sandbox.exec("rm /tmp/f*; echo fine")).output.strip() == "fine"
        finally:
            sandbox.destroy()

    asyncio.run(storm())


@pytest.mark.skipif(_sandbox_ready() is not None, reason="needs bwrap and mount rights")
def test_the_refused_writes_are_recorded_on_the_turn(tmp_path: Path) -> None:
    from simgym.real.sandbox import Limits
    from simgym.real.terminal import RealTerminal

    async def episode() -> Trajectory:
        env = simgym.make(
            "terminal",
            world_model=RealTerminal(limits=Limits(disk_mb=32)),
            scenario={"user": "dev"},
            max_turns=3,
        )
        await env.reset("fill the disk")
        await env.step(
            [{"keystrokes": "dd if=/dev/zero of=~/big bs=1M count=100\n", "duration": 20}]
        )
        await env.step([{"keystrokes": "echo next\n"}])
        trajectory = env.trajectory
        await env.close()
        return trajectory

    t = asyncio.run(episode())
    first, second = t.turns
    note = first.observation.metadata["sandbox_disk"]
    assert note["limit_mb"] == 32 and "refused" in note["refused"]
    assert "No space left on device" in first.observation.text


# -- item 15: errors that name their cause --------------------------------------------------


def _import(tmp_path: Path, log: Path):
    from simgym.cli.main import app

    return CliRunner().invoke(app, ["logs", "import", str(log), "-o", str(tmp_path / "w")])


def test_an_unreadable_log_says_why_nothing_was_imported(tmp_path: Path) -> None:
    broken = tmp_path / "events.sqlite"
    broken.write_bytes(b"SQLite format 3\x00" + b"garbage" * 20)
    done = _import(tmp_path, broken)
    said = " ".join(done.output.split())
    assert done.exit_code != 0 and "file is not a database" in said
    levels = 9
    entities = '<!ENTITY a0 "xxxxxxxxxx">' + "".join(
        f'<!ENTITY a{i} "' + f"&a{i - 1};" * 10 + '">' for i in range(1, levels + 1)
    )
    bomb = tmp_path / "bomb.xes"
    bomb.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE log [{entities}]>\n<log xes.version="1.0"><trace>'
        f'<string key="concept:name" value="c"/><event><string key="concept:name" '
        f'value="&a{levels};"/></event></trace></log>\n'
    )
    done = _import(tmp_path, bomb)
    said = " ".join(done.output.split())
    assert done.exit_code != 0 and "amplification" in said


def test_a_nested_json_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    good = {"session": "s", "operation": "ping", "request": {"q": 1}, "status": 200}
    log.write_text(
        json.dumps(good) + "\n" + '{"session": "s", "request": ' + "[" * 5000 + "]" * 5000 + "}\n"
    )
    done = _import(tmp_path, log)
    said = " ".join(done.output.split())
    assert "calls.jsonl:2: nested too deeply" in said


def test_a_log_line_over_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch) -> None:
    from simgym.logs import ImportReport, jsonstream, read_logs

    monkeypatch.setattr(jsonstream, "MAX_LINE_BYTES", 1000)
    log = tmp_path / "calls.jsonl"
    row = {"session": "s", "operation": "ping", "status": 200}
    log.write_text(json.dumps(row) + "\n" + json.dumps({**row, "pad": "x" * 5000}) + "\n")
    with pytest.raises(SimgymError, match=r"calls\.jsonl:2: a line longer than 1,000 bytes"):
        list(read_logs([log], ImportReport()))


def test_a_200_mb_line_costs_no_more_than_the_limit(tmp_path: Path) -> None:
    """The issue's 200 MB line used 672 MB; now it is refused after reading the limit."""
    log = tmp_path / "big.jsonl"
    with log.open("wb") as f:
        f.write(b'{"session": "s", "operation": "op", "pad": "')
        chunk = b"x" * (1 << 20)
        for _ in range(200):
            f.write(chunk)
        f.write(b'"}\n')
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec from the forking parent
    # (a big pytest process), while VmHWM belongs to the new program's own memory
    code = f"""
from simgym.logs import ImportReport, read_logs
from simgym.core.errors import SimgymError
try:
    list(read_logs([{str(log)!r}], ImportReport()))
except SimgymError as exc:
    print(exc)
status = open("/proc/self/status").read()
print(int(status.split("VmHWM:")[1].split()[0]) // 1024)
"""
    done = _bounded(code, 120)
    said, peak = done.stdout.strip().rsplit("\n", 1)
    assert "big.jsonl:1: a line longer than 64 MiB" in said
    assert int(peak) < 400, peak  # MB: the interpreter, simgym and one 64 MiB buffer


def test_experience_build_on_only_garbage_fails(tmp_path: Path) -> None:
    from simgym.cli.main import app

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("garbage\nmore garbage\n")
    done = CliRunner().invoke(
        app, ["experience", "build", str(tmp_path / "s.sqlite"), str(garbage)]
    )
    assert done.exit_code != 0
    assert "no transition found" in " ".join(done.output.split())


def test_a_silent_tmux_failure_still_says_why() -> None:
    from simgym.real.shell import _tmux_reason

    assert "no server running" in _tmux_reason("no server running on /x\n", 1)
    assert "tmux server in the sandbox ended" in _tmux_reason("", 1)
    assert "signal 9" in _tmux_reason("", 137)


def test_a_check_whose_pattern_runs_out_of_time_fails_closed() -> None:
    """A back-reference needs the backtracking engine; when it runs out of time the
    verdict cannot tell: the minefield counts as stepped on, the milestone as missed, and
    the check's error is reported (which closes the gate)."""
    from simgym.core.types import Task, Trajectory
    from simgym.safety.cases import SafetyCase
    from simgym.safety.evaluate import verdict

    slow = r"^(a|aa)+\1$"  # exponential in a backtracking engine, not linear-izable
    text = "a" * 40 + "b"
    case = SafetyCase.model_validate(
        {
            "id": "slow",
            "domain": "terminal",
            "instruction": "x",
            "category": "privacy_leak",
            "kind": "risky",
            "minefields": [{"name": "mine", "kind": "answer", "pattern": slow}],
            "milestones": [{"name": "goal", "kind": "answer", "pattern": slow}],
        }
    )
    episode = Trajectory(
        task=Task(id="slow", instruction="x", domain="terminal"), domain="terminal", answer=text
    )
    found = verdict(case, episode)
    assert [v["check"] for v in found["violations"]] == ["mine"]
    assert found["milestones"] == [] and not found["safe"]
    assert any("ran past" in p for p in found["check_errors"])


def test_simgym_view_passes_its_allowed_origins_to_the_guard(tmp_path, monkeypatch) -> None:
    """`simgym view --allow-origin URL`: that origin's pages may call the viewer, any
    other Origin is still refused (403)."""
    import uvicorn
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from simgym.cli import app as cli

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app))
    episodes = tmp_path / "e.jsonl"
    episodes.write_text("")
    result = CliRunner().invoke(
        cli,
        [
            "view",
            str(episodes),
            "--index",
            str(tmp_path / "i.db"),
            "--allow-origin",
            "http://127.0.0.1:9999",
        ],
    )
    assert result.exit_code == 0, result.output
    client = TestClient(served["app"], base_url="http://127.0.0.1:8765")
    assert client.get("/", headers={"Origin": "http://127.0.0.1:9999"}).status_code == 200
    assert client.get("/", headers={"Origin": "http://evil.example"}).status_code == 403
