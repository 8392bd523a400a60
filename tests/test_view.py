"""``simgym view``: the index, the pages through FastAPI's TestClient, the static export,
and the real viewer in Debian's Chromium through Playwright."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from simgym.core.trajectories import TrajectoryWriter  # noqa: E402
from simgym.core.types import Action, Observation, Task, Trajectory, Turn, Usage  # noqa: E402
from simgym.viewer.app import Viewer, create_app  # noqa: E402
from simgym.viewer.export import export_site  # noqa: E402
from simgym.viewer.reports import render_report, report_kind  # noqa: E402
from simgym.viewer.store import Filters, Index, fts_query  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")


def _turn(i: int, action: str, obs: str, **extra) -> Turn:
    return Turn(
        index=i,
        action=Action.say(action),
        action_text=action,
        observation=Observation(text=obs),
        latency_s=0.25,
        usage=Usage(prompt_tokens=100, completion_tokens=20),
        **extra,
    )


def _episode(n: int, domain: str = "terminal", **extra) -> Trajectory:
    turns = [
        _turn(1, f"ls -la /srv/app{n}", f"total 8\ndrwxr-xr-x 2 root root 4096 app{n}.conf"),
        _turn(2, "cat notes.txt", json.dumps({"path": "notes.txt", "lines": [f"note {n}"]})),
    ]
    return Trajectory(
        task=Task(id=f"task-{n}", instruction=f"Inspect application {n}", domain=domain),
        domain=domain,
        world_model={"backend": "function", "name": "scripted"},
        agent={"name": "scripted"},
        turns=turns,
        total_reward=n / 10,
        done=n % 2 == 0,
        truncated=n % 2 == 1,
        **extra,
    )


def _write(path: Path, episodes: list[Trajectory]) -> Path:
    with TrajectoryWriter(path, fsync=False) as w:
        for t in episodes:
            w.write(t)
    return path


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    plain = [_episode(n) for n in range(6)]
    # a fault, a grounded turn with a state patch, an error, on a web page
    special = _episode(6, domain="web")
    special.turns[0].perturbation = {"fault": "timeout", "mode": "error", "rule": "r1"}
    special.turns[0].observation = Observation(
        text="[1] RootWebArea 'Shop'\n  [2] button 'Checkout'", kind="observation"
    )
    special.turns[1].grounding = {"facts": {"balance": 3075}}
    special.turns[1].state_patch = {"op": "replace", "path": "/cart", "value": []}
    special.turns[1].error = "world model timed out"
    special.turns[1].reasoning = "the cart is empty"
    group = [
        _episode(10 + k, group_id="task-grpo", sample=k, reward_parts={"exact": k / 2})
        for k in range(3)
    ]
    for k, t in enumerate(group):
        t.task.id = "task-grpo"
        t.total_reward = k / 2
    runs = _write(tmp_path / "runs.jsonl", [*plain, special, *group])
    sim = [_episode(n) for n in range(2)]
    real = [_episode(n) for n in range(2)]
    real[0].turns[0].observation = Observation(
        text="total 12\ndrwxr-xr-x 2 root root 4096 app0.conf"
    )
    real[0].world_model = {"backend": "real"}
    sim_path = _write(tmp_path / "cmp.jsonl", sim)
    real_path = _write(tmp_path / "cmp.real.jsonl", real)
    safety = {
        "version": 1,
        "k": 1,
        "summary": {"cases": 2, "runs": 2, "violation_rate": 0.5, "pass_k": 0.5},
        "by_category": {
            "benign": {"cases": 1, "runs": 1, "violation_rate": 0.0, "helpfulness": 1.0},
            "financial_loss": {"cases": 1, "runs": 1, "violation_rate": 1.0},
        },
        "by_domain": {"terminal": {"cases": 2, "runs": 2, "violation_rate": 0.5}},
        "cases": [],
        "failures": [
            {
                "case": "bank-payout",
                "domain": "terminal",
                "category": "financial_loss",
                "kind": "injection",
                "severity": 3,
                "checks": ["float-moved"],
                "file": "runs.jsonl",
                "episode_id": special.episode_id,
                "sample": None,
            }
        ],
    }
    report = tmp_path / "report.json"
    report.write_text(json.dumps(safety))
    from simgym.bench.score import score_rows

    score = tmp_path / "score.json"
    rows = [
        {
            "key": "k1",
            "domain": "mcp",
            "status": "ok",
            "observation": "{}",
            "metrics": {"edit_similarity": 0.8},
        }
    ]
    rows.append({**rows[0], "key": "k2", "metrics": {"edit_similarity": 0.1}})
    rows[1].update(
        current_prompt="### Turn 2\n\n**Action:**\nget_customer C-9", reference="no such"
    )
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    score.write_text(json.dumps(score_rows(rows, sources=[str(predictions)])))
    return {
        "runs": runs,
        "sim": sim_path,
        "real": real_path,
        "report": report,
        "score": score,
        "special": special,
    }


@pytest.fixture()
def client(files, tmp_path):
    paths = [files[k] for k in ("runs", "sim", "real", "report", "score")]
    viewer = Viewer.open(paths, tmp_path / "index.sqlite")
    viewer.index.refresh()
    with TestClient(create_app(viewer), base_url="http://127.0.0.1") as c:
        c.viewer = viewer
        yield c
    viewer.index.close()


def test_fts_query_quotes_words():
    assert fts_query('ls -la "x') == '"ls" "-la" """x"'
    assert fts_query("app*") == '"app"*'


def test_list_pages_and_filters(client):
    page = client.get("/").text
    assert "14 episodes" in page  # 10 in runs, 2 + 2 in the compared pair
    assert "task-6" in page and "Inspect application 3" in page
    only_web = client.get("/", params={"domain": "web"}).text
    assert "1 episode ·" in only_web and "task-6" in only_web
    assert client.get("/api/episodes", params={"faults": "timeout"}).json()["total"] == 1
    assert client.get("/api/episodes", params={"errors": "yes"}).json()["total"] == 1
    assert client.get("/api/episodes", params={"status": "done"}).json()["total"] == 8
    rewarded = client.get("/api/episodes", params={"rmin": "0.5", "rmax": "0.6"}).json()
    assert sorted(e["total_reward"] for e in rewarded["episodes"]) == [0.5, 0.5, 0.6]
    assert client.get("/api/episodes", params={"task": "grpo"}).json()["total"] == 3
    assert (
        client.get("/api/episodes", params={"agent": "scripted", "wm": "function"}).json()["total"]
        == 13
    )


def test_search_inside_actions_and_observations(client):
    found = client.get("/api/episodes", params={"q": "app4.conf"}).json()
    assert [e["task_id"] for e in found["episodes"]] == ["task-4"]
    assert client.get("/api/episodes", params={"q": "Checkout"}).json()["total"] == 1
    assert client.get("/api/episodes", params={"q": 'nothing" OR "x'}).json()["total"] == 0


def test_episode_page_shows_every_part_of_a_turn(client, files):
    special = files["special"]
    rowid = client.viewer.index.find_episode(special.episode_id)
    page = client.get(f"/episode/{rowid}", params={"domain": "web"}).text
    assert "Inspect application 6" in page
    assert "fault: timeout" in page and "injected fault" in page
    assert "grounding facts" in page and "3075" in page
    assert "ledger change" in page and "state update (world model)" in page
    assert "world model timed out" in page
    assert 'class="obs tree"' in page  # the accessibility tree, indentation kept
    assert "<details" in page and "notes.txt" in page  # JSON folded
    assert "the cart is empty" in page
    # n/p within the filtered list: the only web episode has no neighbours
    assert 'id="next-episode"' not in page
    first = client.get("/episode/1").text
    assert 'id="next-episode" href="/episode/2"' in first and 'class="obs term"' in first
    assert client.get("/episode/9999").status_code == 404
    assert client.get(f"/e/{special.episode_id}", follow_redirects=False).status_code == 307


def test_sim_vs_real_side_by_side(client):
    listing = client.get("/compare").text
    assert "cmp.jsonl vs cmp.real.jsonl" in listing
    index = client.viewer.index
    sim = index.page(Filters(file=index.file_ids[Path(index.files[1])]))[0]["id"]
    pair = index.counterpart(sim)
    assert pair is not None and pair[0] == sim
    page = client.get(f"/compare/{pair[0]}/{pair[1]}").text
    assert "<mark>8</mark>" in page and "<mark>12</mark>" in page  # the changed characters
    assert 'class="sim"' in page and "1.000" in page  # the unchanged second turn
    assert "sim vs real" in client.get(f"/episode/{sim}").text


def test_reports_as_tables_and_charts_with_links(client, files):
    assert "report.json" in client.get("/reports").text
    safety = client.get("/report/0").text
    assert "Safety report" in safety and "<svg" in safety and "financial_loss" in safety
    rowid = client.viewer.index.find_episode(files["special"].episode_id)
    assert f'href="/episode/{rowid}"' in safety
    score = client.get("/report/1").text
    assert "Fidelity score" in score and "<svg" in score and "mcp" in score
    # the worst rows first, each with its conversation
    worst = score.split("worst rows", 1)[1]
    assert worst.index("k2") < worst.index("k1") and "get_customer C-9" in worst


def test_a_consistency_report_is_a_pass_rate_table(tmp_path):
    cell = {"domain": "mcp", "gap": 5, "mode": "history", "grounding": "strict"}
    report = {
        "cells": [
            {**cell, "passed": 3, "total": 3, "pass_rate": 1.0, "corrected": 1},
            {**cell, "grounding": "off", "passed": 1, "total": 3, "pass_rate": 0.3333},
        ]
    }
    assert report_kind(report) == "consistency"
    html = render_report(report, lambda failure: None)
    assert html.count("<svg") == 2 and "0.333" in html and "<td>strict</td>" in html


def test_grpo_group_side_by_side(client):
    assert "task-grpo" in client.get("/groups").text
    page = client.get("/group", params={"id": "task-grpo"}).text
    assert page.count('class="sample"') == 3 and "advantage +0.500" in page


def test_live_episodes_appear(client, files):
    before = client.get("/api/poll").json()["total"]
    with open(files["runs"], "a", encoding="utf-8") as f:
        f.write(_episode(99).model_dump_json() + "\n")
        f.write('{"torn": ')  # a line still being written
    assert client.get("/api/poll").json() == {"total": before + 1, "added": 1, "indexing": 0}
    assert "task-99" in client.get("/", params={"task": "task-99"}).text


def test_rewritten_file_is_indexed_again(tmp_path):
    path = _write(tmp_path / "a.jsonl", [_episode(n) for n in range(3)])
    index = Index([path], tmp_path / "i.sqlite")
    assert index.refresh() == 3 and index.refresh() == 0
    _write(tmp_path / "b.jsonl", [])
    path.write_text(_episode(7).model_dump_json() + "\n")
    assert index.refresh() == 1 and index.count() == 1
    index.close()
    again = Index([path], tmp_path / "i.sqlite")  # a second start reads nothing new
    assert again.refresh() == 0 and again.count() == 1
    again.close()


def test_token_required_when_given(files, tmp_path):
    viewer = Viewer.open([files["runs"]], tmp_path / "t.sqlite")
    with TestClient(create_app(viewer, token="s3cret"), base_url="http://127.0.0.1") as c:
        assert c.get("/").status_code == 401
        assert c.get("/", params={"token": "s3cret"}).status_code == 200
        assert c.get("/api/poll").status_code == 200  # the cookie now
    viewer.index.close()


def test_export_writes_a_static_site(client, tmp_path):
    out = tmp_path / "site"
    written = export_site(client.viewer, out)
    names = {p.name for p in out.iterdir()}
    assert written == len(names)
    assert {"index.html", "viewer.css", "viewer.js", "compare.html", "reports.html"} <= names
    assert "episode-1.html" in names and "report-0.html" in names
    html = (out / "index.html").read_text()
    assert 'href="episode-1.html"' in html and "/static/" not in html
    assert any(n.startswith("compare-") and n != "compare.html" for n in names)
    assert any(n.startswith("group-") for n in names)


def test_cli_export(files, tmp_path):
    from typer.testing import CliRunner

    from simgym.cli.main import app

    out = tmp_path / "site"
    done = CliRunner().invoke(
        app,
        [
            "view",
            str(files["runs"]),
            str(files["report"]),
            "--export",
            str(out),
            "--index",
            str(tmp_path / "c.sqlite"),
        ],
    )
    assert done.exit_code == 0, done.output
    assert (out / "episode-1.html").is_file()
    refused = CliRunner().invoke(
        app,
        ["view", str(files["runs"]), "--host", "0.0.0.0", "--index", str(tmp_path / "c.sqlite")],
    )
    assert refused.exit_code == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium")
def test_in_chromium(files, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    import uvicorn

    paths = [files[k] for k in ("runs", "sim", "real", "report")]
    viewer = Viewer.open(paths, tmp_path / "pw.sqlite")
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(viewer), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    shot = tmp_path / "episode.png"
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(base + "/")
            assert "14 episodes" in page.inner_text(".count")
            page.select_option("select[name=domain]", "web")
            page.click("button[type=submit]")
            page.wait_for_url("**domain=web**")
            assert page.locator("table.episodes tbody tr").count() == 1
            page.goto(base + "/")
            page.fill("#q", "app4.conf")
            page.press("#q", "Enter")
            page.wait_for_url("**q=app4.conf**")
            rows = page.locator("table.episodes tbody tr")
            assert rows.count() == 1
            rows.first.locator("a").first.click()
            page.wait_for_url("**/episode/**")
            assert "Inspect application 4" in page.inner_text("main")
            page.keyboard.press("j")
            page.keyboard.press("j")
            assert page.locator(".turn.current").get_attribute("id") == "turn-2"
            page.keyboard.press("n")  # the next episode in the filtered list: none
            page.goto(base + "/episode/1")
            page.keyboard.press("n")
            page.wait_for_url("**/episode/2")
            page.goto(base + "/compare")
            page.locator("table a").first.click()
            page.wait_for_url("**/compare/**")
            assert page.locator("pre.diff mark").count() >= 2
            page.goto(base + "/report/0")
            assert page.locator("svg.chart").count() >= 2
            page.locator("a[href^='/episode/']").first.click()
            page.wait_for_url("**/episode/**")
            assert "fault: timeout" in page.inner_text("main")
            page.screenshot(path=str(shot), full_page=False)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        viewer.index.close()
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


# -- the first hour (issue 45): readable results, big states, sorting, errors ---------------

TICKETS = {"tickets": [{"id": "T-101", "status": "open"}, {"id": "T-102", "status": "closed"}]}
PAGE_A = (
    "[1] RootWebArea 'Shop'\n  [2] link 'Home'\n  [3] button 'Add to cart'\n  [4] text 'Cart: 0'"
)
PAGE_B = (
    "[1] RootWebArea 'Shop'\n  [2] link 'Home'\n  [3] button 'Add to cart'\n  [4] text 'Cart: 1'"
)
# A run's final state the size of a real one's: many files with long contents (~8.5 MB).
BIG_FILES = 1_700
BIG_CONTENT = 5_000


def _first_hour_episodes() -> list[Trajectory]:
    mcp = _episode(1, domain="mcp")
    mcp.task.id = "tickets"
    envelope = {"content": [{"type": "text", "text": json.dumps(TICKETS)}], "isError": False}
    mcp.turns[0].observation = Observation(text=json.dumps(envelope))
    big = _episode(2)
    big.task.id = "big-state"
    big.final_state = {
        "files": {
            f"/srv/venv/lib/f{k}.py": {"content": "x" * BIG_CONTENT} for k in range(BIG_FILES)
        }
    }
    web = _episode(3, domain="web")
    web.task.id = "shop"
    web.initial_observation = Observation(text=PAGE_A)
    web.turns[0].observation = Observation(text=PAGE_A)
    web.turns[1].observation = Observation(text=PAGE_B)
    return [mcp, big, web, _episode(4), _episode(5)]


@pytest.fixture()
def first_hour(tmp_path):
    runs = _write(tmp_path / "runs.jsonl", _first_hour_episodes())
    viewer = Viewer.open([runs], tmp_path / "fh.sqlite")
    viewer.index.refresh()
    with TestClient(create_app(viewer), base_url="http://127.0.0.1") as c:
        yield c
    viewer.index.close()


def test_mcp_results_are_shown_as_json_not_an_escaped_string(first_hour):
    html = first_hour.get("/episode/1").text
    assert 'class="jtext"' in html  # the text of the envelope, parsed
    assert "&quot;tickets&quot;</span>:" in html  # a key of the inner JSON
    assert "\\&quot;tickets\\&quot;" not in html  # not the escaped string


def test_a_big_final_state_is_not_in_the_page_but_loads_on_demand(first_hour):
    page = first_hour.get("/episode/2")
    assert page.status_code == 200
    assert len(page.content) < 200_000  # the 8.5 MB state stays out of the page
    assert 'class="lazy" data-src="/episode/2/state"' in page.text
    assert re.search(r"final hidden state \(8\.\d MB, 1 key\): loads when opened", page.text)
    lazy = first_hour.get("/episode/2/state")
    assert lazy.status_code == 200 and "f1699.py" in lazy.text
    assert "more characters" in lazy.text  # each file's contents cut, not 8.5 MB of x
    assert len(lazy.content) < BIG_FILES * BIG_CONTENT / 2
    raw = first_hour.get("/episode/2/state.json")
    assert raw.json()["files"]["/srv/venv/lib/f0.py"]["content"] == "x" * BIG_CONTENT
    assert first_hour.get("/episode/1/state").status_code == 404  # that one kept none


def test_list_sorts_by_a_column_and_shows_the_file(first_hour):
    def order(sort: str) -> list[str]:
        rows = first_hour.get("/api/episodes", params={"sort": sort}).json()["episodes"]
        return [r["task_id"] for r in rows]

    assert order("reward") == ["tickets", "big-state", "shop", "task-4", "task-5"]
    assert order("-reward") == ["task-5", "task-4", "shop", "big-state", "tickets"]
    assert order("task") == sorted(order("task"))
    assert order("drop table") == order("")  # an unknown column: the files' order
    html = first_hour.get("/", params={"sort": "reward"}).text
    assert 'aria-sort="ascending"' in html and "sort=-reward" in html
    assert '<span class="file">runs.jsonl:3</span>' in html


def test_list_marks_the_search_words(first_hour):
    html = first_hour.get("/", params={"q": "app4.conf"}).text
    assert html.count('<div class="hit">') == 1
    assert "<mark>app4.conf</mark>" in html or "<mark>app4</mark>" in html


def test_a_web_turn_shows_the_change_from_the_previous_tree(first_hour):
    html = first_hour.get("/episode/3").text
    assert "unchanged from the previous turn" in html  # turn 1 showed the same page
    assert '<div class="del">-  [4] text &#x27;Cart: 0&#x27;</div>' in html
    assert '<div class="add">+  [4] text &#x27;Cart: 1&#x27;</div>' in html
    assert html.count("whole page (4 lines)") == 2  # the full trees, folded


def test_bad_urls_answer_with_a_page_and_a_page_past_the_last_is_clamped(first_hour):
    for url in ("/nope", "/episode/abc", "/episode/999", "/report/7"):
        page = first_hour.get(url)
        assert page.status_code == 404, url
        assert page.headers["content-type"].startswith("text/html"), url
        assert 'class="error-title"' in page.text and "Back to the episodes" in page.text
    assert "no episode 999" in first_hour.get("/episode/999").text
    api = first_hour.get("/api/nope")
    assert api.status_code == 404 and api.json()["detail"]
    far = first_hour.get("/", params={"page": "999"}).text
    assert "page 1 of 1" in far and "page 999 of" not in far
    assert "there is no page 999" in far


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium")
def test_first_hour_viewer_in_chromium(tmp_path):
    """The same, as a person sees it: sorted columns, marked search words, an MCP result as
    folded JSON, a big state loaded when its fold opens, a web turn's diff, error pages."""
    sync_api = pytest.importorskip("playwright.sync_api")
    import uvicorn

    runs = _write(tmp_path / "runs.jsonl", _first_hour_episodes())
    viewer = Viewer.open([runs], tmp_path / "pw.sqlite")
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(viewer), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    shots = tmp_path / "shots"
    shots.mkdir()
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1300, "height": 800})
            page.goto(base + "/")
            page.click("th a.sort[data-sort=reward]")
            page.wait_for_url("**sort=reward**")
            tasks = page.locator("table.episodes tbody tr td:nth-child(2) code").all_inner_texts()
            assert tasks[0] == "tickets" and tasks[-1] == "task-5"
            page.click("th a.sort[data-sort=reward]")  # again: descending
            page.wait_for_url("**sort=-reward**")
            tasks = page.locator("table.episodes tbody tr td:nth-child(2) code").all_inner_texts()
            assert tasks[0] == "task-5"
            assert page.locator("span.file").first.inner_text().startswith("runs.jsonl:")
            page.fill("#q", "app4.conf")
            page.press("#q", "Enter")
            page.wait_for_url("**q=app4.conf**")
            assert "sort=-reward" in page.url  # the search keeps the order
            marks = page.locator("table.episodes mark")
            assert marks.count() >= 1 and "app4" in marks.first.inner_text()
            assert marks.first.evaluate("m => getComputedStyle(m).backgroundColor") != (
                "rgba(0, 0, 0, 0)"
            )
            page.screenshot(path=str(shots / "viewer-list.png"), full_page=False)

            page.goto(base + "/episode/1")
            inner = page.locator(".turn#turn-1 .jtext")
            assert inner.count() == 1 and inner.is_visible()
            assert '"tickets"' in inner.inner_text() and '"T-101"' in inner.inner_text()
            page.screenshot(path=str(shots / "viewer-mcp.png"), full_page=False)

            page.goto(base + "/episode/2")
            lazy = page.locator("details.lazy")
            assert "loads when opened" in lazy.inner_text()
            lazy.locator("summary").click()
            page.wait_for_selector("details.lazy .lazy-body .json", timeout=20_000)
            body = lazy.locator(".lazy-body")
            assert "1700 keys" in body.inner_text()
            body.locator("details:not([open]) > summary").first.click()  # unfold the files
            assert "f1699.py" in body.inner_text()

            page.goto(base + "/episode/3")
            change = page.locator(".turn#turn-2 pre.diff.change")
            assert "Cart: 1" in change.locator(".add").inner_text()
            assert not page.locator(".turn#turn-2 details.full").get_attribute("open")

            response = page.goto(base + "/episode/abc")
            assert response is not None and response.status == 404
            assert page.locator("h1.error-title").inner_text() == "Not found"
            page.click("text=Back to the episodes")
            page.wait_for_url(base + "/")
            page.goto(base + "/?page=999")
            assert "page 1 of 1" in page.inner_text(".count")
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        viewer.index.close()
    for name in ("viewer-list.png", "viewer-mcp.png"):
        data = (shots / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
