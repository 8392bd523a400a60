"""The real search backend: an FTS5 index over the Python documentation shipped with the
interpreter; searches, pages and 404s in the search domain's exact formats, scenario
documents indexed for their own episode only."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import simgym
import simgym.real.search  # noqa: F401  (registers the real-search backend)
from simgym.real.search import (
    Page,
    RealSearch,
    SearchIndex,
    build_index,
    fts_terms,
    module_page,
    render_page,
    render_results,
)

SEARCH = simgym.get_domain("search")
JSON_PAGE = "https://docs.python.org/3/library/json.html"


@pytest.fixture(scope="session")
def index_path(tmp_path_factory) -> Path:
    """The corpus index, built once for the whole test session."""
    return build_index(tmp_path_factory.mktemp("search") / "index.sqlite")


def search(*queries: str) -> dict[str, Any]:
    return {"name": "web_search", "arguments": {"queries": list(queries)}}


def extract(url: str) -> dict[str, Any]:
    return {"name": "web_extractor", "arguments": {"url": url, "goal": "how to indent"}}


def result_urls(text: str) -> list[str]:
    return [line[5:] for line in text.splitlines() if line.startswith("URL: ")]


def observations_ok(trajectory: simgym.Trajectory, scenario: Any) -> None:
    world = SEARCH.scenario(scenario)
    for turn in trajectory.turns:
        assert turn.error is None, turn.error
        if turn.observation.metadata.get("final_answer"):
            continue  # the agent's answer: nothing was executed
        assert SEARCH.check_observation(turn.observation.text, turn.action, world) == []


async def test_real_episode_search_open_and_404(tmp_path: Path, index_path: Path) -> None:
    out = tmp_path / "real-search.jsonl"
    missing = "https://docs.python.org/3/library/no_such_module.html"
    with simgym.TrajectoryWriter(out) as writer:
        env = simgym.make(
            "search", world_model=RealSearch(index_path=index_path), writer=writer, max_turns=6
        )
        await env.reset("How do I pretty-print JSON with an indent?")
        found = await env.step(search("json dumps indent", "assert statement", "zzqxv wvvqz"))
        page = await env.step(extract(JSON_PAGE))
        gone = await env.step(extract(missing))
        await env.step("Use json.dumps(obj, indent=4).")
        await env.close(None)

    text = found.observation.text
    sections = text.split("## Results for ")
    assert [s.splitlines()[0] for s in sections[1:]] == [
        '"json dumps indent"',
        '"assert statement"',
        '"zzqxv wvvqz"',
    ]
    assert JSON_PAGE in result_urls(sections[1])[:5]
    assert "reference/topics/assert.html" in result_urls(sections[2])[0]
    assert 'No results found for "zzqxv wvvqz".' in sections[3]
    assert page.observation.text.startswith("# json")
    assert "indent" in page.observation.text
    assert gone.observation.text == f"Error: 404 Not Found for URL {missing}"

    [recorded] = list(simgym.read_trajectories(out))
    assert recorded.world_model["backend"] == "real-search"
    observations_ok(recorded, env.scenario)


async def test_scenario_documents_are_found_for_their_episode_only(index_path: Path) -> None:
    scenario = {
        "results_per_query": 3,
        "current_date": "2025-06-02",
        "documents": [
            {
                "url": "https://blog.example.org/posts/frobnicator-2",
                "title": "Frobnicator 2.0 released",
                "date": "2025-05-20",
                "content": "The frobnicator now runs on quantum toasters.\n\n## Changes\n"
                "Faster toasting.",
            },
            {
                "url": "https://example.org/empty",
                "title": "An empty page",
                "snippet": "nothing here but a snippet",
            },
        ],
    }
    executor = RealSearch(index_path=index_path)
    env = simgym.make("search", world_model=executor, scenario=scenario)
    await env.reset("What is new in Frobnicator 2?")
    found = await env.step(search("frobnicator quantum toaster", "json"))
    opened = await env.step(extract("https://blog.example.org/posts/frobnicator-2/"))
    empty = await env.step(extract("https://example.org/empty"))
    await env.close(None)
    first = found.observation.text.split("\n\n## Results for")[0]
    assert result_urls(first)[0] == "https://blog.example.org/posts/frobnicator-2"
    assert "Date: 2025-05-20" in first
    assert len(result_urls(found.observation.text.split("## Results for")[2])) == 3
    assert opened.observation.text.startswith("# Frobnicator 2.0 released\n\n")
    assert empty.observation.text == "# An empty page\n\nnothing here but a snippet"
    observations_ok(env.trajectory, scenario)

    # The next episode, with the default scenario, does not know those pages.
    await env.reset("again", scenario=simgym.get_domain("search").default_scenario())
    later = await env.step(search("frobnicator quantum toaster"))
    again = await env.step(extract("https://blog.example.org/posts/frobnicator-2"))
    await env.close(None)
    assert "blog.example.org" not in later.observation.text
    assert again.observation.text.startswith("Error: 404 Not Found")


def test_index_is_built_once_and_opened_read_only(index_path: Path) -> None:
    before = index_path.stat().st_mtime_ns
    assert build_index(index_path) == index_path
    assert index_path.stat().st_mtime_ns == before  # a current index is reused
    index = SearchIndex.open(index_path)
    try:
        with pytest.raises(sqlite3.OperationalError):
            index.conn.execute("DELETE FROM pages")
        assert index.search("", 5) == []
        assert index.search('") OR NEAR(', 5) == index.search("or near", 5)
        assert index.page(JSON_PAGE.replace("https://", "http://www.")) is not None
    finally:
        index.close()


def test_sync_environment_through_the_backend_name(index_path: Path) -> None:
    with simgym.make("search", world_model="real-search", index_path=str(index_path)).sync() as env:
        env.reset("find pathlib")
        result = env.step(search("pathlib Path glob"))
    assert "https://docs.python.org/3/library/pathlib.html" in result_urls(result.observation.text)


def test_helpers() -> None:
    assert fts_terms('json "dumps" AND indent-4') == [
        '"json"',
        '"dumps"',
        '"and"',
        '"indent"',
        '"4"',
    ]
    page = module_page("demo", '"""Demo things.\n\nMore."""\ndef run(x, *, y=1):\n    """Run."""\n')
    assert page is not None
    assert page.title == "demo — Demo things"
    assert "## demo.run(x, *, y=1)" in page.body
    assert module_page("empty", "x = 1\n") is None
    text = render_results("q", [])
    assert text == '## Results for "q"\nNo results found for "q".'
    long = render_page(Page("https://e.org/a", "A", "word " * 100), max_chars=50)
    assert long.startswith("# A\n\nword") and long.endswith("cut ...]")
    assert json.loads(json.dumps(RealSearch().describe()))["engine"] == "sqlite-fts5"
