"""The model-server client every role shares (world model, agent, judge): the openai
SDK's retry rules kept on simgym's lean aiohttp path, against real loopback servers."""

from __future__ import annotations

import pytest

from simgym.core.errors import WorldModelError
from simgym.worldmodels.chat import ChatClient, ChatReply, env_proxy

MSGS = [{"role": "user", "content": "ls"}]


def client(base: str, **options) -> ChatClient:
    return ChatClient(base, "m", error=WorldModelError, label="world model", **options)


async def test_retry_after_is_honoured(fault_server, fault_times):
    base, _ = fault_server
    chat = client(f"{base}/retryafter/v1", max_retries=2)
    before = len(fault_times.get("retryafter", []))
    reply, _ = await chat.complete({"messages": MSGS})
    await chat.aclose()
    assert reply.choices[0].message.content == "ok"
    first, second = fault_times["retryafter"][before : before + 2]
    # the server asked for a second; the default backoff for a first retry is <= 0.5 s
    assert second - first >= 0.9


async def test_server_saying_do_not_retry_is_obeyed(fault_server):
    base, hits = fault_server
    chat = client(f"{base}/noretry/v1", max_retries=3)
    before = hits["noretry"]
    with pytest.raises(WorldModelError, match="HTTP 503: overloaded"):
        await chat.complete({"messages": MSGS})
    await chat.aclose()
    assert hits["noretry"] - before == 1


async def test_dropped_connection_is_retried_then_explained(fault_server):
    base, hits = fault_server
    chat = client(f"{base}/dropped/v1", max_retries=1)
    before = hits["dropped"]
    with pytest.raises(WorldModelError, match="cannot reach world model at .*dropped"):
        await chat.complete({"messages": MSGS})
    await chat.aclose()
    assert hits["dropped"] - before == 2


async def test_unnamed_model_is_the_servers_first(fault_server):
    base, _ = fault_server
    chat = ChatClient(f"{base}/ok/v1", error=WorldModelError)
    assert await chat.resolve_model() == "fault"
    await chat.aclose()


def test_reply_reads_tool_calls_reasoning_and_usage():
    reply = ChatReply.from_json(
        {
            "model": "m",
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "reasoning_content": "look first",
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "ls"}},
                            {"id": "bad", "type": "function"},  # no function: skipped
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": None},
        }
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert [(c.id, c.name, c.arguments) for c in choice.message.tool_calls] == [("c1", "ls", "{}")]
    assert choice.message.extra == {"reasoning_content": "look first"}
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 0)


async def test_one_session_per_loop_reuses_its_connection(llama_server):
    chat = client(llama_server, max_concurrency=4)
    for _ in range(3):
        await chat.complete({"messages": MSGS, "max_tokens": 2})
    session, _ = chat._client()
    assert len(chat._per_loop) == 1
    # keep-alive: three requests one after another left one pooled connection, not three
    assert sum(len(v) for v in session.connector._conns.values()) == 1
    await chat.aclose()


def test_the_proxy_comes_from_the_environment(monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("http://10.0.0.5:8000/v1") is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://tls-proxy.internal:3128")
    assert env_proxy("http://10.0.0.5:8000/v1") == "http://proxy.internal:3128"
    assert env_proxy("https://api.example.com/v1") == "http://tls-proxy.internal:3128"
    monkeypatch.setenv("NO_PROXY", "localhost,10.0.0.5")
    assert env_proxy("http://10.0.0.5:8000/v1") is None
    assert env_proxy("http://10.0.0.6:8000/v1") == "http://proxy.internal:3128"


async def test_requests_go_through_the_environments_proxy(fault_server, monkeypatch):
    """A host only the proxy can reach: answered through it, unreachable without it."""
    proxy, hits = fault_server
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    before = hits["proxied"]
    chat = client("http://simgym-behind-a-proxy.invalid/ok/v1", max_retries=0)
    assert chat.proxy == proxy
    reply, _ = await chat.complete({"messages": MSGS})
    await chat.aclose()
    assert reply.choices[0].message.content == "ok" and hits["proxied"] == before + 1

    monkeypatch.setenv("NO_PROXY", "simgym-behind-a-proxy.invalid")
    direct = client("http://simgym-behind-a-proxy.invalid/ok/v1", max_retries=0)
    assert direct.proxy is None
    with pytest.raises(WorldModelError, match="cannot reach world model"):
        await direct.complete({"messages": MSGS})
    await direct.aclose()
    assert hits["proxied"] == before + 1
