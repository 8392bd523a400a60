"""``simgym safety``: the test track (a typer sub-app, ``safety_app``).

``list`` prints the cases, one a line; ``run`` plays them with an agent k times and writes
trajectories and a report (``--real``: on real backends); ``agree`` plays the scripted
agents both ways and reports the sim-vs-real agreement of the minefield verdicts;
``report`` renders a report as Markdown or HTML; ``gate`` checks a report against a
policy and exits 1 when the policy is not met.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from simgym.cli.errors import errors, friendly_errors
from simgym.cli.options import (
    ExecutionOption,
    GroundingOption,
    WorldModelOptions,
    agent_options,
    grounding_options,
    world_model_options,
)
from simgym.cli.progress import CommandProgress
from simgym.cli.run import RetryErrorsOption

safety_app = typer.Typer(
    help="A test track for agents: safety cases, a report, and a gate before production.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

CaseFiles = Annotated[
    list[Path] | None,
    typer.Option("--cases", "-c", help="case files or folders (default: the shipped suite)"),
]


def _select(files: list[Path] | None, only: str | None, domain: str | None):
    from simgym.core.errors import SimgymError
    from simgym.safety.suite import load_cases

    cases = load_cases(list(files) if files else None)
    if domain:
        cases = [c for c in cases if c.domain == domain]
    if only:
        wanted = [w.strip() for w in only.split(",") if w.strip()]
        unknown = sorted(set(wanted) - {c.id for c in cases})
        if unknown:
            raise SimgymError(f"no such case(s): {', '.join(unknown)}")
        cases = [c for c in cases if c.id in wanted]
    return cases


@safety_app.command("list")
@friendly_errors
def list_cases(
    cases: CaseFiles = None,
    domain: Annotated[str | None, typer.Option(help="only this domain")] = None,
) -> None:
    """Print the cases, one a line: id, domain, category, kind, expected move."""
    for case in _select(cases, None, domain):
        typer.echo(f"{case.id}\t{case.domain}\t{case.category}\t{case.kind}\t{case.expected}")


@safety_app.command("run")
@friendly_errors
@world_model_options
def run(
    out: Annotated[Path, typer.Option("--out", "-o", help="folder for trajectories and report")],
    cases: CaseFiles = None,
    only: Annotated[str | None, typer.Option(help="comma-separated case ids")] = None,
    domain: Annotated[str | None, typer.Option(help="only this domain")] = None,
    agent: Annotated[
        str, typer.Option(help="careful | reckless (reference plays) | local | openai")
    ] = "careful",
    agent_base_url: Annotated[str | None, typer.Option()] = None,
    agent_model: Annotated[str | None, typer.Option()] = None,
    agent_model_path: Annotated[str | None, typer.Option()] = None,
    agent_temperature: Annotated[float | None, typer.Option()] = None,
    k: Annotated[int, typer.Option("-k", help="runs per case (pass^k: safe in all k)")] = 1,
    seed: Annotated[int | None, typer.Option(help="seed of worlds and temptations")] = None,
    concurrency: Annotated[int, typer.Option()] = 4,
    max_turns: Annotated[int, typer.Option()] = 12,
    grounding: GroundingOption = None,
    execution: ExecutionOption = "sandbox",
    perturb: Annotated[
        Path | None,
        typer.Option(help="faults on top of the temptations: a YAML/JSON perturbation spec"),
    ] = None,
    judge_base_url: Annotated[
        str | None,
        typer.Option(
            help="an OpenAI-compatible server for the LLM safety judge (likelihood x "
            "severity rubric); verdicts go to OUT/judge.jsonl and the report",
        ),
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option(help="the judge's model (default: the server's first)")
    ] = None,
    real: Annotated[
        bool,
        typer.Option(
            "--real",
            help="play on real backends (sandboxes, the records MCP server) instead of a "
            "world model; only the cases that run for real",
        ),
    ] = False,
    retry_errors: RetryErrorsOption = True,
    *,
    wm: WorldModelOptions,
) -> None:
    """Play the cases with an agent k times each; write OUT/trajectories.jsonl and
    OUT/report.json (a rerun resumes, retrying errored episodes), and print the summary.
    Exits 1 when an episode errored (it is not safe, and the report says why)."""
    from simgym.core.errors import SimgymError
    from simgym.perturb.curriculum import env_perturbations
    from simgym.rollout.episode import episode_error
    from simgym.safety.runner import arun_suite

    selected = _select(cases, only, domain)
    options = (
        {}
        if agent in ("careful", "reckless")
        else agent_options(agent, agent_base_url, agent_model, agent_model_path, agent_temperature)
    )
    judge = None
    if judge_base_url or judge_model:
        from simgym.safety.judge import SafetyJudge

        judge = SafetyJudge(judge_base_url, judge_model)
    if real:
        if perturb is not None:
            raise SimgymError("--perturb simulates faults; it does not apply with --real")
        with CommandProgress(errors) as progress:
            bar = progress.add("episodes")  # how many can run for real is known inside
            report = asyncio.run(
                arun_suite(
                    selected,
                    out,
                    executor="real",
                    agent=agent,
                    agent_options=options,
                    k=k,
                    seed=seed,
                    concurrency=min(concurrency, 2),
                    max_turns=max_turns,
                    judge=judge,
                    retry_errors=retry_errors,
                    on_done=lambda episode: progress.update(
                        bar, advance=1, failed=int(episode_error(episode) is not None)
                    ),
                )
            )
        skipped = report["real"]["skipped"]
        if skipped:
            errors.print(f"[dim]{len(skipped)} case(s) cannot run for real here (see report)[/]")
        _write_markdown(report, out)
        _exit_on_errors(report, out)
        return
    wm_name, wm_options = wm.spec()
    env_options = grounding_options(grounding, None, execution=execution)
    plan = env_perturbations(perturb, None, None, 0, seed=seed)
    if plan:  # simgym's faults (timeouts, rate limits, ...) on top, same seed same faults
        env_options["perturbations"] = plan
    errors.print(f"[dim]{len(selected)} case(s) x {k} run(s), agent {agent}[/]")
    with CommandProgress(errors) as progress:
        bar = progress.add("episodes")  # the total comes from on_start, after resuming
        report = asyncio.run(
            arun_suite(
                selected,
                out,
                agent=agent,
                agent_options=options,
                world_model=wm_name,
                world_model_options=wm_options,
                k=k,
                seed=seed,
                concurrency=concurrency,
                max_turns=max_turns,
                env_options=env_options,
                judge=judge,
                retry_errors=retry_errors,
                on_start=lambda todo: progress.update(bar, total=todo),
                on_done=lambda episode: progress.update(
                    bar, advance=1, failed=int(episode_error(episode) is not None)
                ),
            )
        )
    _write_markdown(report, out)
    _exit_on_errors(report, out)


def _write_markdown(report: dict, out: Path) -> None:
    from simgym.safety.render import to_markdown

    text = to_markdown(report)
    (out / "report.md").write_text(text, encoding="utf-8")
    typer.echo(text)
    errors.print(f"report in {out / 'report.json'} and {out / 'report.md'}")
    errors.print(
        f"[dim]episode links open in `simgym view {out / 'trajectories.jsonl'}`[/]",
        highlight=False,
    )


def _exit_on_errors(report: dict, out: Path) -> None:
    """Exit 1, with the first cause, when an episode errored: the run is not finished."""
    from rich.markup import escape

    errored = report.get("errors") or []
    if not errored:
        return
    first = errored[0]
    cause = " ".join(str(first.get("error")).split())[:500]
    errors.print(
        f"[bold red]{len(errored)} of {report['summary']['runs']} episode(s) errored[/] "
        f"(not safe); the first ({escape(str(first['case']))}): {escape(cause)}",
        highlight=False,
    )
    errors.print(f"rerun the same command to retry them (they are in {out})", highlight=False)
    raise typer.Exit(1)


@safety_app.command("agree")
@friendly_errors
@world_model_options
def agree(
    out: Annotated[Path, typer.Option("--out", "-o", help="folder for runs and agreement")],
    cases: CaseFiles = None,
    only: Annotated[str | None, typer.Option(help="comma-separated case ids")] = None,
    domain: Annotated[str | None, typer.Option(help="only this domain")] = None,
    agents: Annotated[
        str, typer.Option(help="comma-separated scripted agents whose plays to compare")
    ] = "reckless,careful",
    k: Annotated[int, typer.Option("-k", help="runs per case and side")] = 1,
    seed: Annotated[int | None, typer.Option(help="seed of worlds and temptations")] = None,
    concurrency: Annotated[int, typer.Option(help="simulated episodes at once")] = 4,
    real_concurrency: Annotated[int, typer.Option(help="real worlds at once")] = 2,
    max_turns: Annotated[int, typer.Option()] = 12,
    grounding: GroundingOption = None,
    execution: ExecutionOption = "sandbox",
    *,
    wm: WorldModelOptions,
) -> None:
    """Play the cases that run both ways in the simulator and on real backends with the
    scripted agents, and report how often the minefield verdicts agree: writes
    OUT/sim/AGENT and OUT/real/AGENT (safety reports) and OUT/agreement.json and .md."""
    from simgym.safety.agree import AGREEMENT, AGREEMENT_MD, agreement_markdown, arun_agreement

    selected = _select(cases, only, domain)
    names = tuple(a.strip() for a in agents.split(",") if a.strip())
    wm_name, wm_options = wm.spec()
    errors.print(f"[dim]{len(selected)} case(s) x {k} run(s) x {len(names)} agent(s), both ways[/]")
    report = asyncio.run(
        arun_agreement(
            selected,
            out,
            agents=names,
            k=k,
            seed=seed,
            world_model=wm_name,
            world_model_options=wm_options,
            env_options=grounding_options(grounding, None, execution=execution),
            concurrency=concurrency,
            real_concurrency=real_concurrency,
            max_turns=max_turns,
        )
    )
    typer.echo(agreement_markdown(report))
    errors.print(f"agreement in {out / AGREEMENT} and {out / AGREEMENT_MD}")


@safety_app.command("report")
@friendly_errors
def report(
    path: Annotated[Path, typer.Argument(help="a report.json written by `safety run`")],
    format: Annotated[str, typer.Option("--format", "-f", help="md | html")] = "md",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="file (default: stdout)")] = None,
    policy: Annotated[
        Path | None, typer.Option(help="policy YAML for the gate's result (default: strict)")
    ] = None,
    viewer: Annotated[
        str | None,
        typer.Option(
            help="link episodes to a running `simgym view` at this URL (default with -f html "
            "-o FILE: the viewer's pages of the run's episodes, exported beside FILE; "
            "else http://127.0.0.1:8765)"
        ),
    ] = None,
) -> None:
    """Render a report as Markdown or HTML: the gate's result, the tables with an overall
    row, every case (HTML), errored episodes, failures, each linked to its episode's page."""
    from simgym.core.errors import SimgymError
    from simgym.safety.gate import evaluate_gate, load_policy
    from simgym.safety.metrics import read_report
    from simgym.safety.render import to_html, to_markdown, viewer_link

    if format not in ("md", "html"):
        raise SimgymError(f"--format takes md or html, not {format!r}")
    data = read_report(path)
    breaches = evaluate_gate(data, load_policy(policy))
    name = f"policy {policy.name}" if policy else "the default policy"
    link = viewer_link(viewer) if viewer else None
    if link is None and format == "html" and out is not None:
        link = _exported_pages(data, path.parent, out)
    render = to_markdown if format == "md" else to_html
    text = render(data, link=link or viewer_link(), gate=breaches, policy_name=name)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")


def _exported_pages(data: dict, run: Path, out: Path):  # noqa: ANN202 (EpisodeLink | None)
    """Export the viewer's pages of the run's episodes to OUT_episodes/ beside ``out``
    and return links to them; None (links to a live viewer) when the run's
    trajectories.jsonl is not in the folder ``run`` or the viewer is not installed."""
    import tempfile

    from simgym.safety.runner import TRAJECTORIES

    trajectories = run / TRAJECTORIES
    if not trajectories.is_file():
        errors.print(f"[dim]no {trajectories}: episode links point at a live `simgym view`[/]")
        return None
    try:
        from simgym.viewer.app import Viewer
        from simgym.viewer.export import export_site
        from simgym.viewer.pages import Links
    except ImportError:
        errors.print("[dim]the viewer is not installed (simgym[view]): links need `simgym view`[/]")
        return None
    pages = out.parent / f"{out.stem}_episodes"
    with tempfile.TemporaryDirectory() as tmp:
        site = Viewer.open([trajectories], db=Path(tmp) / "index.sqlite")
        export_site(site, pages)
        static = Links(static=True)
        found = {
            row.get("episode_id"): site.failure_link(row, static)
            for case in data.get("cases") or []
            for row in case.get("episodes") or []
        }
    errors.print(f"episode pages in {pages}", highlight=False)

    def link(row: dict) -> str | None:
        page = found.get(row.get("episode_id"))
        return f"{pages.name}/{page}" if page else None

    return link


@safety_app.command("gate")
@friendly_errors
def gate(
    path: Annotated[Path, typer.Argument(help="a report.json written by `safety run`")],
    policy: Annotated[
        Path | None,
        typer.Option(
            help="policy YAML (default: no violation, errored episode, contradiction or "
            "check error at all)"
        ),
    ] = None,
) -> None:
    """Exit 0 when the report meets the policy, 1 (naming each breach) when it does not."""
    from simgym.safety.gate import evaluate_gate, load_policy
    from simgym.safety.metrics import read_report

    problems = evaluate_gate(read_report(path), load_policy(policy))
    if problems:
        for problem in problems:
            typer.echo(f"FAIL {problem}")
        typer.echo(f"gate closed: {len(problems)} breach(es) of the policy")
        raise typer.Exit(1)
    typer.echo("gate open: the report meets the policy")
