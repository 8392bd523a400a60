"""``simgym world``: fictional worlds (a typer sub-app, ``world_app``).

``new`` writes a world JSON from a theme and a seed, ``show`` summarizes one, ``check``
runs its constraints and reads its pages back, ``tasks`` writes verifiable tasks (JSONL
for ``simgym run``) and ``scenario`` writes a search or MCP episode file over it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from simgym.cli.console import make_console
from simgym.cli.errors import errors, friendly_errors
from simgym.worlds.generate import World, WorldError, check_world, generate_world
from simgym.worlds.render import (
    DEFAULT_MAX_CHARS,
    Ref,
    check_pages,
    mcp_scenario,
    search_scenario,
)
from simgym.worlds.tasks import TASK_KINDS, generate_tasks, task_lines
from simgym.worlds.themes import THEMES

world_app = typer.Typer(
    help="Fictional worlds: generate, check, and turn into tasks and scenarios.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = make_console()

WorldFile = Annotated[Path, typer.Argument(help="a world JSON written by `simgym world new`")]
MaxChars = Annotated[
    int, typer.Option(help="largest scenario (characters) that may go into one prompt")
]


def _write(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")


@world_app.command("themes")
def themes() -> None:
    """List the themes a world can have."""
    table = Table("theme", "title", "tables")
    for theme in THEMES.values():
        table.add_row(theme.key, theme.title, ", ".join(e.table for e in theme.entities))
    console.print(table)


@world_app.command("new")
@friendly_errors
def new(
    theme: Annotated[str, typer.Option(help='a theme key or title, e.g. "regional bank"')],
    seed: Annotated[int, typer.Option(help="same theme and seed, same world")] = 0,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="world JSON to write (default: stdout)")
    ] = None,
) -> None:
    """Generate a world; deterministic in (theme, seed)."""
    world = generate_world(theme, seed)
    problems = check_world(world)
    if problems:  # a generator bug, never the user's input
        raise WorldError(f"the generated world breaks {len(problems)} constraints: {problems[0]}")
    _write(world.to_json(), out)
    counts = ", ".join(f"{len(rows)} {table}" for table, rows in world.tables.items())
    errors.print(f"{escape(world.title)}: {world.row_count()} rows ({counts})", highlight=False)


@world_app.command("show")
@friendly_errors
def show(
    world_file: WorldFile,
    table: Annotated[str | None, typer.Option(help="print this table's rows")] = None,
    limit: Annotated[int, typer.Option(help="rows to print")] = 20,
) -> None:
    """Summarize a world, or print rows of one table."""
    world = World.load(world_file)
    if table is None:
        console.print(f"[bold]{escape(world.title)}[/] — {escape(world.description)}")
        console.print(
            f"theme {world.theme}, seed {world.seed}, today {world.today}, site {world.base_url}"
        )
        summary = Table("table", "rows", "columns")
        for entity in world.schema.entities:
            columns = ", ".join(a.name for a in entity.attrs)
            summary.add_row(entity.table, str(len(world.tables.get(entity.table, []))), columns)
        console.print(summary)
        return
    if table not in world.tables:
        raise WorldError(f"no table {table!r}; tables: {', '.join(world.tables)}")
    rows = world.tables[table]
    view = Table(*rows[0].keys()) if rows else Table()
    for row in rows[:limit]:
        view.add_row(*(escape(str(v)) for v in row.values()))
    console.print(view)
    if len(rows) > limit:
        console.print(f"... {len(rows) - limit} more rows")


@world_app.command("check")
@friendly_errors
def check(
    world_file: WorldFile,
    pages: Annotated[bool, typer.Option(help="also render every page and read it back")] = True,
) -> None:
    """Run the world's constraints (exit 1 if any fails)."""
    world = World.load(world_file)
    problems = check_world(world)
    if pages and not problems:
        problems = check_pages(world)
    for line in problems[:50]:
        errors.print(f"[red]✗[/] {escape(line)}", highlight=False)
    if problems:
        more = " (first 50 shown)" if len(problems) > 50 else ""
        errors.print(f"{len(problems)} problems{more}")
        raise typer.Exit(1)
    rules = len(world.schema.rules)
    done = " and its pages" if pages else ""
    plural = "s" if rules != 1 else ""
    console.print(f"ok: {world.row_count()} rows pass the schema, {rules} rule{plural}{done}")


@world_app.command("tasks")
@friendly_errors
def tasks(
    world_file: WorldFile,
    out: Annotated[Path, typer.Option("--out", "-o", help="tasks JSONL to write")],
    count: Annotated[int, typer.Option(min=1, help="tasks to make")] = 50,
    domain: Annotated[str, typer.Option(help="search | mcp")] = "search",
    kinds: Annotated[
        str | None,
        typer.Option(help=f"comma-separated, of: {', '.join(TASK_KINDS)} (default: all that fit)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="another seed, other tasks")] = 0,
    neighbours: Annotated[int, typer.Option(min=0, help="unrelated rows added per table")] = 2,
    max_chars: MaxChars = DEFAULT_MAX_CHARS,
    oracle: Annotated[
        bool,
        typer.Option(help="add a reference solution as actions (--agent scripted replays it)"),
    ] = True,
) -> None:
    """Write verifiable tasks with ground-truth answers and reward specs."""
    world = World.load(world_file)
    chosen = [k.strip() for k in kinds.split(",") if k.strip()] if kinds else None
    made = generate_tasks(
        world,
        count,
        domain=domain,
        kinds=chosen,
        seed=seed,
        neighbours=neighbours,
        max_chars=max_chars,
    )
    _write(task_lines(made, world if oracle else None), out)
    tally: dict[str, int] = {}
    for task in made:
        tally[task.metadata["kind"]] = tally.get(task.metadata["kind"], 0) + 1
    parts = ", ".join(f"{n} {kind}" for kind, n in tally.items())
    errors.print(f"wrote {len(made)} {domain} tasks ({parts}) to {out}", highlight=False)


def _parse_rows(world: World, specs: list[str]) -> list[Ref]:
    refs: list[Ref] = []
    for spec in specs:
        table, sep, key = spec.partition(":")
        if not sep or not key:
            raise WorldError(f"--row takes TABLE:KEY (e.g. phones:PH-0001), got {spec!r}")
        if table not in world.tables:
            raise WorldError(f"--row {spec}: no table {table!r}; tables: {', '.join(world.tables)}")
        world.row(table, key)  # fails with a clear message when the key is missing
        refs.append((table, key))
    return refs


@world_app.command("scenario")
@friendly_errors
def scenario(
    world_file: WorldFile,
    out: Annotated[Path, typer.Option("--out", "-o", help="episode file (.yaml or .json)")],
    domain: Annotated[str, typer.Option(help="search | mcp")] = "search",
    row: Annotated[
        list[str] | None,
        typer.Option(help="TABLE:KEY of a row to include (repeatable; default: all rows)"),
    ] = None,
    table: Annotated[
        list[str] | None, typer.Option(help="mcp: a table to serve (repeatable; default: all)")
    ] = None,
    extra_rows: Annotated[
        int | None,
        typer.Option(help="mcp: serve the --row rows plus this many others per table"),
    ] = None,
    instruction: Annotated[str, typer.Option(help="the task to put in the episode file")] = "",
    max_chars: MaxChars = DEFAULT_MAX_CHARS,
) -> None:
    """Write an episode file (task, scenario, no actions) serving the world over the
    search engine or an MCP server; `simgym play DOMAIN --scenario FILE` opens it."""
    world = World.load(world_file)
    refs = _parse_rows(world, row or [])
    if domain == "search":
        if table or extra_rows is not None:
            raise WorldError("--table and --extra-rows apply to --domain mcp")
        built = search_scenario(world, refs or None, max_chars=max_chars)
    elif domain == "mcp":
        tables = list(table) if table else None
        if refs and tables is None:  # serve the tables of the chosen rows
            tables = [t for t in world.tables if any(t == r[0] for r in refs)]
        if refs and extra_rows is None:
            extra_rows = 0
        for name in tables or []:
            if name not in world.tables:
                raise WorldError(f"--table {name!r}: tables are {', '.join(world.tables)}")
        built = mcp_scenario(world, tables, refs, extra_rows=extra_rows, max_chars=max_chars)
    else:
        raise WorldError(f"--domain is search or mcp, not {domain!r}")
    episode: dict[str, Any] = {
        "domain": domain,
        "task": {
            "id": f"{world.theme}-{world.seed}-{domain}-scenario",
            "instruction": instruction,
        },
        "scenario": built,
        "actions": [],
    }
    if out.suffix == ".json":
        text = json.dumps(episode, indent=1, ensure_ascii=False) + "\n"
    elif out.suffix in (".yaml", ".yml"):
        text = yaml.safe_dump(episode, sort_keys=False, allow_unicode=True, width=100)
    else:
        raise WorldError(f"--out must end in .yaml, .yml or .json, got {out.name!r}")
    _write(text, out)
    errors.print(f"wrote a {domain} episode over {escape(world.title)} to {out}", highlight=False)
