"""Showing a training run: a rich progress bar while it runs, loss curves from its log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from transformers import TrainerCallback

_BARS = "▁▂▃▄▅▆▇█"


class RichProgress(TrainerCallback):
    """A progress bar over optimizer steps, with the latest loss and speed, and one printed
    line per log record (so the curve stays in the scroll-back)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress: Progress | None = None
        self.task: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.progress = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task(
            "train", total=state.max_steps, completed=state.global_step, status=""
        )

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if not logs or self.progress is None or not {"loss", "eval_loss"} & logs.keys():
            return  # the run's closing summary has neither; the caller prints its own
        parts = [f"step {state.global_step}/{state.max_steps}"]
        for key, label in (("loss", "loss"), ("eval_loss", "val loss")):
            if key in logs:
                parts.append(f"{label} {logs[key]:.4f}")
        if "learning_rate" in logs:
            parts.append(f"lr {logs['learning_rate']:.2e}")
        parts.append(f"{state.num_input_tokens_seen} tokens")
        line = "  ".join(parts)
        self.progress.update(self.task, status=line.split("  ", 1)[-1])
        self.progress.console.print(line, highlight=False)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a run's ``loss.jsonl``."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def sparkline(values: list[float], width: int = 60) -> str:
    """``values`` squeezed into ``width`` block characters (each the mean of its share),
    lowest to highest."""
    if not values:
        return ""
    width = min(width, len(values))
    means = []
    for column in range(width):
        lo, hi = column * len(values) // width, (column + 1) * len(values) // width
        chunk = values[lo : max(hi, lo + 1)]
        means.append(sum(chunk) / len(chunk))
    low, high = min(means), max(means)
    span = (high - low) or 1.0
    return "".join(_BARS[round((m - low) / span * (len(_BARS) - 1))] for m in means)


def curve_lines(records: list[dict[str, Any]], width: int = 60) -> list[str]:
    """One line per series in a run log (training and validation loss): first, lowest and
    last value, and the curve between."""
    lines = []
    for key, label in (("loss", "train loss"), ("eval_loss", "val loss")):
        points = [(r["step"], float(r[key])) for r in records if key in r]
        if not points:
            continue
        values = [v for _, v in points]
        lines.append(
            f"{label:>10}  {sparkline(values, width)}  "
            f"step {points[0][0]}: {values[0]:.4f}  min {min(values):.4f}  "
            f"step {points[-1][0]}: {values[-1]:.4f}"
        )
    return lines
