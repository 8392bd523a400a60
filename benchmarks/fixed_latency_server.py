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

import uvicorn

ANSWER = (
    "<predicted_observation>\nuser@devbox:~$ ls\nREADME.md  src  tests\nuser@devbox:~$\n"
    "</predicted_observation>"
)


def make_app(delay: float):
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

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        more = True
        while more:  # drain the request body
            message = await receive()
            more = message.get("more_body", False)
        if scope["method"] == "POST":
            await asyncio.sleep(delay)
            payload = body
        else:
            payload = models
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(delay: float) -> Iterator[str]:
    """Start the server in a subprocess on a free loopback port; yield its base URL
    (``http://127.0.0.1:PORT/v1``) once it answers, and stop it afterwards."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--port", str(port), "--delay", str(delay)]
    )
    base = f"http://127.0.0.1:{port}/v1"
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
    uvicorn.run(
        make_app(args.delay), host="127.0.0.1", port=args.port, log_level="warning", backlog=4096
    )
