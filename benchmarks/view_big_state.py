"""The viewer on an episode with a huge final state (issue 45): page size and time.

A real run kept a final state of 1,684 files (a venv), 43 MB of JSON; its episode page was
47.7 MB and took 22 s. This makes an episode of that shape (``--files`` files of
``--size`` bytes each), serves it through the viewer's app (FastAPI's TestClient, no
network), and measures the episode page, the state fetched when its fold opens, and the
raw JSON. For comparison it renders the state the way the page did before the change: the
whole state through the JSON view of the commit before (``--before``), nothing cut.

    .venv/bin/python benchmarks/view_big_state.py
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from simgym.core.trajectories import TrajectoryWriter
from simgym.core.types import Action, Observation, Task, Trajectory, Turn
from simgym.viewer.app import Viewer, create_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import save  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def episode(files: int, size: int) -> Trajectory:
    line = "import os, sys  # a line of a module in the venv\n"
    content = (line * (size // len(line) + 1))[:size]
    state = {"files": {f"/work/.venv/lib/python3.11/m{k}.py": content for k in range(files)}}
    turn = Turn(
        index=1,
        action=Action.say("pip install -r requirements.txt"),
        action_text="pip install -r requirements.txt",
        observation=Observation(text="Successfully installed 84 packages"),
    )
    return Trajectory(
        task=Task(id="big", instruction="set up the venv", domain="terminal"),
        domain="terminal",
        world_model={"backend": "function"},
        turns=[turn],
        final_state=state,
    )


def old_json_view(commit: str):  # noqa: ANN201 - the old module's json_block
    """``json_block`` as it was at ``commit`` (no string cap, no lazy state)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:src/simgym/viewer/blocks.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_blocks.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_blocks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.json_block


def timed(fn, repeats: int) -> tuple[float, object]:  # noqa: ANN001
    best, value = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1684)
    parser.add_argument("--size", type=int, default=25_500, help="bytes per file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", default="8a5fb1f~1", help="the commit before the change")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs.jsonl"
        t = episode(args.files, args.size)
        with TrajectoryWriter(runs, fsync=False) as writer:
            writer.write(t)
        line_mb = runs.stat().st_size / 1e6
        viewer = Viewer.open([runs], Path(tmp) / "index.sqlite")
        viewer.index.refresh()
        rows = []
        with TestClient(create_app(viewer), base_url="http://127.0.0.1") as client:
            for name, url in (
                ("episode page", "/episode/1"),
                ("state, when opened", "/episode/1/state"),
                ("state, raw JSON", "/episode/1/state.json"),
            ):
                seconds, response = timed(lambda url=url: client.get(url), args.repeats)
                assert response.status_code == 200, (url, response.status_code)
                rows.append({"what": name, "bytes": len(response.content), "seconds": seconds})
        viewer.index.close()
        json_block = old_json_view(args.before)
        seconds, html = timed(lambda: json_block(t.final_state), 1)
        rows.append({"what": "state inline, before", "bytes": len(html), "seconds": seconds})

    print(f"episode line {line_mb:.1f} MB ({args.files} files of {args.size} bytes)")
    for row in rows:
        print(f"{row['what']:<22} {row['bytes'] / 1e3:10.1f} kB  {row['seconds']:7.3f} s")
    page = rows[0]
    save(
        "view_big_state",
        rows=rows,
        summary={
            "episode_mb": round(line_mb, 1),
            "page_kb": round(page["bytes"] / 1e3, 1),
            "page_s": round(page["seconds"], 3),
            "state_before_mb": round(rows[-1]["bytes"] / 1e6, 1),
        },
        notes="Best of the repeats, through FastAPI's TestClient on the same machine. "
        "'state inline, before' is only the old JSON view of the state (the rest of the old "
        "page is extra); reading the episode line back is in every page's time.",
    )


if __name__ == "__main__":
    main()
