"""``simgym view`` on a big file: writes N small episodes (default 100,000) as trajectory
JSONL, indexes them into SQLite (FTS5), and prints the time to the first page of the
episode list (through FastAPI's TestClient, HTTP included), cold (index built first) and
warm (a second start over the same index), plus a search and a filtered page.

    .venv/bin/python benchmarks/view_index.py [--episodes 100000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from results import save

from simgym.core.types import Action, Observation, Task, Trajectory, Turn
from simgym.viewer.app import Viewer, create_app

DOMAINS = ("terminal", "mcp", "search", "web")


def write_file(path: Path, n: int) -> None:
    template = Trajectory(
        task=Task(id="t", instruction="Find the config file and report its size"),
        domain="terminal",
        world_model={"backend": "local", "model": "smollm2-135m"},
        agent={"name": "scripted"},
        turns=[
            Turn(
                index=i,
                action=Action.say(f"ls -la /srv/{i}"),
                action_text=f"ls -la /srv/{i}",
                observation=Observation(text=f"total {i}\n-rw-r--r-- 1 root root 120 app.conf"),
            )
            for i in (1, 2)
        ],
    )
    with open(path, "w", encoding="utf-8") as f:
        for k in range(n):
            t = template.model_copy()
            t.episode_id = f"ep-{k}"
            t.task = Task(id=f"task-{k}", instruction=f"Find config {k} and report its size")
            t.domain = DOMAINS[k % len(DOMAINS)]
            t.total_reward = (k % 10) / 10
            t.done = k % 3 == 0
            f.write(t.model_dump_json() + "\n")


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, db = Path(tmp) / "episodes.jsonl", Path(tmp) / "index.sqlite"
        _, seconds = timed(lambda: write_file(path, args.episodes))
        size = path.stat().st_size / 1e6
        print(f"wrote {args.episodes} episodes ({size:.1f} MB) in {seconds:.1f} s")

        viewer = Viewer.open([path], db)
        started = time.perf_counter()
        client = TestClient(create_app(viewer, background=True), base_url="http://127.0.0.1")
        page, cold = timed(lambda: client.get("/"))
        assert page.status_code == 200 and "task-0" in page.text
        print(
            f"cold start (nothing indexed): first page {cold:.2f} s "
            f"({len(page.content) / 1e3:.0f} kB), {viewer.index.count()} episodes indexed by then"
        )
        while viewer.index.indexing:
            time.sleep(0.1)
        print(f"whole file indexed in the background after {time.perf_counter() - started:.1f} s")
        viewer.index.close()

        viewer = Viewer.open([path], db)
        client = TestClient(create_app(viewer), base_url="http://127.0.0.1")
        page, warm = timed(lambda: client.get("/"))
        assert page.status_code == 200
        print(f"warm start (index on disk): first page {warm * 1000:.0f} ms")
        _, later = timed(lambda: client.get("/", params={"page": 1000}))
        print(f"page 1000: {later * 1000:.0f} ms")
        found, search = timed(lambda: client.get("/api/episodes", params={"q": "config 77777"}))
        print(f"search 'config 77777': {search * 1000:.0f} ms, {found.json()['total']} hits")
        _, filtered = timed(
            lambda: client.get("/", params={"domain": "web", "rmin": "0.5", "status": "done"})
        )
        print(f"filtered first page (domain, reward, done): {filtered * 1000:.0f} ms")
        _, episode = timed(lambda: client.get("/episode/50000"))
        print(f"episode page: {episode * 1000:.0f} ms")
        viewer.index.close()
    save(
        "view_index",
        summary={
            "episodes": args.episodes,
            "file_mb": round(size, 1),
            "cold_first_page_s": round(cold, 3),
            "warm_first_page_ms": round(warm * 1000, 1),
            "page_1000_ms": round(later * 1000, 1),
            "search_ms": round(search * 1000, 1),
            "filtered_page_ms": round(filtered * 1000, 1),
            "episode_page_ms": round(episode * 1000, 1),
        },
        notes="simgym view over one big trajectory file, HTTP included (FastAPI TestClient).",
    )


if __name__ == "__main__":
    main()
