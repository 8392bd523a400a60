"""What simgym's HTTP servers (``serve --mcp --transport http``, ``serve --openenv``,
``view``) put in front of their apps: a bearer token, a refusal to listen beyond loopback
without one, and :class:`OriginGuard` (no other web site's page may use the server through
the user's browser).

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


def require_token_off_loopback(
    host: str, token: str | None, exposes: str = "run the world model and write trajectories"
) -> None:
    """Refuse to listen beyond loopback without a token (one clear line). ``exposes`` says
    what anyone who reaches the port could do ("read every trajectory", for the viewer)."""
    if token is None and not is_loopback(host):
        raise SimgymError(
            f"refusing to listen on {host} without a token: anyone who reaches it could "
            f"{exposes}; pass --token or set {TOKEN_ENV} (or listen on 127.0.0.1)"
        )


def _split_host(value: str) -> tuple[str, str]:
    """(host name, port) of a ``Host`` header or an origin's authority, lower case; the
    port is '' when absent."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8000
        name, _, rest = value[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else ""
    name, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        return value, ""
    return name, port


_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}


def _origin_authority(origin: str) -> tuple[str, str, str] | None:
    """(scheme, host, port) of an ``Origin`` header, or None when it is not one (``null``,
    from a sandboxed frame or a file, included)."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in _DEFAULT_PORTS or not rest or "/" in rest or "@" in rest:
        return None
    host, port = _split_host(rest)
    return scheme, host, port or _DEFAULT_PORTS[scheme]


class OriginGuard:
    """ASGI middleware against other web sites: every HTTP request and WebSocket handshake
    is checked before the app sees it.

    * ``Origin`` (browsers send it with every WebSocket, every POST and every cross-site
      fetch): absent is fine (curl, SDK clients); present, it must be this server's own
      origin (the ``Host`` the request was sent to) or one of ``allowed_origins``. A page
      of another origin, another port of this machine included, gets 403, and its
      WebSocket is closed before it is accepted (1008): cross-site WebSocket hijacking.
    * ``Host`` (with ``loopback``: the server listens on loopback only): must name this
      machine (``localhost``, ``127.x.x.x``, ``[::1]``) or one of ``allowed_hosts``;
      anything else gets 421. A page whose own name was re-pointed at 127.0.0.1 (DNS
      rebinding) sends its own name and is refused. Beyond loopback the token guards.
    """

    def __init__(
        self,
        app: Any,
        *,
        loopback: bool,
        allowed_origins: Sequence[str] = (),
        allowed_hosts: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.loopback = loopback
        self.allowed_origins = {o.strip().lower().rstrip("/") for o in allowed_origins}
        self.allowed_hosts = {h.strip().lower() for h in allowed_hosts}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin")
        problem: tuple[int, str] | None = None
        if self.loopback and not self._host_ok(host):
            problem = (
                421,
                f"wrong Host {host[:100]!r}: this server answers only to this machine's names",
            )
        elif origin is not None and not self._origin_ok(origin.decode("latin-1"), host):
            problem = (403, "requests from another web site's pages are refused (Origin)")
        if problem is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": problem[1][:120]})
        else:
            await send_json_error(send, *problem)

    def _host_ok(self, host: str) -> bool:
        if not host:
            return False
        name, _ = _split_host(host)
        return host.lower() in self.allowed_hosts or name in self.allowed_hosts or is_loopback(name)

    def _origin_ok(self, origin: str, host: str) -> bool:
        if origin.strip().lower().rstrip("/") in self.allowed_origins:
            return True
        found = _origin_authority(origin)
        if found is None or not host:
            return False
        scheme, name, port = found
        own_name, own_port = _split_host(host)
        return (name, port) == (own_name, own_port or _DEFAULT_PORTS[scheme])


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
