"""The viewer's web app (FastAPI): routes that refresh the index and render pages.

Every page load first indexes what was appended to the files since the last one, and
``/api/poll`` does the same for the list page's script, so episodes a run is still writing
show up. Off loopback a token is required: in the URL once (``?token=...``), then a cookie.
Another web site's page cannot use the viewer through the user's browser: a request with
a foreign ``Origin`` is refused, and on loopback so is one whose ``Host`` is not this
machine's (DNS rebinding; :class:`~simgym.integrations.http_guard.OriginGuard`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from simgym.core.errors import SimgymError
from simgym.integrations.http_guard import OriginGuard, is_loopback
from simgym.viewer.blocks import e, json_block
from simgym.viewer.pages import (
    PER_PAGE,
    Links,
    compare_list_page,
    compare_page,
    episode_page,
    group_page,
    groups_page,
    layout,
    list_page,
    report_page,
    reports_page,
)
from simgym.viewer.reports import load_report, render_report, report_kind
from simgym.viewer.store import Filters, Index, UnreadableEpisode

COOKIE = "simgym_view"


def default_index_path(files: list[Path]) -> Path:
    """The index's file in the user's cache, one per set of trajectory files."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = "\n".join(sorted(str(Path(f).resolve()) for f in files))
    return cache / "simgym" / "view" / (hashlib.sha1(key.encode()).hexdigest()[:16] + ".sqlite")


_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def asset(name: str) -> bytes:
    """A file of the page assets shipped with the package (``view/static``)."""
    return resources.files("simgym.viewer").joinpath("static", name).read_bytes()


class Viewer:
    """What the pages show: the index over the trajectory files, and the reports."""

    def __init__(self, index: Index, reports: list[Path]) -> None:
        self.index = index
        self.reports = reports

    @classmethod
    def open(cls, paths: list[Path], db: str | Path | None = None) -> Viewer:
        """A viewer over these files: ``.json`` files are reports, the rest trajectory
        JSONL. ``db`` is where the index lives (default: a file in the user's cache,
        named after the files, so a second start reads only what was appended)."""
        missing = [str(p) for p in paths if not Path(p).is_file()]
        if missing:
            raise SimgymError(f"no such file: {', '.join(missing)}")
        reports = [Path(p) for p in paths if Path(p).suffix == ".json"]
        trajectories = [Path(p) for p in paths if Path(p).suffix != ".json"]
        if db is None:
            db = default_index_path(trajectories)
        Path(db).parent.mkdir(parents=True, exist_ok=True)
        return cls(Index(trajectories, db), reports)

    def report(self, number: int, links: Links) -> tuple[str, str, str]:
        """(name, kind, body HTML) of a report."""
        path = self.reports[number]
        data = load_report(path)
        body = render_report(data, lambda failure: self.failure_link(failure, links))
        return path.name, report_kind(data), body

    def failure_link(self, failure: dict[str, Any], links: Links | None = None) -> str | None:
        rowid = self.index.find_episode(str(failure.get("episode_id") or ""), failure.get("file"))
        return None if rowid is None else (links or Links()).episode(rowid)


def error_response(request: Request, status: int, detail: str, links: Links) -> Response:
    """An error as a page a person can read (with the way back), or as JSON for the
    ``/api`` routes that scripts call."""
    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": detail}, status_code=status)
    titles = {404: "Not found", 405: "Not allowed", 422: "Not shown"}
    title = titles.get(status, "Error")
    body = (
        f'<h1 class="error-title">{e(title)}</h1>'
        f'<p class="err" id="error-detail">{e(status)}: {e(detail)}</p>'
        f"<p><code>{e(request.url.path)}</code> is not a page of this viewer. "
        f'<a href="{e(links.episodes())}">Back to the episodes</a>.</p>'
    )
    return HTMLResponse(layout(title, body, links), status_code=status)


# How long a page load may spend indexing before it shows what is indexed so far.
PAGE_BUDGET_S = 0.5


def create_app(
    viewer: Viewer,
    *,
    token: str | None = None,
    background: bool = False,
    host: str = "127.0.0.1",
    allowed_origins: Sequence[str] = (),
) -> FastAPI:
    """The app. ``background``: index the files in a thread from the start, so the first
    page of a big file shows at once and fills in (the list says how far indexing got).
    ``host``: where it will listen (on loopback, requests must name this machine)."""
    app = FastAPI(title="simgym view", docs_url=None, redoc_url=None, openapi_url=None)
    index = viewer.index
    links = Links()

    @app.exception_handler(UnreadableEpisode)
    async def unreadable(request: Request, exc: UnreadableEpisode) -> HTMLResponse:
        # a line the index listed that is no valid trajectory: said, not a server error
        body = f'<h1>Episode not shown</h1><p class="err">{e(str(exc))}</p>'
        return HTMLResponse(layout("not shown", body, links), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return error_response(request, exc.status_code, str(exc.detail), links)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        # /episode/abc: a path or query that is not what the route takes
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ())[1:])}: {err.get('msg', '')}"
            for err in exc.errors()[:3]
        )
        return error_response(request, 404, f"no such page ({problems})", links)

    if background:
        threading.Thread(target=index.refresh, name="simgym-view-index", daemon=True).start()

    if token:
        secret = token.encode()

        @app.middleware("http")
        async def require_token(request: Request, call_next):  # noqa: ANN202
            given = request.query_params.get("token") or request.cookies.get(COOKIE) or ""
            if not hmac.compare_digest(given.encode(), secret):
                return JSONResponse({"detail": "missing or wrong token: open ?token=..."}, 401)
            response = await call_next(request)
            if request.query_params.get("token"):
                response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
            return response

    def params(request: Request) -> dict[str, str]:
        return dict(request.query_params)

    @app.get("/", response_class=HTMLResponse)
    def episodes(request: Request) -> str:
        index.refresh(PAGE_BUDGET_S)
        p = params(request)
        page = int(p["page"]) if p.get("page", "").isdigit() else 1
        f = Filters.from_params(p)
        # The background indexer has just started: wait a moment for one page of rows.
        deadline = time.perf_counter() + 2 * PAGE_BUDGET_S
        while index.indexing and time.perf_counter() < deadline:
            if index.count(f) >= page * PER_PAGE:
                break
            time.sleep(0.05)
        return list_page(index, f, page, links)

    @app.get("/api/poll")
    def poll() -> dict[str, int]:
        added = index.refresh(PAGE_BUDGET_S)
        return {"total": index.count(), "added": added, "indexing": int(index.indexing)}

    @app.get("/api/episodes")
    def api_episodes(request: Request) -> dict[str, Any]:
        """One page of the filtered list as JSON (for scripts)."""
        index.refresh(PAGE_BUDGET_S)
        p = params(request)
        page = int(p["page"]) if p.get("page", "").isdigit() else 1
        f = Filters.from_params(p)
        return {"total": index.count(f), "page": page, "episodes": index.page(f, page)}

    @app.get("/episode/{rowid}", response_class=HTMLResponse)
    def episode(rowid: int, request: Request) -> str:
        index.refresh()
        t = index.trajectory(rowid)
        if t is None:
            raise HTTPException(404, f"no episode {rowid}")
        f = Filters.from_params(params(request))
        return episode_page(index, rowid, t, links, f)

    @app.get("/episode/{rowid}/state", response_class=HTMLResponse)
    def episode_state(rowid: int) -> str:
        """The final state's folded view, fetched when the page's fold is opened."""
        t = index.trajectory(rowid)
        if t is None or t.final_state is None:
            raise HTTPException(404, f"no final state of episode {rowid}")
        return json_block(t.final_state)  # its big parts start folded, as in the page

    @app.get("/episode/{rowid}/state.json")
    def episode_state_json(rowid: int) -> Response:
        """The final state as it was recorded, whole."""
        t = index.trajectory(rowid)
        if t is None or t.final_state is None:
            raise HTTPException(404, f"no final state of episode {rowid}")
        return Response(
            json.dumps(t.final_state, ensure_ascii=False, indent=1, default=str),
            media_type="application/json",
        )

    @app.get("/e/{episode_id}")
    def by_episode_id(episode_id: str) -> RedirectResponse:
        rowid = index.find_episode(episode_id)
        if rowid is None:
            raise HTTPException(404, f"no episode {episode_id}")
        return RedirectResponse(links.episode(rowid))

    @app.get("/compare", response_class=HTMLResponse)
    def compare_all() -> str:
        index.refresh()
        return compare_list_page(index, links)

    @app.get("/compare/{sim}/{real}", response_class=HTMLResponse)
    def compare(sim: int, real: int) -> str:
        a, b = index.trajectory(sim), index.trajectory(real)
        if a is None or b is None:
            raise HTTPException(404, "no such episodes")
        return compare_page(index, sim, real, a, b, links)

    @app.get("/groups", response_class=HTMLResponse)
    def groups() -> str:
        index.refresh()
        return groups_page(index, links)

    @app.get("/group", response_class=HTMLResponse)
    def group(id: str) -> str:  # noqa: A002
        members = index.group_members(id)
        if not members and not index.group(id):
            raise HTTPException(404, f"no group {id}")
        return group_page(index, id, members, links)

    @app.get("/reports", response_class=HTMLResponse)
    def reports() -> str:
        return reports_page([p.name for p in viewer.reports], links)

    @app.get("/report/{number}", response_class=HTMLResponse)
    def report(number: int) -> str:
        if not 0 <= number < len(viewer.reports):
            raise HTTPException(404, f"no report {number}")
        index.refresh()
        return report_page(*viewer.report(number, links), links)

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in ("viewer.css", "viewer.js"):
            raise HTTPException(404)
        return Response(asset(name), media_type=_TYPES[Path(name).suffix])

    # outermost: another site's page is refused before anything answers it
    app.add_middleware(OriginGuard, loopback=is_loopback(host), allowed_origins=allowed_origins)
    return app
