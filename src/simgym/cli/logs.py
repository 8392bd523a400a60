"""``simgym logs``: turn a company's operation logs into a business world folder, and
look inside one (see simgym.logs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from simgym.cli.console import make_console
from simgym.cli.errors import errors, friendly_errors
from simgym.cli.options import WorldModelOptions, world_model_options
from simgym.cli.progress import CommandProgress

_FORMATS = "auto|otlp|ocel|xes|har|mcp|trajectories|jsonl|csv"

logs_app = typer.Typer(
    help="Business worlds from operation logs: import OpenTelemetry (otlp), OCEL 2.0 "
    "(ocel), XES (xes), HAR (har), MCP JSON-RPC (mcp), simgym trajectories "
    "(trajectories) and flat jsonl/csv logs into a world folder, and inspect it.",
    no_args_is_help=True,
)
_console = make_console()


@logs_app.command("import")
@friendly_errors
def import_logs(
    files: Annotated[list[Path], typer.Argument(help="log files, read as streams")],
    out: Annotated[Path, typer.Option("--out", "-o", help="the world folder to write")],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help=f"{_FORMATS}: otlp = OpenTelemetry OTLP JSON lines (Collector file "
            "exporter); ocel = OCEL 2.0 JSON or SQLite; xes = IEEE 1849 XES; har = HAR 1.2; "
            "mcp = MCP JSON-RPC lines; trajectories = simgym trajectory JSONL; jsonl/csv = "
            "flat rows (session,time,actor,role,operation,method,route,request,status,"
            "response); auto detects each file's format",
        ),
    ] = "auto",
    mask_key: Annotated[
        str, typer.Option(help="key of the pseudonyms: the same key gives the same ones")
    ] = "simgym",
    field_map: Annotated[
        Path | None,
        typer.Option(
            "--map",
            help="a mapping file (YAML or JSON): which attributes hold the body, response, "
            "actor, role, session, status, error and object ids (keys: body, response, "
            "actor, role, session, status, error, objects)",
        ),
    ] = None,
) -> None:
    """Read log files and write a business world: interface, entities, rules, sessions."""
    from simgym.core.errors import SimgymError
    from simgym.logs import FORMATS, READERS, ImportReport, build_world, read_logs
    from simgym.logs.mapping import load_map

    if format != "auto" and format not in FORMATS and format not in READERS.names():
        known = "|".join(["auto", *READERS.names()])  # plugins' readers included
        raise SimgymError(f"unknown format {format!r}; one of {known}")
    mapping = load_map(field_map) if field_map is not None else None
    report = ImportReport()
    try:
        manifest = build_world(
            read_logs(files, report, format=format, mapping=mapping),
            out,
            report=report,
            mask_key=mask_key,
        )
    except SimgymError as exc:
        # the cause is what was skipped: an unreadable file, a refused entity expansion
        if report.records == 0 or report.skipped_total:
            read = f"read {report.read} units, {report.records} records"
            skipped = f"; skipped {report.reasons()}" if report.skipped_total else ""
            raise SimgymError(f"{exc} ({read}{skipped})") from None
        raise
    for source in report.files:
        _console.print(
            f"{escape(source['path'])} [dim]({source['format']})[/]: read {source['read']}, "
            f"records {source['records']}, skipped {source['skipped']}",
            highlight=False,
        )
    counts = manifest["counts"]
    _console.print(
        f"[bold]{escape(str(out))}[/]: {counts['records']} records, {counts['sessions']} "
        f"sessions, {counts['operations']} operations, {counts['entity_types']} entity types; "
        f"skipped {report.skipped_total}",
        highlight=False,
    )
    for reason, n in report.skipped.most_common():
        where = report.first.get(reason)
        first = f" (first: {escape(where)})" if where else ""
        _console.print(f"  skipped {n}: {escape(reason)}{first}", highlight=False)
    _print_coverage(manifest.get("coverage") or {})


def _route_key(name: str) -> str:
    # "/loans/{id}" and "/loans/{loan_id}" are one route, however a log named it
    import re

    return re.sub(r"\{[^}]*\}", "{}", name)


def _objects_by_operation(coverage: dict) -> dict[str, str]:
    """Per operation, the objects its calls named: "loan 5/5" (calls naming one of
    that type, of all its calls)."""
    found: dict[str, dict[str, int]] = {}
    calls: dict[str, int] = {}
    for name, row in (coverage.get("operations") or {}).items():
        key = _route_key(name)
        calls[key] = calls.get(key, 0) + int(row.get("calls", 0))
        for otype, n in (row.get("object_types") or {}).items():
            found.setdefault(key, {})
            found[key][otype] = found[key].get(otype, 0) + int(n)
    return {
        key: ", ".join(f"{t} {n}/{calls[key]}" for t, n in types.items())
        for key, types in found.items()
    }


def _print_coverage(coverage: dict) -> None:
    """The coverage report: a loud line per problem first, then what was found."""
    from simgym.logs.coverage import summary_lines, warning_lines

    for line in warning_lines(coverage):
        # one line however narrow the terminal: a warning must not read as two
        _console.print(f"[bold red]{escape(line)}[/]", highlight=False, soft_wrap=True)
    for line in summary_lines(coverage):
        _console.print(escape(line), highlight=False, soft_wrap=True)


@logs_app.command("inspect")
@friendly_errors
def inspect(
    world: Annotated[Path, typer.Argument(help="a world folder written by `simgym logs import`")],
) -> None:
    """Show a world's operations, entity types and mined rules."""
    from simgym.core.errors import SimgymError

    try:
        manifest = json.loads((world / "manifest.json").read_text())
        interface = json.loads((world / "interface.json").read_text())
        entities = json.loads((world / "entities.json").read_text())
        rules = json.loads((world / "rules.json").read_text())
    except (OSError, ValueError) as exc:
        raise SimgymError(f"not a logs world folder: {world} ({exc})") from None
    counts = manifest.get("counts", {})
    _console.print(
        f"[bold]{escape(str(world))}[/]: {counts.get('records', 0)} records, "
        f"{counts.get('sessions', 0)} sessions, created {manifest.get('created_at', '?')}",
        highlight=False,
    )
    coverage = manifest.get("coverage")
    if not isinstance(coverage, dict):  # a world imported before coverage was kept
        from simgym.logs.coverage import recount

        coverage = recount(world)
    _print_coverage(coverage)
    perf = {row["operation"]: row for row in rules.get("performance", [])}
    ops = Table(title="operations")
    columns = ("operation", "calls", "arguments", "objects", "statuses", "error rate", "p50 ms")
    for column in columns:
        ops.add_column(column)
    objects_of = _objects_by_operation(coverage)
    for op in interface.get("operations", []):
        schema = op.get("arguments") or {}
        required = set(schema.get("required", []))
        args = ", ".join(
            f"{k}{'' if k in required else '?'}" for k in (schema.get("properties") or {})
        )
        row = perf.get(op["name"], {})
        ops.add_row(
            escape(op["name"]),
            str(op.get("calls", 0)),
            escape(args),
            escape(objects_of.get(_route_key(op["name"]), "-")),
            escape(" ".join(f"{k}×{v}" for k, v in op.get("statuses", {}).items())),
            f"{row.get('error_rate', 0):.0%}",
            str(row.get("p50_ms", "")),
        )
    _console.print(ops)
    types = Table(title="entity types")
    for column in ("type", "objects", "fields"):
        types.add_column(column)
    for name, info in entities.get("types", {}).items():
        fields = ", ".join((info.get("fields") or {}).get("properties", {}))
        types.add_row(escape(name), str(info.get("count", 0)), escape(fields))
    _console.print(types)
    table = Table(title="rules")
    table.add_column("kind")
    table.add_column("rule")
    table.add_column("count")
    for otype, cycle in rules.get("life_cycles", {}).items():
        for t in cycle.get("transitions", []):
            rule = f"{otype}: {t['from']} → {t['to']}"
            table.add_row("transition", escape(rule), str(t["count"]))
        for t in cycle.get("refused", []):
            rule = f"{otype}: {t['operation']} refused in {t['from']} ({t['status']})"
            table.add_row("refused", escape(rule), str(t["count"]))
    for p in rules.get("permissions", []):
        allowed = ", ".join(p.get("allowed_roles", [])) or "-"
        rule = f"{p['operation']}: role {p['role']} denied {p['status']} (allowed: {allowed})"
        table.add_row("permission", escape(rule), str(p["count"]))
    for r in rules.get("required_fields", []):
        rule = f"{r['operation']}: {r['field']} required ({r['status']})"
        table.add_row("required", escape(rule), str(r["count"]))
    _console.print(table)

    behaviour_path = world / "behaviour.json"
    if behaviour_path.is_file():
        _print_guards(json.loads(behaviour_path.read_text()))


def _print_guards(behaviour: dict) -> None:
    """The rules the twin enforces, a line per guard, in the order it checks them, with
    the kind of rule each is, and the changes a successful call makes."""
    from pydantic import ValidationError

    from simgym.core.errors import SimgymError
    from simgym.domains.mcp_rules import Guard, ParentEffect
    from simgym.logs.refusals import guard_kind

    table = Table(title="enforced by the twin (behaviour.json)")
    for column in ("tool", "kind", "refuses with", "when", "seen"):
        table.add_column(column)
    for tool, rules in behaviour.get("tools", {}).items():
        for raw in rules.get("guards", []):
            try:
                guard = Guard.model_validate(raw)
            except ValidationError as exc:
                # an edited behaviour.json: say which guard is wrong, never skip it
                raise SimgymError(
                    f"behaviour.json: a guard of {tool} is malformed: {exc}"
                ) from None
            answer = guard.answer
            code = answer.get("error", {}).get("code") if isinstance(answer, dict) else None
            status = "no status" if guard.status is None else str(guard.status)
            shown = f"{status} {code}" if code else status
            when = " and ".join(c.text() for c in guard.when) or "always"
            kind = guard_kind(raw)
            table.add_row(escape(tool), kind, escape(shown), escape(when), str(guard.support))
        sets = rules.get("sets") or {}
        if sets:
            table.add_row(escape(tool), "effect", "sets", escape(json.dumps(sets)), "")
        for raw in rules.get("parents", []):
            effect = ParentEffect.model_validate(raw)
            verb = "adds" if effect.op == "add" else "sets"
            text = (
                f"{effect.collection} named by {effect.via}: {effect.field} {verb} "
                f"the record's {effect.source}"
            )
            table.add_row(escape(tool), "effect", "linked record", escape(text), "")
    _console.print(table)


@logs_app.command("eval")
@friendly_errors
@world_model_options
def eval_twin(
    files: Annotated[list[Path], typer.Argument(help="training log files of one system")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="folder for the training world and eval.json")
    ],
    heldout: Annotated[
        list[Path] | None,
        typer.Option(
            "--heldout",
            help="held-out log file (repeat for more): every session of FILES trains, "
            "these are replayed; without it a --holdout share of FILES' sessions is",
        ),
    ] = None,
    format: Annotated[str, typer.Option(help="the logs' format, or auto")] = "auto",
    holdout: Annotated[float, typer.Option(help="share of sessions held out")] = 0.2,
    seed: Annotated[int, typer.Option(help="the split's key")] = 0,
    grounding: Annotated[str, typer.Option(help="off | facts | strict")] = "strict",
    experience: Annotated[
        bool, typer.Option(help="retrieve from the training sessions' transitions")
    ] = False,
    max_sessions: Annotated[
        int | None, typer.Option(help="replay at most this many held-out sessions")
    ] = None,
    mask_key: Annotated[
        str, typer.Option(help="key of the pseudonyms: the same key gives the same ones")
    ] = "simgym",
    start_from_reads: Annotated[
        bool,
        typer.Option(
            help="a held-out session also starts with the records it reads before changing "
            "them (data from before the log began, as a snapshot gives it)"
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    *,
    wm: WorldModelOptions,
) -> None:
    """Fidelity of the twin: build a world from the training logs, replay held-out
    sessions through it, compare with what the real system logged. A world whose logs
    had no bodies or no object state is no twin: it is refused (exit status 1)."""
    from simgym.core.errors import SimgymError
    from simgym.logs.eval import NotATwin, evaluate

    if heldout is None and not 0 < holdout < 1:
        raise SimgymError(f"--holdout is a share between 0 and 1, not {holdout}")
    for path in heldout or []:
        if not path.is_file():
            raise SimgymError(f"--heldout {path}: no such file")
    try:
        # a bar on a terminal, a plain line every tenth of the sessions in a pipe (on
        # stderr: --json keeps stdout for the report)
        with CommandProgress(errors) as progress:
            bar = progress.add("held-out sessions")
            report = evaluate(
                [str(f) for f in files],
                out,
                format=format,
                heldout=[str(h) for h in heldout] if heldout else None,
                holdout=holdout,
                seed=seed,
                world_model=wm.build(),
                grounding=grounding,
                experience=experience,
                mask_key=mask_key,
                max_sessions=max_sessions,
                on_progress=progress.callbacks(bar)[1],
                start_from_reads=start_from_reads,
            )
    except NotATwin as exc:
        _console.print(f"[bold red]{escape(str(exc))}[/]", highlight=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(report, indent=2, default=str))
        return
    _print_eval(report)
    _console.print(f"report: {escape(str(out / 'eval.json'))}", highlight=False)


def _share(n: float | None, of: int | None = None) -> str:
    if n is None:
        return "-"
    return f"{n:.1%}" + (f" of {of}" if of is not None else "")


def _print_eval(report: dict) -> None:
    """The fidelity report as a table: a row per measure, a row per kind of refusal."""
    held = ", ".join(report.get("heldout") or []) or f"{report.get('holdout')} of the sessions"
    table = Table(title=f"twin fidelity on {report['sessions']} held-out sessions ({held})")
    table.add_column("measure")
    table.add_column("value")
    replayed = report["replayed"]
    table.add_row("calls replayed", f"{replayed} of {report['calls']}")
    for reason, n in report.get("not_replayed", {}).items():
        table.add_row("  not replayed", f"{n}: {escape(reason)}")
    table.add_row("JSON validity", _share(report.get("json_validity")))
    table.add_row(
        "outcome agreement (status and error code)",
        _share(report.get("outcome_agreement"), replayed),
    )
    table.add_row(
        "refusals answered with the right status and code",
        _share(report.get("refusals_answered"), report.get("refusals", 0)),
    )
    for kind, row in report.get("refusals_by_kind", {}).items():
        table.add_row(
            f"  {kind}",
            f"{_share(row['answered'], row['calls'])}; exact answer {_share(row['exact'])}",
        )
    sources = ", ".join(f"{k} {n}" for k, n in report.get("refusal_kind_from", {}).items())
    if sources:
        table.add_row("  kinds read from", escape(sources))
    table.add_row(
        "final-state agreement (field checks)",
        _share(report.get("final_state_agreement"), report.get("final_state_checks", 0)),
    )
    table.add_row(
        "model's share of answers (no rule or state decided)",
        _share(report.get("model_share"), replayed),
    )
    _console.print(table)
