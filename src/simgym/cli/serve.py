"""``simgym serve``: a simulated environment behind a protocol other programs speak.

``--mcp`` serves it as an MCP server (stdio or streamable HTTP), one simulated world per
MCP session (:mod:`simgym.integrations.mcp_server`); ``--openenv`` hands the same world to
:mod:`simgym.integrations.openenv_server` when that integration is present. The world is
``--domain``, ``--scenario`` (a scenario file, or an episode file with ``scenario:`` and
``task:``) and ``--task``, or ``--world DIR``: a business world's twin (``simgym logs
import``), grounded in its records as ``--grounding`` says; every episode is appended to
``--out``.

Importing this module adds :func:`serve` to the ``simgym`` command as ``simgym serve``
(:mod:`simgym.cli` imports it for that, the way :mod:`simgym.build` imports backends to
register them); either module may be imported first. ``python -m simgym.cli.serve`` runs
the command on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
import yaml
from rich.markup import escape

import simgym
from simgym.cli.errors import errors, friendly_errors
from simgym.cli.options import (
    ExecutionOption,
    ExperienceOption,
    GroundingOption,
    WorldModelOptions,
    WorldOption,
    grounding_options,
    reward_spec,
    scenario_domain,
    world_model_options,
    world_scenario_option,
    wrong_domain_message,
)
from simgym.core.errors import SimgymError
from simgym.core.safeload import load_yaml, read_text
from simgym.integrations.http_guard import TOKEN_ENV, require_token_off_loopback, resolve_token


@dataclass
class ServedWorld:
    """What every session starts from: a domain, its initial world and the task."""

    domain: str
    scenario: dict[str, Any] | None
    task: simgym.Task


def load_world(domain: str | None, scenario: Path | None, task: str | None) -> ServedWorld:
    """Read ``--domain``/``--scenario``/``--task``. An episode file (``scenario:`` beside
    or inside ``task:``, as ``simgym run`` reads) may name the domain and the task;
    ``--domain`` must agree, ``--task`` replaces the file's instruction. Any other mapping
    is the scenario itself."""
    data: dict[str, Any] | None = None
    file_task: dict[str, Any] = {}
    file_domain: str | None = None
    if scenario is not None:
        data = _read_mapping(scenario)
        raw_task = data.get("task")
        inner = raw_task.get("scenario") if isinstance(raw_task, dict) else None
        if isinstance(data.get("scenario"), dict) or isinstance(inner, dict):
            if isinstance(raw_task, str):
                file_task = {"instruction": raw_task}
            elif isinstance(raw_task, dict):
                file_task = dict(raw_task)
            elif raw_task is not None:
                raise SimgymError(f"{scenario}: 'task' must be a mapping or an instruction")
            file_domain = data.get("domain") or file_task.get("domain")
            data = data["scenario"] if isinstance(data.get("scenario"), dict) else inner
    if domain and file_domain and domain != file_domain:
        raise SimgymError(wrong_domain_message(str(scenario), file_domain, domain))
    name = domain or file_domain
    if not name:
        raise SimgymError("name the domain: --domain (or a scenario file with a 'domain:' key)")
    domain_obj = simgym.get_domain(name)  # an unknown domain fails here, with the list
    if data is not None:  # a typo'd scenario key is an error, not a world without it
        try:
            domain_obj.scenario(data, strict=True)
        except SimgymError as exc:
            fits = scenario_domain(data, name)  # another domain's scenario, said as such
            raise SimgymError(
                wrong_domain_message(str(scenario), fits, name)
                if fits
                else f"{scenario}: {' '.join(str(exc).split())}"
            ) from None
    file_task.pop("scenario", None)  # the scenario is served on its own, validated once
    file_task["domain"] = name
    if task is not None:
        file_task["instruction"] = task
    try:
        parsed = simgym.Task.model_validate(file_task)
    except ValueError as exc:
        raise SimgymError(f"{scenario}: invalid task: {exc}") from None
    return ServedWorld(domain=name, scenario=data, task=parsed)


def _read_mapping(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SimgymError(f"scenario file not found: {path}")
    try:
        data = load_yaml(read_text(path))  # refuses alias bombs, deep nesting, huge ints
    except yaml.YAMLError as exc:
        raise SimgymError(f"{path}: not valid YAML/JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SimgymError(f"{path}: a scenario must be a mapping")
    return data


@friendly_errors
@world_model_options
def serve(
    mcp: Annotated[
        bool, typer.Option("--mcp", help="serve an MCP server: one simulated world per session")
    ] = False,
    openenv: Annotated[
        bool, typer.Option("--openenv", help="serve an OpenEnv HTTP server")
    ] = False,
    domain: Annotated[
        str | None, typer.Option("--domain", "-d", help="mcp, terminal, search, ...")
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(help="scenario YAML/JSON, or an episode file with scenario: and task:"),
    ] = None,
    task: Annotated[
        str | None, typer.Option(help="task instruction (replaces the episode file's)")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="trajectory JSONL (appended); required")
    ] = None,
    transport: Annotated[str, typer.Option(help="stdio | http")] = "stdio",
    host: Annotated[str, typer.Option(help="address to listen on (http)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on (http); 0 picks a free one")] = 8765,
    path: Annotated[str, typer.Option(help="endpoint path (http)")] = "/mcp",
    max_turns: Annotated[int, typer.Option(help="steps before an episode is truncated")] = 30,
    answer_tool: Annotated[
        str, typer.Option(help="name of the tool that ends an episode with an answer")
    ] = "submit_answer",
    no_answer_tool: Annotated[
        bool, typer.Option("--no-answer-tool", help="offer no answer tool")
    ] = False,
    auto_reset: Annotated[
        bool,
        typer.Option(
            "--auto-reset",
            help="after an episode ends, the next call starts a new one in the same session "
            "(default: later calls are refused)",
        ),
    ] = False,
    session_idle_timeout: Annotated[
        float, typer.Option(help="seconds an idle HTTP session is kept (its episode is written)")
    ] = 1800.0,
    max_sessions: Annotated[
        int,
        typer.Option(help="HTTP sessions open at once (each holds a world); more are refused"),
    ] = 64,
    token: Annotated[
        str | None,
        typer.Option(
            help=f"bearer token every HTTP client must send (default: ${TOKEN_ENV}); "
            "required to listen beyond loopback",
            show_default=False,
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="with --openenv: a web origin (scheme://host:port) whose pages may open "
            "sessions, besides the server's own; repeatable. Every other Origin is refused"
        ),
    ] = None,
    reward: Annotated[
        str | None,
        typer.Option(
            help="--openenv: reward, a name (exact, f1, judge, ...) or a JSON/YAML spec; "
            "default: the task's own metadata.reward (or exact match on metadata.answer)"
        ),
    ] = None,
    max_message_bytes: Annotated[
        int, typer.Option(help="--openenv: largest request body or WebSocket message")
    ] = 1 << 20,
    keep_empty_episodes: Annotated[
        bool,
        typer.Option(
            "--keep-empty-episodes",
            help="--openenv: also write episodes reset but never stepped (each POST /reset)",
        ),
    ] = False,
    seed: Annotated[int | None, typer.Option()] = None,
    instructions: Annotated[
        str | None, typer.Option(help="control instructions for the world model")
    ] = None,
    system_prompt_file: Annotated[
        Path | None, typer.Option(help="your own system prompt template for the domain")
    ] = None,
    world: WorldOption = None,
    grounding: GroundingOption = None,
    execution: ExecutionOption = "sandbox",
    experience: ExperienceOption = None,
    *,
    wm: WorldModelOptions,
) -> None:
    """Serve a simulated environment to other programs.

    --mcp: an MCP server (--transport stdio, or http at http://HOST:PORT/mcp) whose tools
    are the world's tools plus an answer tool; each MCP session acts in its own world.
    --openenv: an OpenEnv server (WebSocket sessions at /ws), episodes scored by --reward.
    Over HTTP, --token (or $SIMGYM_TOKEN) makes every client send it; listening beyond
    loopback requires one. --world DIR serves a business world's twin (simgym logs import):
    its operations as tools, answered by the world model grounded in its records.
    """
    chosen = [flag for flag, on in (("--mcp", mcp), ("--openenv", openenv)) if on]
    if len(chosen) != 1:
        given = " and ".join(chosen) if chosen else "nothing"
        raise SimgymError(f"choose one thing to serve: --mcp or --openenv (got {given})")
    if out is None:
        raise SimgymError("--out FILE.jsonl is required: every episode is written there")
    secret = resolve_token(token)
    if openenv or transport == "http":
        require_token_off_loopback(host, secret)
    if mcp and (reward is not None or keep_empty_episodes):
        raise SimgymError("--reward and --keep-empty-episodes apply to --openenv only")
    if max_sessions < 1:
        raise SimgymError("--max-sessions must be at least 1")
    if world is not None:
        if scenario is not None:
            raise SimgymError("--world and --scenario both give the scenario: pass one")
        served = load_world(domain or "mcp", None, task)
        served.scenario = world_scenario_option(world, served.domain)
    else:
        served = load_world(domain, scenario, task)
    env_options: dict[str, Any] = {
        "max_turns": max_turns,
        **grounding_options(grounding, experience, execution=execution),
    }
    for key, value in (
        ("seed", seed),
        ("instructions", instructions),
        ("system_prompt_file", system_prompt_file),
    ):
        if value is not None:
            env_options[key] = value
    if openenv:
        from simgym.rewards import build_reward

        _serve_openenv(
            served,
            wm,
            out,
            host=host,
            port=port,
            env_options=env_options,
            # As simgym run: no --reward means each task's own reward (build_reward(None)).
            reward=build_reward(reward_spec(reward)),
            token=secret,
            max_sessions=max_sessions,
            session_idle_timeout=session_idle_timeout,
            max_message_bytes=max_message_bytes,
            keep_empty_episodes=keep_empty_episodes,
            allowed_origins=tuple(allow_origin or ()),
        )
        return
    _serve_mcp(
        served,
        wm,
        out,
        transport=transport,
        host=host,
        port=port,
        path=path,
        answer_tool=None if no_answer_tool else answer_tool,
        auto_reset=auto_reset,
        session_idle_timeout=session_idle_timeout,
        max_sessions=max_sessions,
        token=secret,
        env_options=env_options,
    )


def _serve_mcp(
    world: ServedWorld,
    wm: WorldModelOptions,
    out: Path,
    *,
    transport: str,
    host: str,
    port: int,
    path: str,
    answer_tool: str | None,
    auto_reset: bool,
    session_idle_timeout: float,
    max_sessions: int,
    token: str | None,
    env_options: dict[str, Any],
) -> None:
    from simgym.integrations.mcp_server import SimMCPServer, serve_mcp

    if transport not in ("stdio", "http"):
        raise SimgymError(f"--transport must be stdio or http, not {transport!r}")
    if session_idle_timeout <= 0:
        raise SimgymError("--session-idle-timeout must be positive")
    name, options = wm.spec()
    backend = simgym.world_model(name, **options)
    writer = simgym.TrajectoryWriter(out)
    try:
        try:
            facade = SimMCPServer(
                world.domain,
                backend,
                scenario=world.scenario,
                task=world.task,
                writer=writer,
                answer_tool=answer_tool,
                auto_reset=auto_reset,
                close_world_model=True,
                **env_options,
            )
        except BaseException:
            anyio.run(backend.aclose)
            raise

        def ready(where: str) -> None:
            errors.print(
                f"[dim]simgym: {world.domain} world as an MCP server on {escape(where)}; "
                f"episodes go to {escape(str(out))}[/]"
            )

        serve_mcp(
            facade,
            transport=transport,  # type: ignore[arg-type]
            host=host,
            port=port,
            path=path,
            session_idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
            token=token,
            on_ready=ready,
        )
    finally:
        writer.close()


def _serve_openenv(
    world: ServedWorld,
    wm: WorldModelOptions,
    out: Path,
    *,
    host: str,
    port: int,
    env_options: dict[str, Any],
    reward: Any,
    token: str | None,
    max_sessions: int,
    session_idle_timeout: float,
    max_message_bytes: int,
    keep_empty_episodes: bool,
    allowed_origins: tuple[str, ...] = (),
) -> None:
    try:
        from simgym.integrations.openenv_server import serve_openenv
    except ModuleNotFoundError as exc:
        if exc.name != "simgym.integrations.openenv_server":
            raise SimgymError(f"--openenv needs a package that is missing: {exc.name}") from None
        raise SimgymError("--openenv is not available in this version of simgym") from None
    serve_openenv(
        domain=world.domain,
        scenario=world.scenario,
        task=world.task,
        world_model=wm,
        out=out,
        host=host,
        port=port,
        env_options=env_options,
        reward=reward,
        token=token,
        max_concurrent_envs=max_sessions,
        session_timeout=session_idle_timeout,
        max_message_bytes=max_message_bytes,
        keep_empty_episodes=keep_empty_episodes,
        allowed_origins=allowed_origins,
    )


def main(argv: list[str] | None = None) -> None:
    """Run ``serve`` as a command of its own (``python -m simgym.cli.serve --mcp ...``)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(serve)
    app(args=argv)


if __name__ == "__main__":
    main()
