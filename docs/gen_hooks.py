"""MkDocs hooks: results pages in the navigation, and numbers quoted from results files.

- ``on_files``: docs/gen_pages.py writes one ``results/<name>.md`` per benchmark folder at
  build time, so the names are not known when mkdocs.yml is written; this adds each to the
  nav (after the pages generators have run, before the nav is validated).
- ``on_page_markdown``: every measured number a page quotes is a placeholder filled from
  the newest results file of its benchmark (``benchmarks/results/<name>/*.json``, written
  by ``benchmarks/results.py``'s ``save``), with a footnote linking that run's section of
  the results page and naming its commit and command. A placeholder whose benchmark, run
  or value is missing fails the build: no number is left blank or typed by hand.

Placeholders (outside code; a code span or fence shows one literally)::

    {{ result:NAME:PATH }}              one value
    {{ result:NAME:PATH|FORMAT }}       formatted: pct (0.9735 -> 97.4%), pct0, or a
                                        Python format spec such as .2f or ,
    {{ result:NAME[KEY=VALUE]:PATH }}   the newest run whose summary (or top-level field)
                                        KEY equals VALUE, not simply the newest
    {{ result-table:NAME:PATH }}        on a line of its own: a list of rows (or one dict)
    {{ result-table:NAME:PATH:a,b,c }}  as a Markdown table, only columns a, b and c

PATH walks the run's JSON from the top: ``summary.outcome_agreement``, ``machine.cpus``,
``rows[domain=terminal].exact_rate`` (the first row whose ``domain`` is ``terminal``),
``rows[0].seconds``.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parent.parent

PLACEHOLDER = re.compile(
    r"\{\{\s*(?P<kind>result|result-table):(?P<name>[\w-]+)(?P<filters>(?:\[[^\]]*\])*)"
    r":(?P<rest>.+?)\s*\}\}"
)
# code fences and code spans are left alone, so a page can show a placeholder literally
CODE = re.compile(r"^(?P<fence>`{3,}|~{3,})[^\n]*\n.*?^(?P=fence)[ \t]*$|`[^`\n]+`", re.M | re.S)


def on_files(files: Any, config: Any) -> Any:
    generated = sorted(
        f.src_uri
        for f in files
        if f.src_uri.startswith("results/")
        and f.src_uri.endswith(".md")
        and f.src_uri != "results/index.md"
    )
    for section in config["nav"]:
        if isinstance(section, dict) and "Results" in section:
            entries = section["Results"]
            known = {next(iter(e.values())) if isinstance(e, dict) else e for e in entries}
            for uri in generated:
                if uri not in known:
                    name = uri.removeprefix("results/").removesuffix(".md")
                    entries.append({name: uri})
    return files


# -- numbers from results files ---------------------------------------------------------


def results_dir() -> Path:
    """Where the runs are (``SIMGYM_RESULTS_DIR``, as for benchmarks/results.py)."""
    return Path(os.environ.get("SIMGYM_RESULTS_DIR") or ROOT / "benchmarks" / "results")


def run_anchor(run: dict[str, Any]) -> str:
    """The id of a run's heading on its results page (docs/gen_pages.py writes it)."""
    return "run-" + re.sub(r"[^0-9A-Za-z]", "", str(run.get("time", "")))


def _runs(name: str, folder: Path) -> list[dict[str, Any]]:
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in (folder / name).glob("*.json")]
    return sorted(runs, key=lambda r: r.get("time", ""), reverse=True)


def _filters(text: str) -> list[tuple[str, str]]:
    found = []
    for item in re.findall(r"\[([^\]]*)\]", text):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"filter [{item}] is not KEY=VALUE")
        found.append((key.strip(), value.strip()))
    return found


def _matches(item: Any, filters: list[tuple[str, str]]) -> bool:
    return isinstance(item, dict) and all(
        key in item and str(item[key]) == value for key, value in filters
    )


def _select_run(name: str, filters: list[tuple[str, str]], folder: Path) -> dict[str, Any]:
    runs = _runs(name, folder)
    if not runs:
        raise LookupError(f"no results file under {folder / name}")
    for run in runs:
        if _matches({**run, **run.get("summary", {})}, filters):
            return run
    wanted = ", ".join(f"{k}={v}" for k, v in filters)
    raise LookupError(f"no run of {name} has {wanted}")


def _split_path(path: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in path:
        depth += (char == "[") - (char == "]")
        if char == "." and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def lookup(run: dict[str, Any], path: str) -> Any:
    """The value at PATH in a run (see the module's docstring); LookupError if absent."""
    value: Any = run
    for part in _split_path(path):
        key = part.split("[", 1)[0].strip()
        if key:
            if not isinstance(value, dict) or key not in value:
                raise LookupError(f"no {key!r} at {path!r}")
            value = value[key]
        selectors = re.findall(r"\[([^\]]*)\]", part)
        if selectors and not isinstance(value, list):
            raise LookupError(f"{part!r} in {path!r}: [...] selects from a list only")
        if len(selectors) == 1 and selectors[0].strip().isdigit():
            index = int(selectors[0])
            if index >= len(value):
                raise LookupError(f"no row {index} at {path!r}")
            value = value[index]
        elif selectors:  # [a=1][b=2]: the first row matching all of them
            wanted = _filters("".join(f"[{selector}]" for selector in selectors))
            chosen = [item for item in value if _matches(item, wanted)]
            if not chosen:
                raise LookupError(f"no row with {' and '.join(selectors)} at {path!r}")
            value = chosen[0]
    if value is None:
        raise LookupError(f"{path!r} is null in the results file")
    return value


def format_value(value: Any, spec: str = "") -> str:
    """A value as a page shows it: pct/pct0 for shares, a format spec, or a plain form."""
    spec = spec.strip()
    if spec in ("pct", "pct0"):
        return f"{float(value) * 100:.{0 if spec == 'pct0' else 1}f}%"
    if spec:
        return format(value, spec)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def _cell(value: Any) -> str:
    return " ".join(format_value(value).split()).replace("|", "\\|")


def _table(value: Any, columns: list[str]) -> str:
    rows = [value] if isinstance(value, dict) else value
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise LookupError("a result-table needs a list of rows (or one dict)")
    if not columns:
        for row in rows:
            columns += [c for c in row if c not in columns]
    missing = [c for c in columns if not any(c in row for row in rows)]
    if missing:
        raise LookupError(f"no column {', '.join(missing)} in these rows")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def render_results(markdown: str, page_uri: str, folder: Path | None = None) -> str:
    """Fill a page's placeholders from the results files; PluginError names what is missing.

    Args:
        markdown: the page's Markdown source.
        page_uri: the page's path under docs/ (``guide/logs.md``), for relative links.
        folder: the results folder (default: :func:`results_dir`).

    Returns:
        The Markdown with every placeholder replaced and one footnote per run quoted.
    """
    folder = folder or results_dir()
    notes: dict[str, tuple[str, str]] = {}  # run id -> (label, footnote text)
    here = posixpath.dirname(page_uri) or "."

    def source(name: str, run: dict[str, Any]) -> tuple[str, str]:
        key = f"{name}/{run.get('time', '')}"
        if key not in notes:
            label = f"result-{len(notes) + 1}"
            link = posixpath.relpath(f"results/{name}.md", here) + "#" + run_anchor(run)
            dirty = " with local changes" if run.get("dirty") else ""
            text = (
                f"[{name}, run of {run.get('time', '?')}]({link}): commit "
                f"`{str(run.get('commit', 'unknown'))[:10]}`{dirty}, "
                f"`{run.get('command', '?')}`"
            )
            notes[key] = (label, text)
        return notes[key]

    def replace(match: re.Match[str]) -> str:
        kind, name, rest = match["kind"], match["name"], match["rest"]
        try:
            run = _select_run(name, _filters(match["filters"]), folder)
            if kind == "result-table":
                path, _, cols = rest.partition(":")
                columns = [c.strip() for c in cols.split(",") if c.strip()]
                label, text = source(name, run)
                table = _table(lookup(run, path.strip()), columns)
                return f"{table}\n\n*From {text}.*\n"
            path, _, spec = rest.partition("|")
            shown = format_value(lookup(run, path.strip()), spec)
        except (LookupError, ValueError, TypeError, json.JSONDecodeError) as error:
            raise PluginError(f"{page_uri}: {match.group(0)}: {error}") from error
        label, _ = source(name, run)
        return f"{shown}[^{label}]"

    out, last = [], 0
    for code in CODE.finditer(markdown):
        out.append(PLACEHOLDER.sub(replace, markdown[last : code.start()]))
        out.append(code.group(0))
        last = code.end()
    out.append(PLACEHOLDER.sub(replace, markdown[last:]))
    text = "".join(out)
    used = [(label, note) for label, note in notes.values() if f"[^{label}]" in text]
    if used:
        footnotes = "\n".join(f"[^{label}]: {note}" for label, note in used)
        text = text.rstrip("\n") + "\n\n" + footnotes + "\n"
    return text


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return render_results(markdown, page.file.src_uri)
