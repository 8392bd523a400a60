"""The client's side as a HAR 1.2 archive (http://www.softwareishard.com/blog/har-12-spec/).

:class:`HarWriter` turns each httpx exchange into a ``log.entries`` item (request with
headers, query and body; response with status, headers and body text; the time httpx
measured as ``wait``) and writes it at once, so a long run is never held in memory. Each
working session is a page (``pageref`` = the session id). What a HAR cannot say: which
route template a path matched (readers turn id-like segments into ``{id}``) and the time
split into DNS, connect and send (only the whole wait is measured: the others are -1 or 0).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

CREATOR = {"name": "simgym-backoffice-driver", "version": "1.0.0"}


def _pairs(items: Any) -> list[dict[str, str]]:
    return [{"name": str(k), "value": str(v)} for k, v in items]


def har_entry(response: httpx.Response, started: str, pageref: str) -> dict[str, Any]:
    """One HAR entry for a finished httpx exchange that started at ``started`` (ISO 8601)."""
    request = response.request
    wait = round(response.elapsed.total_seconds() * 1000, 3)
    body = request.content
    req: dict[str, Any] = {
        "method": request.method,
        "url": str(request.url),
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": _pairs(request.headers.multi_items()),
        "queryString": _pairs(request.url.params.multi_items()),
        "headersSize": -1,
        "bodySize": len(body),
    }
    if body:
        req["postData"] = {
            "mimeType": request.headers.get("content-type", "application/octet-stream"),
            "text": body.decode("utf-8", errors="replace"),
        }
    content = response.content
    return {
        "pageref": pageref,
        "startedDateTime": started,
        "time": wait,
        "request": req,
        "response": {
            "status": response.status_code,
            "statusText": response.reason_phrase,
            "httpVersion": response.http_version,
            "cookies": [],
            "headers": _pairs(response.headers.multi_items()),
            "content": {
                "size": len(content),
                "mimeType": response.headers.get("content-type", ""),
                "text": content.decode("utf-8", errors="replace"),
            },
            "redirectURL": response.headers.get("location", ""),
            "headersSize": -1,
            "bodySize": len(content),
        },
        "cache": {},
        "timings": {"blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": wait, "receive": 0},
    }


class HarWriter:
    """Streams a HAR file: entries as they come, the pages (one per session) at the end."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] | None = None
        self._pages: dict[str, str] = {}  # session id -> when its first request started
        self._count = 0

    def __enter__(self) -> HarWriter:
        self._file = open(self.path, "w", encoding="utf-8")
        head = {"version": "1.2", "creator": CREATOR}
        self._file.write(json.dumps({"log": head})[:-2] + ', "entries": [\n')
        return self

    def add(self, response: httpx.Response, started: str, pageref: str) -> None:
        assert self._file is not None, "use HarWriter as a context manager"
        self._pages.setdefault(pageref, started)
        entry = json.dumps(har_entry(response, started, pageref), ensure_ascii=False)
        self._file.write((",\n" if self._count else "") + entry)
        self._count += 1

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._file is None:
            return
        pages = [
            {"startedDateTime": t, "id": sid, "title": f"session {sid}", "pageTimings": {}}
            for sid, t in self._pages.items()
        ]
        self._file.write('\n], "pages": ' + json.dumps(pages) + "}}\n")
        self._file.close()
        self._file = None
