"""Shared fixtures: a real llama.cpp OpenAI-compatible server on loopback, and a small
HTTP server that produces the faults a real server cannot be made to produce on demand."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from simgym.worldmodels.local import embedded_model_path

# Files that each take minutes, put first: with the suite spread over a few workers
# (`-n auto --dist loadfile`), a run that met them last would end on one of them alone.
LONG_FILES = (
    "test_train_pipeline.py",
    "test_examples_run.py",
    "test_fail_closed.py",
    "test_grounding_served.py",
    "test_verifiers.py",
)


def pytest_collection_modifyitems(config, items) -> None:
    """Run the long files first (a stable sort: every other test keeps its order)."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist workers inherit a COLUMNS/LINES of 80x24; the CLI's consoles size
    # themselves from COLUMNS once, at import, so a test's output would wrap where a
    # serial run's (unset: 200 columns) does not
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def model_path() -> str:
    path = embedded_model_path()
    assert path is not None, "embedded model missing: run `bash scripts/setup.sh --dev`"
    return str(path)


@pytest.fixture(scope="session")
def tokenizer(model_path):
    from simgym.train.base import load_tokenizer

    return load_tokenizer(model_path)


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory, tokenizer):
    """A 2-layer random llama with SmolLM2's vocabulary, saved as a model folder. Its
    weights are drawn wide (std 0.3) so greedy choices are not near-ties."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        initializer_range=0.3,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    folder = tmp_path_factory.mktemp("tiny-base")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _serve_llama(model_path: str, log_dir, *extra: str, port: int | None = None):
    """Start llama-cpp-python's OpenAI-compatible server on loopback (on ``port``, or a
    free one); yield its base URL."""
    port = port or free_port()
    log = log_dir / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                model_path,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "4096",
                "--model_alias",
                "smollm2",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(base + "/models", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError("llama server did not start:\n" + log.read_text()[-3000:])
        time.sleep(0.3)
    try:
        yield base
    finally:  # also when a test closes the generator itself (GeneratorExit at the yield)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def llama_server(model_path: str, tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server with the embedded model, on loopback."""
    yield from _serve_llama(model_path, tmp_path_factory.mktemp("llama"))


@pytest.fixture(scope="session")
def llama_tools_server(model_path: str, tmp_path_factory):
    """The same server speaking OpenAI tool calls (llama.cpp's grammar-constrained
    function-calling chat format), for tool-calling agents."""
    yield from _serve_llama(
        model_path,
        tmp_path_factory.mktemp("llama-tools"),
        "--chat_format",
        "chatml-function-calling",
    )


class _FaultHandler(BaseHTTPRequestHandler):
    """Modes by path prefix: /500, /429, /slow, /notags, /garbage, /empty, /retryafter
    (every other request: 429 asking for a one-second wait), /noretry (503 with
    ``x-should-retry: false``), /dropped (the connection closed with no answer)."""

    hits: Counter = Counter()
    times: dict[str, list[float]] = {}

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json", headers=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(
            200,
            json.dumps({"object": "list", "data": [{"id": "fault", "object": "model"}]}).encode(),
        )

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        path = self.path
        if path.startswith("http://"):  # asked as a forward proxy: the absolute form
            type(self).hits["proxied"] += 1
            path = urllib.parse.urlsplit(path).path
        mode = path.strip("/").split("/")[0]
        type(self).hits[mode] += 1
        type(self).times.setdefault(mode, []).append(time.monotonic())
        if mode == "dropped":
            self.close_connection = True
            return
        if mode == "noretry":
            return self._send(
                503, b'{"error": {"message": "overloaded"}}', headers={"x-should-retry": "false"}
            )
        if mode == "retryafter" and type(self).hits[mode] % 2 == 1:
            return self._send(429, b'{"error": {"message": "wait"}}', headers={"Retry-After": "1"})
        if mode == "500":
            return self._send(500, b'{"error": {"message": "internal failure"}}')
        if mode == "429":
            return self._send(
                429, b'{"error": {"message": "slow down"}}', headers={"Retry-After": "0"}
            )
        if mode == "slow":
            time.sleep(3)
        if mode == "garbage":
            return self._send(200, b"<html>not json</html>", "text/html")
        content = {
            "reasoning": "<predicted_observation>done\nuser@devbox:~$</predicted_observation>",
            "notags": "total 0\nuser@devbox:~$",
            "empty": "",
            "slow": "<predicted_observation>late</predicted_observation>",
        }.get(mode, "ok")
        body = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "fault",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": content,
                        **({"reasoning_content": "the ls ran"} if mode == "reasoning" else {}),
                    },
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
        self._send(200, json.dumps(body).encode())


@pytest.fixture(scope="session")
def fault_server():
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _FaultHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address
    yield f"http://{host}:{port}", _FaultHandler.hits
    server.shutdown()


@pytest.fixture
def fault_times():
    """When the fault server received each request, by mode (monotonic seconds)."""
    return _FaultHandler.times


@pytest.fixture(autouse=True)
def _no_ambient_server(monkeypatch):
    # Tests must not pick up a developer's own server settings.
    for name in ("SIMGYM_BASE_URL", "OPENAI_BASE_URL", "SIMGYM_MODEL", "SIMGYM_MODEL_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
