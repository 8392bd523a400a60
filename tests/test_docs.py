"""The docs site builds, and the code in its tutorials and how-to guides works.

- ``mkdocs build --strict`` into a temporary folder passes (broken links, missing pages,
  a failing page generator all fail the build), offline: the built pages fetch nothing
  from another host.
- Every fenced code block in ``docs/tutorials`` and ``docs/howto`` is either run or
  marked. A marker is an HTML comment on the line before the block:

  - ``<!-- docs-test: needs-server -->`` (or ``needs-gpu``, ``needs-service``,
    ``needs-cluster``): the block needs something a CI machine does not have; Python is
    compiled, and every ``simgym ...`` line is checked against the typer app's command
    tree (subcommand, options, values) with the README checker.
  - ``<!-- docs-test: slow -->``: run only with ``-m slow`` (its command lines are still
    checked here).
  - ``<!-- docs-file: NAME -->``: the block is a file the next blocks use; it is written
    into the page's working folder under NAME (and parsed when it is YAML or JSON).
  - ``<!-- docs-test: output -->``: what a command prints; not run.

  Unmarked ``bash``/``python`` blocks run: a page's blocks run in order in one temporary
  folder, shell blocks with ``bash -e`` and ``.venv/bin`` first on ``PATH``, Python
  blocks with the venv's interpreter.
- Chromium opens the built site and checks a tutorial, the CLI reference and a results
  page whose plot image loads.
"""

from __future__ import annotations

import ast
import functools
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
import yaml
from test_readme_commands import CommandLine, _simgym_args, command_lines, problems

from simgym.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
VENV_BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
MARK = re.compile(r"<!--\s*docs-(test|file):\s*([^\s>]+)\s*-->")
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
SKIPPED = {"needs-server", "needs-gpu", "needs-service", "needs-cluster", "output"}
ENV = {
    **os.environ,
    "NO_MKDOCS_2_WARNING": "1",
    "DISABLE_MKDOCS_2_WARNING": "true",
    "NO_COLOR": "1",
    "COLUMNS": "200",
    "SIMGYM_RESULTS": "off",  # a tutorial that runs a benchmark must not write results
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    mark: str  # "run", "slow", "file:NAME", or one of SKIPPED

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        kind = "run"
        if mark:
            kind = f"file:{mark.group(2)}" if mark.group(1) == "file" else mark.group(2)
        found.append(
            Block(
                page=str(page.relative_to(DOCS)),
                line=text.count("\n", 0, match.start()) + 1,
                lang=match.group(1),
                code=match.group(2),
                mark=kind,
            )
        )
    return found


PAGES = sorted([*DOCS.glob("tutorials/*.md"), *DOCS.glob("howto/*.md")])
BLOCKS = [b for page in PAGES for b in blocks(page)]
RUNNABLE_PAGES = sorted({b.page for b in BLOCKS if b.mark in ("run", "slow")})


def test_the_pages_have_code_of_every_kind() -> None:
    """The extraction itself: without blocks the other tests would pass vacuously."""
    assert len(PAGES) >= 13
    marks = {b.mark.split(":")[0] for b in BLOCKS}
    assert {"run", "file", "needs-server"} <= marks, marks
    assert sum(b.mark == "run" for b in BLOCKS) >= 10


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_block_is_marked_or_runnable(block: Block) -> None:
    """Every block is a known kind: runnable code, a file, output, or marked as needing more."""
    known = {"run", "slow", *SKIPPED}
    assert block.mark in known or block.mark.startswith("file:"), block.mark
    if block.mark in ("run", "slow"):
        assert block.lang in ("bash", "python"), f"{block.id}: run a {block.lang!r} block how?"


@functools.cache
def _root_command():
    return typer.main.get_command(app)


def _shell_lines(block: Block) -> list[CommandLine]:
    fence = f"```bash\n{block.code}```\n"
    return command_lines(fence)


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.lang in ("bash", "python")], ids=lambda b: b.id
)
def test_block_syntax_and_flags(block: Block) -> None:
    """Python compiles; each simgym command line fits the CLI (run or not)."""
    if block.lang == "python":
        ast.parse(block.code, filename=block.id)
        # simgym commands inside subprocess calls in Python are checked too
        for text in re.findall(r"\[\s*\"simgym\"[^\]]*\]", block.code):
            args = tuple(ast.literal_eval(text)[1:])
            assert problems(CommandLine(block.line, text, args), _root_command()) == []
        return
    done = subprocess.run(["bash", "-n"], input=block.code, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr
    for entry in _shell_lines(block):
        assert problems(entry, _root_command()) == [], f"{block.id}: {entry.text}"


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.mark.startswith("file:")], ids=lambda b: b.id
)
def test_file_blocks_parse(block: Block) -> None:
    name = block.mark.split(":", 1)[1]
    if name.endswith((".yaml", ".yml")):
        assert yaml.safe_load(block.code) is not None
    elif name.endswith(".json"):
        json.loads(block.code)
    elif name.endswith(".jsonl"):
        for line in block.code.splitlines():
            if line.strip():
                json.loads(line)


def _run_page(page: str, tmp_path: Path, *, slow: bool) -> None:
    env = {**ENV, "PATH": f"{VENV_BIN}{os.pathsep}{ENV.get('PATH', '')}", "SIMGYM_REPO": str(ROOT)}
    for block in (b for b in BLOCKS if b.page == page):
        if block.mark.startswith("file:"):
            target = tmp_path / block.mark.split(":", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code, encoding="utf-8")
            continue
        if block.mark not in ("run", "slow") or (block.mark == "slow" and not slow):
            continue
        if block.lang == "bash":
            command = ["bash", "-e", "-c", block.code]
        else:
            command = [sys.executable, "-c", block.code]
        done = subprocess.run(
            command, cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600
        )
        assert done.returncode == 0, (
            f"{block.id} failed ({done.returncode}):\n{block.code}\n--- stdout\n"
            f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
        assert "Traceback (most recent call last)" not in done.stderr, done.stderr[-3000:]


@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_page_runs(page: str, tmp_path: Path) -> None:
    """The page's unmarked blocks run in order, as a reader would paste them."""
    _run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted({b.page for b in BLOCKS if b.mark == "slow"}) or ["(none)"])
def test_page_runs_with_slow_blocks(page: str, tmp_path: Path) -> None:
    if page == "(none)":
        pytest.skip("no slow blocks")
    _run_page(page, tmp_path, slow=True)


def test_readme_python_example_runs(tmp_path: Path) -> None:
    """The README's Python example, as a visitor pastes it (embedded model, grounded turns)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = [m.group(2) for m in FENCE.finditer(readme) if m.group(1) == "python"]
    assert examples, "the README has no Python example"
    for code in examples:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=ENV,
            text=True,
            capture_output=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "buy milk" in done.stdout and "[1.0, 1.0]" in done.stdout, done.stdout[-2000:]
    assert (tmp_path / "runs.jsonl").is_file()


def _gen_pages():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_pages", DOCS / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("rows", "plotted"),
    [
        ([{"concurrency": c, "efficiency": 1 / c, "executor": "local"} for c in (1, 10)], True),
        ([{"domain": d, "exact_rate": 0.5} for d in ("mcp", "swe")], True),
        ([{"label": "a", "success": 0.5, "ci_low": 0.3, "ci_high": 0.7}], True),
        ([{"command": "ls", "median_ms": 3.0}], False),  # a table a reader reads, no plot
    ],
)
def test_results_pages_plot_the_shapes_readers_look_at(rows: list, plotted: bool) -> None:
    svg = _gen_pages()._plot({"rows": rows})
    assert (svg is not None and svg.lstrip().startswith(b"<?xml")) == plotted


def _gen_hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_hooks", DOCS / "gen_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results_folder(tmp_path: Path) -> Path:
    """Two runs of one benchmark, as benchmarks/results.py's save() writes them."""
    folder = tmp_path / "results" / "demo"
    folder.mkdir(parents=True)
    for time, commit, rate, mode in [
        ("2026-01-01T00:00:00Z", "a" * 40, 0.5, "quick"),
        ("2026-02-01T00:00:00Z", "b" * 40, 0.9735, "full"),
    ]:
        run = {
            "benchmark": "demo",
            "commit": commit,
            "dirty": False,
            "time": time,
            "command": f"python benchmarks/demo.py --{mode}",
            "machine": {"cpus": 2},
            "summary": {"rate": rate, "mode": mode, "missing": None},
            "rows": [
                {"domain": "mcp", "mode": "strict", "ms": 1.5},
                {"domain": "terminal", "mode": "off", "ms": 3.25},
                {"domain": "terminal", "mode": "strict", "ms": 2.0},
            ],
        }
        (folder / f"{time.replace(':', '').replace('-', '')}.json").write_text(json.dumps(run))
    return folder.parent


def test_result_placeholders_render_the_newest_value_with_its_run(tmp_path: Path) -> None:
    hooks = _gen_hooks()
    folder = _results_folder(tmp_path)
    page = (
        "Agreement {{ result:demo:summary.rate|pct }} and "
        "{{ result:demo:rows[domain=terminal][mode=strict].ms }} ms; the quick run gave "
        "{{ result:demo[mode=quick]:summary.rate }}.\n\n"
        "`{{ result:demo:summary.nothing }}` stays literal in code.\n\n"
        "{{ result-table:demo:rows:domain,ms }}\n"
    )
    out = hooks.render_results(page, "guide/logs.md", folder)
    assert "Agreement 97.4%[^result-1] and 2[^result-1] ms" in out
    assert "the quick run gave 0.5[^result-2]" in out  # filtered: the older run
    assert "`{{ result:demo:summary.nothing }}`" in out
    assert "| domain | ms |\n|---|---|\n| mcp | 1.5 |\n| terminal | 3.25 |" in out
    # the footnote links the run's section of its results page, with commit and command
    assert (
        "[^result-1]: [demo, run of 2026-02-01T00:00:00Z]"
        "(../results/demo.md#run-20260201T000000Z): commit `bbbbbbbbbb`, "
        "`python benchmarks/demo.py --full`"
    ) in out
    assert "[^result-2]: [demo, run of 2026-01-01T00:00:00Z]" in out
    assert "{{" not in out.replace("`{{ result:demo:summary.nothing }}`", "")


@pytest.mark.parametrize(
    "placeholder",
    [
        "{{ result:nobench:summary.rate }}",  # no results folder
        "{{ result:demo:summary.nothing }}",  # no such key
        "{{ result:demo:summary.missing }}",  # null: no silent blank
        "{{ result:demo:rows[domain=web].ms }}",  # no such row
        "{{ result:demo[mode=medium]:summary.rate }}",  # no such run
        "{{ result-table:demo:rows:domain,nocolumn }}",
    ],
)
def test_a_missing_result_fails_the_build(tmp_path: Path, placeholder: str) -> None:
    from mkdocs.exceptions import PluginError

    hooks = _gen_hooks()
    with pytest.raises(PluginError, match="guide/x.md"):
        hooks.render_results(f"A number: {placeholder}\n", "guide/x.md", _results_folder(tmp_path))


def test_the_guide_pages_quote_numbers_through_results_files() -> None:
    """The measured numbers the guide shows are placeholders, filled when the site builds."""
    pattern = _gen_hooks().PLACEHOLDER
    quoted = {
        page.name: len(pattern.findall(page.read_text(encoding="utf-8")))
        for page in DOCS.glob("guide/*.md")
    }
    for page in ("grounding.md", "logs.md", "viewer.md", "hidden-state.md", "real.md"):
        assert quoted[page] >= 2, (page, quoted[page])
    assert quoted["rollouts.md"] >= 1
    for page in [*DOCS.glob("**/*.md"), ROOT / "README.md"]:
        text = page.read_text(encoding="utf-8")
        assert "hand-recorded measurement table stood here" not in text, page
        assert "results/history.md" not in text, page


def test_a_broken_command_line_is_caught() -> None:
    """The flag check is not a rubber stamp."""
    text = "simgym run tasks.jsonl -o runs.jsonl --not-an-option 3"
    entry = CommandLine(0, text, _simgym_args(text) or ())
    assert any("no option --not-an-option" in p for p in problems(entry, _root_command()))


# -- the site ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [str(VENV_BIN / "mkdocs"), "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        env=ENV,
        text=True,
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out


def test_site_builds_strict_with_generated_pages(site: Path) -> None:
    cli = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    root = _root_command()
    for name in root.commands:  # every top-level command has its section
        assert f"simgym {name}</code>" in cli, name
    assert "--agent-base-url" in cli and "--world-model" in cli
    schema = json.loads((site / "reference/schemas/trajectory.json").read_text())
    assert "turns" in schema["properties"]
    assert (site / "reference/schemas/scenario-terminal.json").is_file()
    results = (site / "results/index.html").read_text(encoding="utf-8")
    assert "benchmarks/results" in results
    assert (site / "reference/api/index.html").read_text().count('class="doc doc-heading"') > 10
    logs = (site / "guide/logs/index.html").read_text(encoding="utf-8")
    assert "{{ result" not in logs and 'class="footnote"' in logs
    assert re.search(r'href="\.\./\.\./results/logs_eval/#run-\d{8}T\d{6}Z"', logs), "no run link"
    assert not (site / "results/history/index.html").exists()


def test_site_is_offline(site: Path) -> None:
    """No page loads a script, a style or a font from another host."""
    external = re.compile(
        r"""(?:src|href)=["']https?://(?!127\.0\.0\.1)[^"']+\.(?:js|css|woff2?)"""
    )
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not external.search(text), page
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Chromium at /usr/bin/chromium")
def test_site_in_chromium(site: Path) -> None:
    """A tutorial, the CLI reference and a results page with its plot, in a real browser."""
    from playwright.sync_api import sync_playwright

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", _free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    plotted = sorted(
        p.parent.name for p in site.glob("results/*/index.html") if "plots/" in p.read_text()
    )
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base}/tutorials/first-terminal/")
            assert "Your first simulated terminal" in page.title()
            assert page.locator("pre code").count() >= 3
            page.goto(f"{base}/reference/cli/")
            assert page.locator("h2:has-text('simgym run')").count() >= 1
            assert page.locator("td code:has-text('--out')").count() >= 1
            assert plotted, "no results page with a plot"
            page.goto(f"{base}/results/{plotted[0]}/")
            image = page.locator("article img").first
            image.scroll_into_view_if_needed()
            page.wait_for_function("img => img.complete", arg=image.element_handle())
            assert image.evaluate("img => img.naturalWidth") > 0
            page.screenshot(path="/tmp/docs-shot.png", full_page=False)
            browser.close()
    finally:
        server.shutdown()
