"""``simgym view``: trajectory files and reports in the browser, or as a static site.
FastAPI and uvicorn are imported when the command runs (``pip install 'simgym[view]'``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from simgym.cli.errors import errors, friendly_errors
from simgym.core.errors import SimgymError


@friendly_errors
def view(
    files: Annotated[
        list[Path],
        typer.Argument(help="trajectory JSONL files, and report .json files (safety, bench score)"),
    ],
    port: Annotated[int, typer.Option(help="port to listen on")] = 8765,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    token: Annotated[
        str | None,
        typer.Option(help="token the browser must send (?token=...); required off loopback"),
    ] = None,
    export: Annotated[
        Path | None, typer.Option(help="write the pages as a static site to this folder")
    ] = None,
    index: Annotated[
        Path | None,
        typer.Option(help="the SQLite index file (default: in ~/.cache/simgym/view)"),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="a web origin (scheme://host:port) whose pages may call the viewer, "
            "besides its own; repeatable. Every other Origin is refused"
        ),
    ] = None,
) -> None:
    """Browse episodes (filter, search), compare sim vs real, GRPO groups and reports.

    Episodes are indexed once into SQLite; a run still appending to a file shows its new
    episodes on the next page load.
    """
    try:
        from simgym.integrations.http_guard import require_token_off_loopback, resolve_token
        from simgym.viewer.app import Viewer, create_app
        from simgym.viewer.export import export_site
    except ImportError as exc:
        raise SimgymError(
            f"simgym view needs FastAPI: pip install 'simgym[view]' ({exc})"
        ) from None
    viewer = Viewer.open(files, index)
    if export is not None:
        added = viewer.index.refresh()
        errors.print(f"{viewer.index.count()} episodes indexed ({added} new)")
        written = export_site(viewer, export)
        errors.print(f"{written} files written to {export}; open {export / 'index.html'}")
        return
    secret = resolve_token(token)
    require_token_off_loopback(host, secret, "read every trajectory and report it shows")
    import uvicorn

    app = create_app(
        viewer, token=secret, background=True, host=host, allowed_origins=allow_origin or ()
    )
    shown = f"http://{host}:{port}/" + (f"?token={secret}" if secret else "")
    errors.print(f"simgym view on {shown}")
    uvicorn.run(app, host=host, port=port, log_level="warning")
