"""A minimal OpenAI-compatible chat server that answers every request after a fixed delay.

Used by engine.py, bench.py and the benchmark's resume test to measure simgym against a
server whose speed is known: with a concurrency limit C and delay D, no client can do
better than C / D requests per second.

    python benchmarks/fixed_latency_server.py --port 8123 --delay 0.1

or from Python, in its own process: ``with running(0.1) as base_url: ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

from aiohttp import web

ANSWER = (
    "<predicted_observation>\nuser@devbox:~$ ls\nREADME.md  src  tests\nuser@devbox:~$\n"
    "</predicted_observation>"
)


def make_app(delay: float) -> web.Application:
    """aiohttp's server: its HTTP parser is C, so the stand-in costs the machine little
    CPU per request and the client, not the server, is what a benchmark measures."""
    body = json.dumps(
        {
            "id": "bench",
            "object": "chat.completion",
            "created": 0,
            "model": "fixed",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": ANSWER},
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
    ).encode()
    models = json.dumps({"object": "list", "data": [{"id": "fixed", "object": "model"}]}).encode()

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(delay)
        return web.Response(body=body, content_type="application/json")

    async def listed(request: web.Request) -> web.Response:
        return web.Response(body=models, content_type="application/json")

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", listed)
    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server(str):
    """The base URL (``http://127.0.0.1:PORT/v1``), carrying the server's process id so a
    benchmark can read the server's own CPU time."""

    pid: int


@contextlib.contextmanager
def running(delay: float) -> Iterator[Server]:
    """Start the server in a subprocess on a free loopback port; yield its base URL
    once it answers, and stop it afterwards."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--port", str(port), "--delay", str(delay)]
    )
    base = Server(f"http://127.0.0.1:{port}/v1")
    base.pid = server.pid
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/models", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("the fixed-latency server did not start")
        yield base
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--delay", type=float, default=0.1)
    args = parser.parse_args()
    web.run_app(
        make_app(args.delay),
        host="127.0.0.1",
        port=args.port,
        backlog=8192,
        print=None,
        access_log=None,
        # keep idle connections as long as a client might: a pool of thousands re-used
        keepalive_timeout=75,
    )
