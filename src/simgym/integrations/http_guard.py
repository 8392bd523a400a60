"""What simgym's HTTP servers (``serve --mcp --transport http``, ``serve --openenv``) put
in front of their apps: a bearer token, and a refusal to listen beyond loopback without one.

A served world spends the world model's compute and writes trajectories on every request,
so anyone who can reach the port can run up costs and fill the disk. On loopback only this
machine's users can; on any other address a token is required.

The token travels as ``Authorization: Bearer TOKEN``. Clients that only take a URL (OpenEnv's
``EnvClient`` opens its WebSocket with no way to add headers) may put it in the URL instead,
``http://simgym:TOKEN@host:port``, which they send as HTTP Basic authentication; the user
name is ignored.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import json
import os
from collections.abc import Sequence
from typing import Any

from simgym.core.errors import SimgymError

TOKEN_ENV = "SIMGYM_TOKEN"


def resolve_token(token: str | None) -> str | None:
    """The token to require: the one given, else ``$SIMGYM_TOKEN``; blank means none."""
    chosen = token if token is not None else os.environ.get(TOKEN_ENV)
    chosen = (chosen or "").strip()
    return chosen or None


def is_loopback(host: str) -> bool:
    """True when only this machine can reach ``host`` (127.0.0.0/8, ::1, localhost)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def require_token_off_loopback(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token (one clear line)."""
    if token is None and not is_loopback(host):
        raise SimgymError(
            f"refusing to listen on {host} without a token: anyone who reaches it could run "
            f"the world model; pass --token or set {TOKEN_ENV} (or listen on 127.0.0.1)"
        )


async def send_json_error(
    send: Any, status: int, detail: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Answer an HTTP request from ASGI middleware with ``{"detail": ...}``, as FastAPI's
    own errors look, before the app sees it."""
    body = json.dumps({"detail": detail}).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head + list(headers)})
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """ASGI middleware: every HTTP request and WebSocket handshake must carry the token.
    An HTTP request without it gets 401; a WebSocket is closed before it is accepted
    (policy violation, 1008), which the client sees as a refused handshake."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "token required"})
            return
        await send_json_error(
            send,
            401,
            "missing or wrong token: send 'Authorization: Bearer TOKEN'",
            [(b"www-authenticate", b'Bearer realm="simgym"')],
        )

    def _allowed(self, scope: Any) -> bool:
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                return self._matches(value)
        return False

    def _matches(self, header: bytes) -> bool:
        scheme, _, credential = header.strip().partition(b" ")
        credential = credential.strip()
        if scheme.lower() == b"basic":  # user:TOKEN from a URL; the user name is ignored
            try:
                credential = base64.b64decode(credential, validate=True).partition(b":")[2]
            except (binascii.Error, ValueError):
                return False
        elif scheme.lower() != b"bearer":
            return False
        # Constant time, so the token cannot be guessed a byte at a time from timings.
        return hmac.compare_digest(credential, self._token)
