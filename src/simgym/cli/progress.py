"""Progress for the long commands: a rich bar on a terminal, a plain line in a pipe.

A command that plays many episodes (``simgym run``, ``safety run``, ``bench infer``,
``bench consistency``, ``record``, ``factory``) can take many minutes. On a terminal it
shows rich bars with the rate and an estimate of the time left. Where stderr is a pipe or
a file (CI logs, ``2>run.log``, ``| tee``) rich has nothing to redraw and would print the
bar once, at the end; there a line is written instead every ``every`` items or
``interval`` seconds, whichever comes first, and always at the start and at the end:

    episodes 6/18 (33%) 0:01:04 elapsed, about 0:02:08 left, 0.09/s, 0 failed

``SIMGYM_PROGRESS`` (``bar``, ``lines`` or ``off``) overrides the choice. The library
functions never import this: they take plain callbacks (``on_start(total)``,
``on_done(item)``) and the command feeds them to :class:`CommandProgress`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

Mode = Literal["bar", "lines", "off"]
MODES: tuple[str, ...] = ("bar", "lines", "off")
# In a pipe, a line at least this often (seconds) while items finish...
DEFAULT_INTERVAL = 10.0
# ...and at least every tenth of the run.
LINES_PER_RUN = 10


def progress_mode(console: Console, disable: bool = False) -> Mode:
    """``bar`` on a terminal, ``lines`` elsewhere, ``off`` when disabled;
    ``$SIMGYM_PROGRESS`` decides when set to one of those."""
    if disable:
        return "off"
    chosen = os.environ.get("SIMGYM_PROGRESS", "").strip().lower()
    if chosen in MODES:
        return chosen  # type: ignore[return-value]
    return "bar" if console.is_terminal else "lines"


def clock(seconds: float) -> str:
    """``seconds`` as H:MM:SS."""
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass
class _Line:
    label: str
    total: int | None
    completed: int
    every: int | None
    started: float = field(default_factory=time.perf_counter)
    baseline: int = 0  # done before this run (resumed): not counted in the rate
    failed: int = 0
    note: str = ""
    shown_at: int = -1
    shown_time: float = 0.0

    def text(self, now: float) -> str:
        elapsed = now - self.started
        ran = self.completed - self.baseline
        rate = ran / elapsed if elapsed > 0 else 0.0
        if self.total is not None:  # 0 of 0: a resumed run with nothing left to play
            percent = 100 * self.completed / self.total if self.total else 100
            parts = [f"{self.label} {self.completed}/{self.total} ({percent:.0f}%)"]
        else:
            parts = [f"{self.label} {self.completed}"]
        parts.append(f"{clock(elapsed)} elapsed")
        if self.total and self.completed < self.total and ran > 0:
            parts.append(f"about {clock((self.total - self.completed) / rate)} left")
        if ran > 0:
            parts.append(f"{rate:.2f}/s")
        parts.append(f"{self.failed} failed")
        if self.note:
            parts.append(self.note)
        return ", ".join(parts[:1]) + " " + ", ".join(parts[1:])


class CommandProgress:
    """Progress of one command: one bar (or line) per label.

    Use as a context manager; :meth:`add` a bar, then feed it with :meth:`update` (or
    hand :meth:`callbacks`'s functions to a library call)::

        with CommandProgress(errors) as progress:
            bar = progress.add("episodes", total=None)
            arollout(..., on_start=lambda n: progress.update(bar, total=n),
                     on_done=lambda t: progress.update(bar, advance=1))

    Args:
        console: where to show it (simgym shows progress on stderr).
        disable: show nothing (an interactive agent owns the terminal).
        interval: in line mode, the most seconds between lines while items finish.
        every: in line mode, a line every this many items (default: a tenth of the total).
    """

    def __init__(
        self,
        console: Console,
        *,
        disable: bool = False,
        interval: float = DEFAULT_INTERVAL,
        every: int | None = None,
    ) -> None:
        self.console = console
        self.mode = progress_mode(console, disable)
        self.interval = interval
        self.every = every
        self._lines: dict[int, _Line] = {}
        self._bar: Progress | None = None
        if self.mode == "bar":
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TextColumn("eta"),
                TimeRemainingColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[note]}"),
                console=console,
            )

    def __enter__(self) -> CommandProgress:
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, exc, tb)
        elif self.mode == "lines" and kind is None:
            for key, line in self._lines.items():  # the last state, if not said yet
                if line.shown_at != line.completed:
                    self._say(key)

    def add(self, label: str, total: int | None = None, completed: int = 0) -> int:
        """A new bar; ``total`` may come later through :meth:`update`. Returns its key."""
        key = len(self._lines)
        self._lines[key] = _Line(label, total, completed, self.every, baseline=completed)
        if self._bar is not None:
            self._bar.add_task(label, total=total, completed=completed, rate="", note="")
        if self.mode == "lines" and total is not None:
            self._say(key)
        return key

    def update(
        self,
        key: int,
        *,
        total: int | None = None,
        completed: int | None = None,
        advance: int = 0,
        failed: int = 0,
        note: str | None = None,
    ) -> None:
        """Move bar ``key``: a new ``total`` (restarts the clock when the total was not
        known), ``completed`` outright or ``advance`` by some, ``failed`` more failures,
        a ``note`` (rich markup allowed) shown after it."""
        line = self._lines[key]
        first_total = total is not None and line.total is None
        if total is not None:
            line.total = total
        if first_total:  # the count of work is known now: the rate counts from here
            line.started = time.perf_counter()
            line.baseline = line.completed
        if completed is not None:
            line.completed = completed
        line.completed += advance
        line.failed += failed
        if note is not None:
            line.note = note
        if self._bar is not None:
            elapsed = time.perf_counter() - line.started
            ran = line.completed - line.baseline
            rate = f"{ran / elapsed:.2f}/s" if elapsed > 0 and ran > 0 else ""
            shown = line.note + (f" [red]{line.failed} failed[/]" if line.failed else "")
            self._bar.update(key, total=line.total, completed=line.completed, rate=rate, note=shown)
        elif self.mode == "lines":
            if first_total or self._due(line):
                self._say(key)

    def callbacks(self, key: int):  # noqa: ANN201 - a pair of plain callables
        """``(on_start(total), on_progress(done, total))`` for a library function."""

        def on_start(total: int) -> None:
            self.update(key, total=total)

        def on_progress(done: int, total: int) -> None:
            self.update(key, total=total, completed=done)

        return on_start, on_progress

    def _due(self, line: _Line) -> bool:
        if line.completed == line.shown_at:
            return False
        if line.total is not None and line.completed >= line.total:
            return True
        every = line.every or max(1, (line.total or 0) // LINES_PER_RUN) or 1
        if line.completed - max(line.shown_at, 0) >= every:
            return True
        return time.perf_counter() - line.shown_time >= self.interval

    def _say(self, key: int) -> None:
        line = self._lines[key]
        now = time.perf_counter()
        line.shown_at, line.shown_time = line.completed, now
        # A log gets plain text: the note's rich tags are rendered away, not printed.
        text = Console().render_str(line.text(now)).plain
        self.console.print(escape(text), highlight=False, soft_wrap=True)
