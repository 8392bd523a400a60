"""What a verl run is configured with: the tool config, the agent loop config, the dataset."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.errors import SimgymError
from simgym.core.types import Task
from simgym.integrations.verl.schema import verl_tool_schema
from simgym.integrations.verl.settings import (
    AGENT_LOOP,
    AGENT_LOOP_CLASS,
    TOOL_CLASS,
    VerlToolSettings,
)
from simgym.perturb import Perturbations, load_perturbations


def verl_tool_config(
    domain: str,
    scenario: dict[str, Any] | BaseModel | None = None,
    *,
    world_model: str = "local",
    world_model_options: dict[str, Any] | None = None,
    env_options: dict[str, Any] | None = None,
    perturbations: Perturbations | dict[str, Any] | None = None,
    reward: Any = None,
    score: bool = True,
    trajectories: str | os.PathLike[str] | None = None,
    tools: Sequence[str] | None = None,
    path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """The tool config verl's ``multi_turn.tool_config_path`` points at: one
    :class:`SimgymTool` entry per tool the domain offers in ``scenario`` (``tools``: only
    these). With ``path`` it is also written there as YAML. Every value must travel as
    YAML to verl's workers, so ``world_model`` is a backend name or an import path
    (``package.module:attribute``), not an instance. ``perturbations`` (a fault plan, or
    its dict) injects faults into every world, as ``simgym.make(perturbations=...)``."""
    if not isinstance(world_model, str):
        raise SimgymError(
            "verl builds tools from YAML in its own processes: give world_model as a backend "
            "name or an import path 'package.module:attribute', not an instance"
        )
    resolved = get_domain(domain)
    validated = resolved.scenario(scenario)
    settings = VerlToolSettings(
        domain=resolved.name,
        scenario=None if scenario is None else validated.model_dump(mode="json"),
        world_model=world_model,
        world_model_options=dict(world_model_options or {}),
        env_options=dict(env_options or {}),
        perturbations=None if perturbations is None else _plain_plan(perturbations),
        reward=reward,
        score=score,
        trajectories=None if trajectories is None else str(trajectories),
    )
    try:
        json.dumps(settings.model_dump(mode="json"))
    except (TypeError, ValueError) as exc:
        raise SimgymError(f"the tool config must be plain data (YAML): {exc}") from None
    offered = resolved.agent_tools(validated)
    if tools is not None:
        names = {t.name for t in offered}
        missing = [name for name in tools if name not in names]
        if missing:
            raise SimgymError(f"the {domain} world offers no tool(s) {missing}")
        offered = [t for t in offered if t.name in set(tools)]
    if not offered:
        raise SimgymError(f"the {domain} world offers no tools in this scenario")
    unset = set() if settings.perturbations else {"perturbations"}  # older configs stay equal
    config = settings.model_dump(mode="json", exclude={"tool", *unset})
    result = {
        "tools": [
            {
                "class_name": TOOL_CLASS,
                "config": copy.deepcopy(config),  # separate copies: plain YAML, no anchors
                "tool_schema": verl_tool_schema(t),
            }
            for t in offered
        ]
    }
    if path is not None:
        _write_yaml(path, result)
    return result


def _plain_plan(perturbations: Perturbations | dict[str, Any]) -> dict[str, Any]:
    return load_perturbations(perturbations).model_dump(mode="json", exclude_none=True)


def verl_agent_loop_config(path: str | os.PathLike[str] | None = None) -> list[dict[str, str]]:
    """The agent loop config (``rollout.agent.agent_loop_config_path``) naming
    :class:`SimgymAgentLoop`. Optional: loading the tools already registers it."""
    result = [{"name": AGENT_LOOP, "_target_": AGENT_LOOP_CLASS}]
    if path is not None:
        _write_yaml(path, result)
    return result


def verl_rows(
    tasks: Iterable[Task | Mapping[str, Any]],
    tool_config: Mapping[str, Any],
    *,
    agent_name: str | None = AGENT_LOOP,
    data_source: str | None = None,
    system_prompt: str | None = None,
) -> list[dict[str, Any]]:
    """Dataset rows in verl's RL format (``RLHFDataset``): ``prompt`` (what the policy
    sees: a system message and the instruction with the world's first screen),
    ``reward_model.ground_truth`` (``metadata["answer"]`` or ``["answers"]`` as text, for
    verl's own reward functions) and ``extra_info.tools_kwargs`` carrying the task to every tool of
    ``tool_config``. The scenario and answer stay out of the prompt."""
    from simgym.agents.openai_agent import SYSTEM_PROMPT

    entries = list(tool_config.get("tools") or [])
    if not entries:
        raise SimgymError("the tool config lists no tools")
    settings = VerlToolSettings.model_validate(entries[0]["config"])
    names = [entry["tool_schema"]["function"]["name"] for entry in entries]
    domain = get_domain(settings.domain)
    rows = []
    for index, raw in enumerate(tasks):
        task = Task.coerce(raw, domain.name, bind=True)
        scenario = domain.scenario(task.scenario or settings.scenario)
        first = domain.initial_observation(scenario)
        user = task.instruction.strip() or "Explore the environment."
        if first.strip():
            user += f"\n\nWhat the environment shows now:\n{first}"
        system = system_prompt or SYSTEM_PROMPT.format(domain=domain.name)
        answer = task.metadata.get("answer", task.metadata.get("answers"))
        payload = {"create_kwargs": {"task": task.model_dump_json()}}
        row: dict[str, Any] = {
            "data_source": data_source or f"simgym/{domain.name}",
            "prompt": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "ability": f"agent/{domain.name}",
            "reward_model": {
                "style": "rule",
                "ground_truth": _as_text(answer),
            },
            "extra_info": {
                "index": index,
                "task_id": task.id,
                "need_tools_kwargs": True,
                "tools_kwargs": {name: payload for name in names},
            },
        }
        if agent_name is not None:
            row["agent_name"] = agent_name
        rows.append(row)
    return rows


def write_verl_recipe(
    out: str | os.PathLike[str],
    train: Iterable[Task | Mapping[str, Any]],
    val: Iterable[Task | Mapping[str, Any]],
    domain: str,
    scenario: dict[str, Any] | BaseModel | None = None,
    *,
    data_source: str | None = None,
    **tool_options: Any,
) -> dict[str, Path]:
    """Everything a verl run reads, in one folder: the tool config (``tools.yaml``, from
    :func:`verl_tool_config` with ``tool_options``), the agent loop config
    (``agent_loops.yaml``) and the train and validation datasets (Parquet). Trajectories
    are written by each worker to ``episodes-{pid}.jsonl`` there. Returns the paths."""
    out = Path(out).resolve()
    paths = {
        "tools": out / "tools.yaml",
        "agent_loops": out / "agent_loops.yaml",
        "train": out / "train.parquet",
        "val": out / "val.parquet",
        "trajectories": out / "episodes-{pid}.jsonl",
    }
    config = verl_tool_config(
        domain, scenario, trajectories=paths["trajectories"], path=paths["tools"], **tool_options
    )
    verl_agent_loop_config(paths["agent_loops"])
    write_verl_dataset(verl_rows(train, config, data_source=data_source), paths["train"])
    write_verl_dataset(verl_rows(val, config, data_source=data_source), paths["val"])
    return paths


def write_verl_dataset(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write :func:`verl_rows` output as Parquet (``.parquet``) or JSON lines (``.jsonl``),
    the two forms ``RLHFDataset`` reads."""
    path = Path(path)
    if not rows:
        raise SimgymError("no rows to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), path)
    elif path.suffix == ".jsonl":
        with open(path, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        raise SimgymError(f"write a .parquet or .jsonl file, not {path.name!r}")
    return path


def _as_text(value: Any) -> str:
    """A reference answer as verl's string ``ground_truth`` ("" when there is none)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _write_yaml(path: str | os.PathLike[str], data: Any) -> None:
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
