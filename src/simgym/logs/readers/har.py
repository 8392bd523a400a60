"""HAR 1.2 archives (browsers' "Save all as HAR", Playwright's ``record_har_path``).
``log.entries`` are streamed one at a time. Each entry is an HTTP record: the method,
the path as a route template (id-like segments become "{id}"), the request body (JSON
when it parses, else text; form ``params`` as an object; the query string as an object
for bodiless requests), the response status and body (base64 bodies are decoded when
they are UTF-8), ``time`` in milliseconds as the latency. The session is the entry's
``pageref``, else a session header (``X-Session``, ``X-Session-Id``), else the file name.
A HAR names no user; the caller comes from identity headers a client or gateway sends,
when there are any: the actor from ``X-Actor``, ``X-User``, ``X-User-Id``,
``X-Forwarded-User`` or ``X-Remote-User``, the role from ``X-Role`` or ``X-User-Role``.
Responses with no status (0: aborted) and non-API resources (images, fonts, style sheets)
are skipped with a reason."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from simgym.logs.jsonstream import iter_array
from simgym.logs.model import (
    JSON,
    ImportReport,
    LogRecord,
    maybe_json,
    parse_time,
    route_objects,
    templatize,
)

_STATIC = ("image/", "font/", "text/css", "audio/", "video/")
_SESSION_HEADERS = ("x-session", "x-session-id")
_ACTOR_HEADERS = ("x-actor", "x-user", "x-user-id", "x-forwarded-user", "x-remote-user")
_ROLE_HEADERS = ("x-role", "x-user-role")

LOOKS_FOR = {
    "body": "request postData.text and response content.text",
    "actor": "request headers " + ", ".join(_ACTOR_HEADERS),
    "role": "request headers " + ", ".join(_ROLE_HEADERS),
    "session": "the entry's pageref, headers " + ", ".join(_SESSION_HEADERS) + " (else the file)",
    "objects": "route parameters and answers with an id",
}


def _header(headers: dict[str, str], names: tuple[str, ...]) -> str | None:
    return next((headers[n] for n in names if headers.get(n)), None)


def _request_body(request: dict) -> JSON:
    post = request.get("postData") or {}
    if post.get("text"):
        return maybe_json(post["text"])
    if post.get("params"):
        return {p.get("name"): p.get("value") for p in post["params"]}
    query = request.get("queryString") or []
    return {q.get("name"): q.get("value") for q in query} if query else None


def _response_body(response: dict) -> JSON:
    content = response.get("content") or {}
    text = content.get("text")
    if text is None:
        return None
    if content.get("encoding") == "base64":
        try:
            text = base64.b64decode(text).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return maybe_json(text)


def read(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    try:
        for number, entry in enumerate(iter_array(path, "entries"), 1):
            report.read += 1
            try:
                request, response = entry["request"], entry["response"]
                status = int(response.get("status") or 0)
                mime = str((response.get("content") or {}).get("mimeType") or "")
                url = urlsplit(request["url"])
            except (KeyError, TypeError, ValueError, AttributeError):
                report.skip("HAR entry without request/response")
                continue
            if status == 0:
                report.skip("HAR entry without a response (aborted)")
                continue
            if mime.startswith(_STATIC):
                report.skip("static resource (image, font, style)")
                continue
            route = templatize(url.path or "/")
            body = _response_body(response)
            headers = {
                str(h.get("name", "")).lower(): str(h.get("value", ""))
                for h in request.get("headers") or []
                if isinstance(h, dict)
            }
            named = entry.get("pageref") or _header(headers, _SESSION_HEADERS)
            extra = {"host": url.netloc, "mime": mime}
            if not named:
                extra["session_from"] = "file"
            yield LogRecord(
                session=str(named or path.stem),
                operation=route,
                system="http",
                actor=_header(headers, _ACTOR_HEADERS),
                role=_header(headers, _ROLE_HEADERS),
                method=str(request.get("method", "GET")).upper(),
                time=parse_time(entry.get("startedDateTime")),
                arguments=_request_body(request),
                status=status,
                error=status >= 500,
                response=body,
                objects=route_objects(route, url.path, body),
                path=url.path or "/",
                duration_ms=float(entry["time"]) if entry.get("time") is not None else None,
                source=f"{path.name}#entry{number}",
                attributes=extra,
            )
    except ValueError:
        report.skip("malformed HAR (rest of the entries unread)")
