"""Options shared by the commands: the world model, grounding, agents, executors, rewards."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

import simgym
from simgym.core.errors import SimgymError
from simgym.core.safeload import load_yaml, read_scenario, read_text
from simgym.worldmodels.local import ADAPTER_HELP

# -- shared world-model options ---------------------------------------------------------


@dataclass
class WorldModelOptions:
    world_model: str
    base_url: str | None
    model: str | None
    model_path: str | None
    adapter: str | None
    replay: list[Path] | None
    temperature: float | None
    max_tokens: int | None
    max_concurrency: int
    timeout: float
    serve_backoffice: bool = False

    def build(self) -> simgym.WorldModel:
        name, options = self.spec()
        return simgym.world_model(name, **options)

    def spec(self) -> tuple[str, dict[str, Any]]:
        """The backend's name and options (what a remote executor rebuilds it from)."""
        kind = self.world_model
        opts: dict[str, Any] = {}
        if self.serve_backoffice and kind != "real-http":
            raise SimgymError("--serve-backoffice goes with --world-model real-http")
        if kind == "openai":
            opts = {
                "base_url": self.base_url,
                "model": self.model,
                "max_concurrency": self.max_concurrency,
                "timeout": self.timeout,
            }
        elif kind == "local":
            opts = {"model_path": self.model_path}
            if self.adapter is not None:
                opts["adapter"] = self.adapter
        elif kind == "replay":
            if not self.replay:
                raise SimgymError(
                    "--world-model replay needs --replay FILE (recorded trajectories)"
                )
            opts = {"trajectories": [str(p) for p in self.replay]}
        elif kind == "real-http":  # the business world's own service answers
            opts = {"timeout": self.timeout, "serve_backoffice": self.serve_backoffice}
            if self.base_url is not None:
                opts["base_url"] = self.base_url
        if kind in ("openai", "local"):
            if self.temperature is not None:
                opts["temperature"] = self.temperature
            if self.max_tokens is not None:
                opts["max_tokens"] = self.max_tokens
        return kind, opts


_WM_PARAMS = [
    inspect.Parameter(
        "world_model",
        inspect.Parameter.KEYWORD_ONLY,
        default="local",
        annotation=Annotated[
            str,
            typer.Option(
                "--world-model",
                "-w",
                help="local | openai | replay | real-http (a business world's own service: "
                "--base-url or --serve-backoffice)",
            ),
        ],
    ),
    inspect.Parameter(
        "base_url",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 "
                "(or SIMGYM_BASE_URL); API key from SIMGYM_API_KEY/OPENAI_API_KEY. "
                "real-http: the service, e.g. http://127.0.0.1:8000 (or SIMGYM_REAL_HTTP_URL)"
            ),
        ],
    ),
    inspect.Parameter(
        "model",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None, typer.Option(help="served model name (default: the server's first)")
        ],
    ),
    inspect.Parameter(
        "model_path",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(help="GGUF file for the local backend (default: embedded SmolLM2)"),
        ],
    ),
    inspect.Parameter(
        "adapter",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[str | None, typer.Option(help=ADAPTER_HELP)],
    ),
    inspect.Parameter(
        "replay",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            list[Path] | None,
            typer.Option(help="trajectory JSONL for the replay backend (repeatable)"),
        ],
    ),
    inspect.Parameter(
        "temperature",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[float | None, typer.Option()],
    ),
    inspect.Parameter(
        "max_tokens",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[int | None, typer.Option()],
    ),
    inspect.Parameter(
        "max_concurrency",
        inspect.Parameter.KEYWORD_ONLY,
        default=64,
        annotation=Annotated[int, typer.Option(help="requests in flight to the server")],
    ),
    inspect.Parameter(
        "serve_backoffice",
        inspect.Parameter.KEYWORD_ONLY,
        default=False,
        annotation=Annotated[
            bool,
            typer.Option(
                "--serve-backoffice",
                help="real-http: run the demo bank back office in-process, a fresh "
                "database per episode (the logs extra)",
            ),
        ],
    ),
    inspect.Parameter(
        "timeout",
        inspect.Parameter.KEYWORD_ONLY,
        default=120.0,
        annotation=Annotated[float, typer.Option(help="seconds per world-model request")],
    ),
]


GroundingOption = Annotated[
    str | None,
    typer.Option(
        help="off | facts | strict: facts from the hidden state go to the world model, "
        "certain effects to the state, strict also checks and corrects observations "
        "(default: strict for the local model, off otherwise)"
    ),
]
ExperienceOption = Annotated[
    Path | None,
    typer.Option(
        help="an experience store (simgym experience build): similar recorded real "
        "transitions are shown to the world model with each action"
    ),
]


ExecutionOption = Annotated[
    str,
    typer.Option(
        help="sandbox: commands whose every input the state knows run for real in a "
        "throwaway bubblewrap sandbox (no network) and their output is exact; off: the "
        "world model renders them",
    ),
]


def grounding_options(
    grounding: str | None,
    experience: Path | None,
    world: Path | None = None,
    execution: str = "sandbox",
) -> dict[str, Any]:
    """SimEnv options for --grounding and --experience, checked early. With --world and
    no --experience, the world's own store (``experience.db``, written by ``logs
    import``) is retrieved from."""
    from simgym.core.grounding import MODES

    if grounding is not None and grounding not in MODES:
        raise SimgymError(f"--grounding takes {', '.join(MODES)}, not {grounding!r}")
    if experience is not None and not experience.is_file():
        raise SimgymError(f"experience store not found: {experience}")
    if experience is None and world is not None and grounding != "off":
        own = world / "experience.db"
        experience = own if own.is_file() else None
    from simgym.core.execution import EXECUTION_MODES

    if execution not in EXECUTION_MODES:
        raise SimgymError(f"--execution takes {', '.join(EXECUTION_MODES)}, not {execution!r}")
    options: dict[str, Any] = {"execution": execution}
    if grounding is not None:
        options["grounding"] = grounding
    if experience is not None:
        from simgym.experience import open_store

        # the command line opens the file; the environment takes the store (it pickles
        # as its path, so worker processes reopen it)
        options["experience"] = open_store(experience, readonly=True)
    return options


def world_model_options(fn):
    """Add the world-model options to a command; it receives them as ``wm``."""
    names = [p.name for p in _WM_PARAMS]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wm = WorldModelOptions(**{name: kwargs.pop(name) for name in names})
        return fn(*args, wm=wm, **kwargs)

    params = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "wm"]
    wrapper.__signature__ = inspect.Signature(params + _WM_PARAMS)  # type: ignore[attr-defined]
    return wrapper


def load_scenario(path: Path | None, domain: str | None = None) -> dict[str, Any] | None:
    """The scenario in ``path`` (None without one), checked against ``domain`` when given:
    strictly (a typo'd key is an error), and a file written for another domain is refused
    in one line that names both domains, not with the schema's field-by-field complaint.

    Args:
        path: a scenario YAML/JSON file, or an episode file with a ``scenario:`` mapping.
        domain: the domain the command will play it in.

    Returns:
        The scenario mapping, or None when ``path`` is None.
    """
    if path is None:
        return None
    scenario = read_scenario(path)
    if domain is not None:
        check_scenario(scenario, domain, str(path), declared=_declared_domain(path))
    return scenario


def _declared_domain(path: Path) -> str | None:
    """The ``domain:`` an episode file names (top level or inside ``task:``), if any."""
    try:
        data = load_yaml(read_text(path))
    except (yaml.YAMLError, SimgymError):
        return None  # read_scenario has already said what is wrong with the file
    if not isinstance(data, dict):
        return None
    task = data.get("task")
    named = data.get("domain") or (task.get("domain") if isinstance(task, dict) else None)
    return named if isinstance(named, str) else None


def check_scenario(
    scenario: dict[str, Any] | None, domain: str, where: str, *, declared: str | None = None
) -> None:
    """Validate ``scenario`` strictly for ``domain``; a scenario that is another domain's
    (``declared`` by its file, or the one domain whose schema takes it) is a one-line
    :class:`SimgymError` naming both.

    Args:
        scenario: the scenario mapping (None: the domain's default world, always fine).
        domain: the domain asked for.
        where: the file (or task id) to name in the message.
        declared: the domain the file says it is for, if it says.
    """
    if declared and declared != domain:
        raise SimgymError(wrong_domain_message(where, declared, domain))
    try:
        simgym.get_domain(domain).scenario(scenario or None, strict=True)
    except SimgymError:
        fits = scenario_domain(scenario, domain)
        if fits:
            raise SimgymError(wrong_domain_message(where, fits, domain)) from None
        raise


def wrong_domain_message(where: str, scenario_domain: str, asked: str) -> str:
    """One line for a scenario written for ``scenario_domain`` played as ``asked``."""
    return f"{where}: this scenario is for the {scenario_domain} domain, not {asked}"


def scenario_domain(scenario: dict[str, Any] | None, refused_by: str) -> str | None:
    """The one other domain whose schema takes ``scenario`` (which ``refused_by`` did not),
    or None when none or several do (then the schema's own complaint is the better help)."""
    if not scenario:
        return None
    fits = [n for n in simgym.domain_names() if n != refused_by and _takes(n, scenario)]
    return fits[0] if len(fits) == 1 else None


def _takes(domain: str, scenario: dict[str, Any] | None) -> bool:
    try:
        simgym.get_domain(domain).scenario(scenario, strict=True)
    except Exception:  # noqa: BLE001 - a plugin that cannot load takes nothing
        return False
    return True


WorldOption = Annotated[
    Path | None,
    typer.Option(
        "--world",
        help="a business world (simgym logs import ... --out DIR) served as the mcp "
        "scenario: its operations as tools, its records as state",
    ),
]


def world_scenario_option(world: Path | None, domain: str | None) -> dict[str, Any] | None:
    """The scenario of --world DIR (mcp only), or None without --world."""
    if world is None:
        return None
    if domain != "mcp":
        raise SimgymError(f"--world serves a business world as an mcp server; not {domain!r}")
    from simgym.logs.twin import world_scenario

    scenario = world_scenario(world)
    simgym.get_domain("mcp").scenario(scenario)  # a broken world fails before anything runs
    return scenario


def agent_options(
    agent: str,
    base_url: str | None,
    model: str | None,
    model_path: str | None,
    temperature: float | None,
) -> dict[str, Any]:
    given = {"base_url": base_url, "model": model, "model_path": model_path}
    accepted = {"openai": ("base_url", "model"), "local": ("model_path",)}.get(agent, ())
    stray = [k for k, v in given.items() if v is not None and k not in accepted]
    if stray:
        flags = ", ".join("--agent-" + k.replace("_", "-") for k in stray)
        raise SimgymError(f"{flags} do(es) not apply to --agent {agent}")
    options = {k: v for k, v in given.items() if v is not None}
    if temperature is not None:
        if agent not in ("openai", "local"):
            raise SimgymError(f"--agent-temperature does not apply to --agent {agent}")
        options["temperature"] = temperature
    return options


def executor_options(executor: str, workers: int | None, address: str | None) -> dict:
    options = {"num_workers": workers, "address": address}
    options = {k: v for k, v in options.items() if v is not None}
    if options and executor != "ray":
        raise SimgymError("--ray-workers and --ray-address need --executor ray")
    return options


def reward_spec(text: str | None) -> Any:
    """A reward name, or a JSON/YAML spec given inline or as a file path."""
    if text is None:
        return None
    path = Path(text)
    if path.suffix in (".json", ".yaml", ".yml") and path.is_file():
        text = read_text(path)
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise SimgymError(f"--reward is not a name or a valid JSON/YAML spec: {exc}") from None
