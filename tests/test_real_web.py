"""The real web executor: Chromium on the built-in local shop, through SimEnv."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import simgym
from simgym.domains._gui import uitree

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"
)
pytest.importorskip("playwright.async_api", reason="needs Playwright: pip install 'simgym[web]'")

from simgym.real.web import RealWeb, format_nodes  # noqa: E402

SCENARIO = {
    "site": "Lantern & Loom",
    "start_url": "https://shop.example/",
    "page": "[1] RootWebArea 'Lantern & Loom'",
}


def _bid(text: str, role: str, name: str) -> str:
    """The id of the first node with this role and name."""
    _, tree = uitree.parse_observation(text)
    node = next((n for n in tree.nodes if n.role == role and n.name == name), None)
    assert node is not None and node.id is not None, f"no {role} {name!r} in:\n{text}"
    return node.id


def _url(text: str) -> str:
    return uitree.parse_observation(text)[0]["url"]


def test_format_nodes_writes_uitree_lines() -> None:
    lines = format_nodes(
        [
            {"id": "1", "role": "RootWebArea", "name": "Shop", "depth": 0, "props": []},
            {
                "id": "2",
                "role": "textbox",
                "name": "Email",
                "depth": 1,
                "props": [["focused", None], ["value", "it's"]],
            },
            {"id": None, "role": "StaticText", "name": "Total", "depth": 1, "props": []},
        ]
    )
    assert lines == [
        "[1] RootWebArea 'Shop'",
        "  [2] textbox 'Email', focused, value=\"it's\"",
        "  StaticText 'Total'",
    ]
    assert uitree.tree_problems("\n".join(lines)) == []


def test_real_episode_on_the_local_shop(tmp_path: Path) -> None:
    web = simgym.get_domain("web")
    out = tmp_path / "real_web.jsonl"

    async def episode() -> list[str]:
        executor = RealWeb()
        with simgym.TrajectoryWriter(out) as writer:
            env = simgym.SimEnv("web", executor, writer=writer, validation_retries=0)
            task = simgym.Task(id="real-web-shop", instruction="Buy the lamp.", scenario=SCENARIO)
            try:
                first = await env.reset(task)
                texts = [first.text]
                steps = [
                    lambda t: f"click('{_bid(t, 'link', 'Brass desk lamp')}')",
                    lambda t: f"click('{_bid(t, 'link', 'Cart (1)')}')",
                    lambda t: f"fill('{_bid(t, 'textbox', 'Full name')}', 'Ana Silva')",
                    lambda t: f"click('{_bid(t, 'button', 'Place order')}')",
                    lambda t: "goto('https://example.com/')",
                    lambda t: "click('999')",
                    lambda t: f"fill('{_bid(t, 'textbox', 'Email')}', 'ana@example.com')",
                    lambda t: f"press('{_bid(t, 'textbox', 'Email')}', 'Enter')",
                ]
                for make in steps:
                    result = await env.step(make(texts[-1]))
                    assert result.info.get("error_type") is None, result.info
                    texts.append(result.observation.text)
                await env.close()
            finally:
                await executor.aclose()
        return texts

    texts = asyncio.run(asyncio.wait_for(episode(), timeout=60))
    for text in texts:  # every real page passes the domain's own format check
        assert web.check_observation(text, simgym.Action.say("noop()"), None) == [], text
    home, product, cart, filled, invalid, refused, missing, typed, ordered = texts
    assert _url(home) == "https://shop.example/"
    assert _url(product) == "https://shop.example/product"
    assert "heading 'Brass desk lamp'" in product
    assert _url(cart) == "https://shop.example/cart"
    assert "value='Ana Silva'" in filled
    # Submitting with no email: the page's own validation message, the page stays.
    assert _url(invalid) == "https://shop.example/cart"
    assert "StaticText 'Please enter your email address.'" in invalid
    assert (
        "invalid"
        in uitree.parse_observation(invalid)[1].find(_bid(invalid, "textbox", "Email")).props
    )
    # An external URL is refused and the page does not move.
    assert "Error: net::ERR_BLOCKED_BY_CLIENT at https://example.com/" in refused
    assert _url(refused) == "https://shop.example/cart"
    assert "Error: element 999 not found" in missing
    assert "value='ana@example.com'" in typed
    assert _url(ordered).startswith("https://shop.example/order?")
    assert "A receipt was sent to ana@example.com." in ordered

    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert len(records) == 1
    recorded = records[0]
    assert recorded["world_model"]["backend"] == "real-web"
    assert recorded["initial_observation"]["text"] == home
    assert [turn["observation"]["text"] for turn in recorded["turns"]] == texts[1:]


def test_loopback_start_url_is_served_locally() -> None:
    async def run() -> tuple[str, str]:
        executor = RealWeb()
        try:
            scenario = dict(SCENARIO, start_url="http://127.0.0.1/cart")
            first = await executor.start_episode(scenario, simgym.Task())
            server = executor._server
            assert server is not None
            # The same page by the server's own loopback address is allowed.
            error = await executor.act(f"goto('http://localhost:{server.port}/product')")
            return first, await executor.observe(error)
        finally:
            await executor.aclose()

    first, product = asyncio.run(asyncio.wait_for(run(), timeout=30))
    assert _url(first).endswith("/cart") and _url(first).startswith("http://127.0.0.1:")
    assert "Error" not in product and "heading 'Brass desk lamp'" in product
