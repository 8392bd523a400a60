"""``simgym mcp import``: a real MCP server's tools as a scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

import simgym
from simgym.cli.errors import errors, friendly_errors
from simgym.core.errors import SimgymError
from simgym.core.safeload import read_scenario

mcp_app = typer.Typer(help="Work with real MCP servers.", no_args_is_help=True)


@mcp_app.command("import")
@friendly_errors
def mcp_import(
    out: Annotated[Path, typer.Option("--out", "-o", help="scenario YAML to write")],
    command: Annotated[
        str | None, typer.Option(help="start the server over stdio, e.g. 'python -m pkg.server'")
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="a streamable-HTTP server, e.g. http://127.0.0.1:8765/mcp")
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option(help="KEY=VALUE for a stdio server (repeatable)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the server")] = 30.0,
    output_format: Annotated[str, typer.Option(help="mcp | json | text")] = "mcp",
    sample_records: Annotated[
        int,
        typer.Option(
            help="also read up to N records of each kind through the server's read-only "
            "tools (readOnlyHint, or list/search/get names where a tool has no "
            "annotations) into the twin's state; 0: none",
            min=0,
            max=1000,
        ),
    ] = 0,
) -> None:
    """Read a real MCP server's tools into a scenario for `simgym play mcp --scenario`."""
    from simgym.real.mcp_import import scenario_from_server_sync
    from simgym.real.mcp_sample import records_note

    if (command is None) == (url is None):
        raise SimgymError("give exactly one of --command or --url")
    if output_format not in ("mcp", "json", "text"):
        raise SimgymError(f"--output-format must be mcp, json or text, not {output_format!r}")
    variables: dict[str, str] = {}
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SimgymError(f"--env takes KEY=VALUE, got {item!r}")
        variables[key] = value
    scenario = scenario_from_server_sync(
        command=command,
        url=url,
        env=variables or None,
        timeout=timeout,
        output_format=output_format,  # type: ignore[arg-type]
        sample=sample_records,
    )
    simgym.get_domain("mcp").scenario(scenario)  # what we write must load back
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True), encoding="utf-8")
    names = ", ".join(t["name"] for t in scenario["tools"])
    errors.print(f"wrote {out}: server {scenario['server_name']!r} with tools {names}")
    note = records_note(scenario["state"])
    if sample_records and scenario["state"]:
        note += "; a sample: an id outside it is the world model's to answer, not 'not found'"
    errors.print(note, highlight=False)


@mcp_app.command("show")
@friendly_errors
def mcp_show(
    scenario: Annotated[Path, typer.Argument(help="a scenario YAML written by `mcp import`")],
) -> None:
    """Show an imported twin: its server, its tools (which only read) and its records."""
    from simgym.real.mcp_sample import records_note, why_not_read_only

    twin = simgym.get_domain("mcp").scenario(read_scenario(scenario))
    typer.echo(f"server {twin.server_name!r}: {len(twin.tools)} tools")
    for tool in twin.tools:
        reads = why_not_read_only(tool.model_dump(by_alias=False)) is None
        typer.echo(f"  {tool.name}{'  (reads only)' if reads else ''}")
    typer.echo(records_note(twin.state))
