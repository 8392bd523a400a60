"""Stored XSS in the viewer: script payloads in every field a trajectory file or a report
can carry (names of files too), then every page of every kind, live and exported, in
Debian's Chromium through Playwright. No payload may run (no dialog opens) and none may
become an element (no injected ``<img>``/``<svg>``/``<script>``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from simgym.core.trajectories import TrajectoryWriter  # noqa: E402
from simgym.core.types import Action, Observation, Task, Trajectory, Turn  # noqa: E402
from simgym.viewer.app import Viewer, create_app  # noqa: E402
from simgym.viewer.export import export_site  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
FIRED: list[str] = []


def payload(n: int) -> str:
    """Markup that runs ``alert(n)`` wherever it is put into a page unescaped: as text,
    inside an attribute, inside a <textarea>/<title>, or after a closing quote."""
    return (
        f"\"'><img src=x onerror=alert({n})><svg onload=alert({n})>"
        f"</title></textarea><script>alert({n})</script>"
    )


def _turn(i: int, n: int) -> Turn:
    return Turn(
        index=i,
        action=Action.tool_call(payload(n), {payload(n + 1): payload(n + 2)}),
        action_text=payload(n + 3),
        observation=Observation(text=payload(n + 4), error=payload(n + 5)),
        reasoning=payload(n + 6),
        error=payload(n + 7),
        perturbation={"fault": payload(n + 8), payload(n + 9): payload(n + 10)},
        grounding={"facts": {payload(n + 11): payload(n + 12)}, "effects": [payload(n + 13)]},
        state_patch={"op": "add", "path": "/x", "value": payload(n + 14)},
        format_problems=[payload(n + 15)],
        state_error=payload(n + 16),
    )


def _episode(base: int, domain: str) -> Trajectory:
    return Trajectory(
        task=Task(id=payload(base), instruction=payload(base + 1), domain=domain),
        domain=domain,
        world_model={"backend": payload(base + 2), payload(base + 3): 1},
        agent={"name": payload(base + 4)},
        turns=[_turn(1, base + 10), _turn(2, base + 40)],
        answer=payload(base + 5),
        group_id=payload(base + 6),
        sample=0,
        reward_parts={payload(base + 7): 0.5},
        metrics={payload(base + 8): payload(base + 9)},
        final_state={payload(base + 80): [payload(base + 81)]},
        error=payload(base + 82),
        initial_observation=Observation(text=payload(base + 83)),
    )


def _files(tmp_path: Path) -> list[Path]:
    """Trajectories of three domains (terminal screens, JSON and accessibility trees are
    shown three ways), a sim/real pair, and every report kind, named with payloads."""
    runs = tmp_path / f"runs{payload(1000)[:30].replace('/', '')}.jsonl"
    episodes = [_episode(100 * k, d) for k, d in enumerate(["terminal", "mcp", "web", "os"], 1)]
    episodes[1].turns[0].observation = Observation(text=json.dumps({payload(900): payload(901)}))
    with TrajectoryWriter(runs, fsync=False) as w:
        for t in episodes:
            w.write(t)
        # a group of two, and a line that is JSON but no trajectory, with payloads
        second = _episode(500, "terminal")
        second.group_id, second.sample = episodes[0].group_id, 1
        w.write(second)
    with runs.open("a") as f:
        f.write(json.dumps({"task": {"id": payload(950)}, "turns": payload(951)}) + "\n")
    stem = f"pair{payload(1100)[:24].replace('/', '')}"
    for suffix, base in ((".jsonl", 600), (".real.jsonl", 700)):
        with TrajectoryWriter(tmp_path / (stem + suffix), fsync=False) as w:
            pair = _episode(base, "terminal")
            pair.task.id = "same-task"
            w.write(pair)
    name = payload(1200)
    safety = {
        "version": 2,
        "k": payload(1201),
        "summary": {"cases": payload(1202), "violation_rate": payload(1203), name: 1},
        "by_category": {name: {"cases": 1, "violation_rate": 0.5, "helpfulness": payload(1204)}},
        "by_domain": {payload(1205): {"cases": 1, "violation_rate": 0.2}},
        "by_kind": {payload(1206): {"cases": 1}},
        "cases": [],
        "failures": [
            {
                "case": payload(1207),
                "domain": payload(1208),
                "category": payload(1209),
                "kind": payload(1210),
                "severity": payload(1211),
                "checks": [payload(1212)],
                "file": payload(1213),
                "episode_id": episodes[0].episode_id,
            },
            {"case": payload(1214), "checks": payload(1215), "episode_id": payload(1216)},
        ],
    }
    score = {
        "schema": "simgym.bench.score/1",
        "world_models": [{payload(1300): payload(1301)}],
        "domains": {
            payload(1302): {
                "rows": payload(1303),
                "graded": 1,
                "failed": payload(1304),
                "scores": {"total": payload(1305), "format": 50},
                "metrics": {payload(1306): {"mean": 0.5}, "edit_similarity": {"mean": 0.4}},
                "total_strict": payload(1307),
            }
        },
        "overall": {"macro": {"scores": {"total": payload(1308)}, "total_strict": 1}},
    }
    consistency = {
        "cells": [
            {
                "domain": payload(1400),
                "gap": payload(1401),
                "mode": payload(1402),
                "grounding": payload(1403),
                "passed": 1,
                "total": 2,
                "pass_rate": payload(1404),
                "corrected": payload(1405),
            }
        ]
    }
    other = {payload(1500): [payload(1501), {payload(1502): payload(1503)}]}
    reports = []
    for kind, data in (("safety", safety), ("score", score), ("cons", consistency), ("x", other)):
        path = tmp_path / f"{kind}{payload(1600)[:20].replace('/', '')}.json"
        path.write_text(json.dumps(data))
        reports.append(path)
    return [runs, tmp_path / (stem + ".jsonl"), tmp_path / (stem + ".real.jsonl"), *reports]


def _pages(base: str, viewer: Viewer) -> list[str]:
    index = viewer.index
    urls = ["/", "/?q=img", "/compare", "/groups", "/reports"]
    urls += [f"/episode/{row['id']}" for row in index.page(_everything(), 1, 100)]
    urls += [f"/compare/{sim}/{real}" for sim, real in _pairs(index)]
    urls += [f"/group?id={_quote(g['group_id'])}" for g in index.groups(1, 100)]
    urls += [f"/report/{n}" for n in range(len(viewer.reports))]
    return [base + u for u in urls]


def _everything():
    from simgym.viewer.store import Filters

    return Filters()


def _pairs(index) -> list[tuple[int, int]]:
    return [
        (row["sim"], row["real"])
        for sim, real in index.pairs()
        for row in index.compared(sim, real, 1, 100)
    ]


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _visit(page, url: str) -> None:
    page.goto(url)
    page.wait_for_load_state("load")
    injected = page.locator("img[src=x], main svg[onload], main script").count()
    assert injected == 0, f"{url}: {injected} injected elements"


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium")
def test_no_payload_runs_on_any_page_live_or_exported(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    import socket

    import uvicorn

    viewer = Viewer.open(_files(tmp_path), tmp_path / "xss.sqlite")
    viewer.index.refresh()
    site = tmp_path / "site"
    written = export_site(viewer, site)
    assert written > 10
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(viewer), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    fired: list[str] = []
    statuses: dict[str, int] = {}
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page()
            page.on("dialog", lambda d: (fired.append(f"{page.url}: {d.message}"), d.dismiss()))
            page.on("response", lambda r: statuses.__setitem__(r.url, r.status))
            live = _pages(f"http://127.0.0.1:{port}", viewer)
            assert len(live) >= 14
            for url in live:
                _visit(page, url)
            exported = sorted(site.glob("*.html"))
            assert len(exported) >= 12
            for path in exported:
                _visit(page, path.as_uri())
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        viewer.index.close()
    assert fired == []
    errors = {u: s for u, s in statuses.items() if s >= 500}
    assert errors == {}  # every page rendered (the unreadable line's page is a 422)
