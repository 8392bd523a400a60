"""How every ``simgym`` command reports failure: one line on stderr, no traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape

from simgym.cli.console import make_console
from simgym.core.errors import SimgymError

errors = make_console(stderr=True, soft_wrap=True)


def friendly_errors(fn: Callable | None = None, *, interrupted: str = "interrupted"):
    """Turn simgym's own errors into a one-line message and exit status 2, and Ctrl-C into
    ``interrupted`` and status 130. Use bare (``@friendly_errors``) or with a message."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except SimgymError as exc:
                errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
                raise typer.Exit(2) from None
            except (UnicodeDecodeError, RecursionError) as exc:
                # A backstop for input no reader was taught to refuse (binary files, data
                # nested past Python's stack): still one line and status 2, no traceback.
                what = (
                    "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "nested too deeply"
                )
                errors.print(
                    f"[bold red]error:[/] input {what}: {escape(str(exc))}", highlight=False
                )
                raise typer.Exit(2) from None
            except KeyboardInterrupt:
                errors.print(interrupted)
                raise typer.Exit(130) from None

        return wrapper

    return decorate(fn) if fn is not None else decorate
