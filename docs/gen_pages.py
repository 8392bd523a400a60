"""Pages generated when the docs site builds (run by mkdocs-gen-files, see mkdocs.yml).

- ``reference/cli.md``: every command and option, walked from the click command tree
  that typer builds from :data:`simgym.cli.app` (so the page cannot drift from the CLI).
- ``reference/schemas.md`` and ``reference/schemas/*.json``: JSON Schemas of the
  trajectory, the task, each domain's scenario, the safety case and the world folder.
- ``results/index.md`` and ``results/<name>.md``: one page per benchmark, generated from
  ``benchmarks/results/<name>/*.json`` (written by ``benchmarks/results.py``'s ``save``),
  newest run first, with plots drawn by matplotlib where a reader would rather look.

Nothing here fetches anything: the build works offline.
"""

from __future__ import annotations

import html
import io
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))


# -- CLI reference ----------------------------------------------------------------------


def _cell(text: Any) -> str:
    """Text safe inside a markdown table cell."""
    return html.escape(" ".join(str(text).split())).replace("|", "\\|")


def _kind(param: Any) -> str:
    """The value type of a parameter, as a reader would name it."""
    if getattr(param, "is_flag", False) and not param.secondary_opts:
        return "flag"
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is None:
        return "text"
    name = getattr(annotation, "__name__", None) or str(annotation)
    return {"str": "text", "Path": "path", "int": "integer", "float": "number"}.get(name, name)


def _option_row(param: Any) -> str:
    names = ", ".join(f"`{n}`" for n in (*param.opts, *param.secondary_opts))
    kind = _cell(_kind(param))
    if param.multiple:
        kind += " (repeatable)"
    default = param.default
    if callable(default) or default in (None, (), [], False) or param.is_flag and not default:
        shown = ""
    else:
        shown = f"`{_cell(default)}`"
    required = " **required**" if param.required else ""
    return f"| {names} | {kind} | {shown} | {_cell(param.help or '')}{required} |"


def _command_page(path: list[str], command: Any, out: list[str]) -> None:
    import click

    context_class = getattr(command, "context_class", None) or click.Context
    ctx = context_class(command, info_name=" ".join(path))
    level = min(max(len(path), 2), 6)
    title = " ".join(path)
    out.append(f"{'#' * level} `{title}`\n")
    help_text = (command.help or command.short_help or "").strip()
    if help_text:
        out.append(help_text.split("\f")[0].strip() + "\n")
    usage = command.collect_usage_pieces(ctx)
    out.append(f"```text\nUsage: {title} {' '.join(usage)}\n```\n")
    params = command.get_params(ctx)
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    if arguments:
        out.append("| argument | type | required |\n|---|---|---|")
        for p in arguments:
            many = " (one or more)" if p.nargs == -1 else ""
            name = (p.metavar or p.name or "").upper()
            out.append(f"| `{name}` | {_cell(_kind(p))}{many} | {p.required} |")
        out.append("")
    if options:
        out.append("| option | type | default | help |\n|---|---|---|---|")
        out.extend(_option_row(p) for p in options)
        out.append("")
    if hasattr(command, "commands"):
        for name in sorted(command.commands):
            sub = command.commands[name]
            if getattr(sub, "hidden", False):
                continue
            _command_page([*path, name], sub, out)


def cli_reference() -> str:
    """Markdown for every command of the ``simgym`` CLI."""
    import typer.main

    from simgym.cli import app

    root = typer.main.get_command(app)
    out = [
        "# CLI reference\n",
        "Generated when the site builds from the command tree typer builds from "
        "`simgym.cli.app`; `simgym COMMAND --help` prints the same.\n",
    ]
    _command_page(["simgym"], root, out)
    return "\n".join(out) + "\n"


# -- JSON Schemas -----------------------------------------------------------------------


def _world_folder_schema() -> dict[str, Any]:
    """The world folder is files, not one pydantic model: describe each file's keys."""
    from simgym.logs import twin

    files = {}
    for name in sorted(set(twin.WORLD_FILES) | set(twin.WORLD_KEYS)):
        keys = sorted(twin.WORLD_KEYS.get(name, ()))
        files[name] = {
            "type": "object",
            "required_file": name in twin.WORLD_FILES,
            "properties": {key: {} for key in keys},
            "additionalProperties": not keys,
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "World folder (simgym logs import --out DIR)",
        "description": "The JSON files of a business world folder and the top-level keys "
        "each may hold (unknown keys are refused when the world loads).",
        "type": "object",
        "properties": files,
        "required": sorted(twin.WORLD_FILES),
    }


def schemas() -> dict[str, tuple[str, dict[str, Any]]]:
    """Name to (title, JSON Schema) for every file format users write or read."""
    from simgym.core.domain import domain_names, get_domain
    from simgym.core.types import Task, Trajectory
    from simgym.safety.cases import SafetyCase

    found: dict[str, tuple[str, dict[str, Any]]] = {
        "trajectory": (
            "Trajectory (one line of a runs JSONL file)",
            Trajectory.model_json_schema(),
        ),
        "task": ("Task", Task.model_json_schema()),
        "safety-case": ("Safety case (YAML)", SafetyCase.model_json_schema()),
        "world-folder": ("World folder", _world_folder_schema()),
    }
    for name in sorted(domain_names()):
        try:
            model = get_domain(name).scenario_model
        except Exception:  # a plugin that fails to load does not break the docs build
            continue
        found[f"scenario-{name}"] = (f"Scenario: {name}", model.model_json_schema())
    return found


def schema_page(found: dict[str, tuple[str, dict[str, Any]]]) -> str:
    out = [
        "# Schemas\n",
        "JSON Schemas generated from simgym's pydantic models when the site builds. Each is "
        "also a file beside this page, for editors and validators.\n",
    ]
    for name, (title, schema) in found.items():
        fields = schema.get("properties", {})
        out.append(f"## {title}\n")
        out.append(f"[`{name}.json`](schemas/{name}.json)\n")
        if fields:
            out.append("| field | type | description |\n|---|---|---|")
            required = set(schema.get("required", []))
            for key, spec in fields.items():
                kind = spec.get("type") or (
                    "ref"
                    if "$ref" in spec
                    else " or ".join(str(s.get("type", "object")) for s in spec.get("anyOf", []))
                )
                star = " (required)" if key in required else ""
                out.append(
                    f"| `{key}`{star} | {_cell(kind)} | {_cell(spec.get('description', ''))} |"
                )
            out.append("")
        out.append('??? note "The whole schema"\n')
        body = json.dumps(schema, indent=2)
        out.append("    ```json\n" + "\n".join("    " + line for line in body.splitlines()))
        out.append("    ```\n")
    return "\n".join(out) + "\n"


# -- results ----------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4g}"
    if isinstance(value, dict | list):
        return _cell(json.dumps(value)[:120])
    return _cell(value)


def _table(rows: list[dict[str, Any]], limit: int = 60) -> str:
    if not rows:
        return ""
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows[:limit]:
        lines.append("| " + " | ".join(_fmt(row.get(c, "")) for c in columns) + " |")
    if len(rows) > limit:
        lines.append(f"\n({len(rows) - limit} more rows in the JSON file)")
    return "\n".join(lines) + "\n"


def _numeric(rows: list[dict[str, Any]], key: str) -> bool:
    values = [r.get(key) for r in rows]
    return bool(values) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    )


def _plot(run: dict[str, Any]) -> bytes | None:
    """An SVG for the shapes of data a reader would rather look at, else None.

    - rows with ``concurrency``: every other numeric column against it (log x axis);
    - rows with ``domain`` and a numeric score: a bar chart by domain;
    - rows with ``success`` and ``ci_low``/``ci_high``: points with their intervals.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = run.get("rows") or []
    if not rows:
        return None
    fig = None
    if _numeric(rows, "success") and _numeric(rows, "ci_low") and _numeric(rows, "ci_high"):
        labels = [
            str(r.get("label") or r.get("policy") or r.get("name") or i) for i, r in enumerate(rows)
        ]
        y = [r["success"] for r in rows]
        low = [v - r["ci_low"] for v, r in zip(y, rows, strict=True)]
        high = [r["ci_high"] - v for v, r in zip(y, rows, strict=True)]
        # one line per run, labels on the y axis: readable however many runs there are
        fig, ax = plt.subplots(figsize=(7, 0.8 + 0.22 * len(rows)))
        ax.errorbar(y, range(len(y)), xerr=[low, high], fmt="o", capsize=3, markersize=4)
        ax.set_yticks(range(len(y)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel("success (95% interval)")
        ax.grid(axis="x", alpha=0.3)
    elif _numeric(rows, "concurrency"):
        preferred = ["efficiency", "steps_per_s", "cpu_ms_per_step", "of_bare", "seconds"]
        keys = [k for k in preferred if _numeric(rows, k)] or [
            k for k in rows[0] if k != "concurrency" and _numeric(rows, k)
        ]
        keys = keys[:3]
        if not keys:
            return None
        grouping = [k for k in ("delay_ms", "delay", "executor", "loop", "mode") if k in rows[0]]
        fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.2))
        axes = [axes] if len(keys) == 1 else list(axes)
        for ax, key in zip(axes, keys, strict=True):
            series: dict[str, list[tuple[float, float]]] = {}
            for r in rows:
                group = " ".join(
                    f"{r[g] * 1000:g} ms" if g == "delay" else str(r[g]) for g in grouping
                )
                series.setdefault(group, []).append((r["concurrency"], r[key]))
            for group, points in series.items():
                points.sort()
                ax.plot(*zip(*points, strict=True), marker="o", label=group or None)
            ax.set_xscale("log")
            ax.set_xlabel("episodes at once (concurrency)")
            ax.set_title(key, fontsize=9)
            ax.grid(alpha=0.3)
            if len(series) > 1:
                ax.legend(fontsize=6)
    elif all("domain" in r for r in rows) and len({r["domain"] for r in rows}) == len(rows):
        keys = [k for k in rows[0] if k != "domain" and _numeric(rows, k)]
        if not keys:
            return None
        # a score if there is one, else a latency, else the first numeric column; never
        # a column of zeros (a mode that did not run)
        keys = [k for k in keys if any(r[k] for r in rows)] or keys
        key = next(
            (k for k in keys if re.search(r"(rate|fidelity|similarity|f1)$", k)),
            next((k for k in keys if "median" in k), keys[0]),
        )
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.bar([str(r["domain"]) for r in rows], [r[key] for r in rows])
        ax.set_ylabel(key)
        ax.set_title(f"{key} by domain", fontsize=9)
    if fig is None:
        return None
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    return buffer.getvalue()


def results_pages() -> None:
    from results import load_all, results_dir

    folder = results_dir()  # SIMGYM_RESULTS_DIR moves it, as for the benchmarks themselves
    names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    index = [
        "# Results\n",
        "Every page here is generated when the site builds from the JSON files under "
        "`benchmarks/results/<name>/`, which each benchmark script writes with "
        "`benchmarks/results.py`'s `save()`: the numbers, the commit, the machine and the "
        "exact command. Newest run first. Rerun a benchmark and rebuild the site to add a "
        "run. A number quoted on another page links to the run it comes from.\n",
        "| benchmark | runs | newest | commit | machine |\n|---|---|---|---|---|",
    ]
    for name in names:
        runs = load_all(name, folder)
        if not runs:
            continue
        newest = runs[0]
        machine = newest.get("machine", {})
        index.append(
            f"| [{name}]({name}.md) | {len(runs)} | {newest.get('time', '')} | "
            f"`{newest.get('commit', '')[:10]}` | {machine.get('cpus', '?')} CPUs |"
        )
        page = [
            f"# {name}\n",
            f"Generated from `benchmarks/results/{name}/*.json`, newest first.\n",
        ]
        for i, run in enumerate(runs):
            machine = run.get("machine", {})
            dirty = " (with local changes)" if run.get("dirty") else ""
            # the id pages link to when they quote this run (docs/gen_hooks.py)
            anchor = "run-" + re.sub(r"[^0-9A-Za-z]", "", str(run.get("time", "")))
            page.append(f"## {run.get('time', 'unknown time')} {{ #{anchor} }}\n")
            page.append(
                f"- commit: `{run.get('commit', 'unknown')}`{dirty}\n"
                f"- machine: {machine.get('cpus', '?')} CPUs, {_cell(machine.get('cpu', '?'))}, "
                f"Python {machine.get('python', '?')}, "
                f"load {machine.get('load_average_at_end', [])}\n"
                f"- command: `{run.get('command', '')}`\n"
            )
            if run.get("notes"):
                page.append(run["notes"] + "\n")
            svg = _plot(run)
            if svg is not None:
                image = f"plots/{name}-{i}.svg"
                with mkdocs_gen_files.open(f"results/{image}", "wb") as f:
                    f.write(svg)
                page.append(f"![{name} plot, run of {run.get('time', '')}]({image})\n")
            if run.get("summary"):
                page.append("**Summary**\n\n" + _table([run["summary"]]))
            if run.get("rows"):
                page.append("**Rows**\n\n" + _table(run["rows"]))
        with mkdocs_gen_files.open(f"results/{name}.md", "w") as f:
            f.write("\n".join(page) + "\n")
    if len(index) == 4:
        index.append("| (no results files yet) | | | | |")
    with mkdocs_gen_files.open("results/index.md", "w") as f:
        f.write("\n".join(index) + "\n")


def main() -> None:
    with mkdocs_gen_files.open("reference/cli.md", "w") as f:
        f.write(cli_reference())
    found = schemas()
    for name, (_, schema) in found.items():
        with mkdocs_gen_files.open(f"reference/schemas/{name}.json", "w") as f:
            f.write(json.dumps(schema, indent=2) + "\n")
    with mkdocs_gen_files.open("reference/schemas.md", "w") as f:
        f.write(schema_page(found))
    results_pages()


# mkdocs-gen-files runs this file with runpy ("<run_path>"); tests import it for _plot.
if __name__ in ("__main__", "<run_path>"):
    main()
