"""The search domain: a web search engine and page fetcher for research agents."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import simgym
import simgym.domains.search  # noqa: F401  (registers the domain)
from simgym import Action, ActionError
from simgym.core.contract import action_text_of
from simgym.domains.search import SearchScenario, tools
from simgym.rollout.scripted import load_specs, run_episode

SEARCH = simgym.get_domain("search")
SCENARIO = SEARCH.scenario(None)
EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples" / "search").glob("*.yaml"))


def coerce(raw):
    return SEARCH.coerce_action(raw, SCENARIO, 16_000)


# -- a small rules-based engine: well-formed observations for any scenario -------------


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.casefold()) if len(w) > 2}


def _results(query: str, scenario: SearchScenario) -> str:
    lines = [f'## Results for "{query}"']
    phrase = query[1:-1].casefold() if query.startswith('"') and query.endswith('"') else None
    scored = []
    for doc in scenario.documents:
        text = f"{doc.title} {doc.snippet} {doc.content}"
        if phrase is not None:
            score = 1 if phrase in text.casefold() else 0
        else:
            score = len(_words(query) & _words(text))
        if score:
            scored.append((-score, doc.url, doc))
    hits = [doc for _, _, doc in sorted(scored)][: scenario.results_per_query]
    if not hits:
        lines.append(f'No results found for "{query}".')
    for rank, doc in enumerate(hits, 1):
        snippet = doc.snippet or doc.content.strip().splitlines()[0]
        lines += [f"[{rank}] {doc.title}", f"URL: {doc.url}", f"Snippet: {snippet}"]
        if doc.date:
            lines.append(f"Date: {doc.date.isoformat()}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _page(url: str, scenario: SearchScenario) -> str:
    doc = scenario.document(url)
    if doc is None:
        return f"Error: 404 Not Found for URL {url}"
    return f"# {doc.title}\n\n{doc.content.strip()}"


def rules_engine(scenario: SearchScenario):
    """A world model that answers from the scenario's pages, in the documented format."""

    def world(messages):
        call = json.loads(action_text_of(messages[-1]["content"]))
        args = call["arguments"]
        if call["name"] == "web_search":
            body = "\n\n".join(_results(q, scenario) for q in args["queries"])
        else:
            body = _page(args["url"], scenario)
        return f"<predicted_observation>\n{body}\n</predicted_observation>"

    return world


# -- actions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, rendered",
    [
        (
            {"name": "web_search", "arguments": {"queries": ["python 3.13", "pep 703"]}},
            {"name": "web_search", "arguments": {"queries": ["python 3.13", "pep 703"]}},
        ),
        (  # a single `query` string, extra whitespace
            {"name": "web_search", "arguments": {"query": "  python   3.13 release "}},
            {"name": "web_search", "arguments": {"queries": ["python 3.13 release"]}},
        ),
        (  # the `search` alias with a list under `query`; OpenAI-style string arguments
            {"function": {"name": "search", "arguments": '{"query": ["a b"]}'}},
            {"name": "web_search", "arguments": {"queries": ["a b"]}},
        ),
        (
            {"name": "web_extractor", "arguments": {"url": "https://docs.python.org/3/"}},
            {"name": "web_extractor", "arguments": {"url": "https://docs.python.org/3/"}},
        ),
        (  # the `visit` alias with one URL in a list; a blank goal is dropped
            {"name": "visit", "arguments": {"url": ["http://example.org/a"], "goal": " "}},
            {"name": "web_extractor", "arguments": {"url": "http://example.org/a"}},
        ),
        (
            {"name": "web_extractor", "arguments": {"url": "https://a.org/x", "goal": "price"}},
            {"name": "web_extractor", "arguments": {"url": "https://a.org/x", "goal": "price"}},
        ),
    ],
)
def test_tool_calls_render_as_json(raw, rendered):
    action = coerce(raw)
    assert json.loads(SEARCH.render_action(action, SCENARIO)) == rendered


def test_free_text_is_the_final_answer():
    action = coerce("Python 3.13.0 came out on 7 October 2024.")
    assert action.kind == "text" and SEARCH.is_final(action)
    assert SEARCH.render_action(action, SCENARIO) == "Python 3.13.0 came out on 7 October 2024."
    assert not SEARCH.is_final(coerce({"name": "web_search", "arguments": {"query": "x"}}))


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            {"name": "web_search", "arguments": {"queries": []}},
            r"queries: \[\] should be non-empty",
        ),
        (
            {"name": "web_search", "arguments": {"queries": list("abcdef")}},
            "at most 5 queries per call, got 6",
        ),
        ({"name": "web_search", "arguments": {"queries": ["ok", "  "]}}, "query 2 is blank"),
        ({"name": "web_search", "arguments": {"queries": [""]}}, "queries/0: '' should be"),
        ({"name": "web_search", "arguments": {"queries": [3]}}, "3 is not of type 'string'"),
        ({"name": "web_search", "arguments": {}}, "'queries' is a required property"),
        (
            {"name": "web_search", "arguments": {"queries": ["a"], "num": 10}},
            r"\('num' was unexpected\)",
        ),
        (
            {"name": "web_search", "arguments": {"query": "a", "queries": ["b"]}},
            "'queries' or 'query', not both",
        ),
        ({"name": "web_extractor", "arguments": {}}, "'url' is a required property"),
        (
            {"name": "web_extractor", "arguments": {"url": "ftp://files.example.org/a"}},
            "must start with http:// or https://",
        ),
        (
            {"name": "web_extractor", "arguments": {"url": "example.org/page"}},
            "must start with http:// or https://, got 'example.org/page'",
        ),
        ({"name": "web_extractor", "arguments": {"url": "https://"}}, "URL has no host"),
        ({"name": "web_extractor", "arguments": {"url": "https://a.org/x y"}}, "no spaces"),
        (
            {"name": "web_extractor", "arguments": {"url": ["https://a.org", "https://b.org"]}},
            "one URL per call, got 2",
        ),
        (
            {"name": "web_extractor", "arguments": {"url": "https://a.org", "goal": 5}},
            "goal: 5 is not of type 'string'",
        ),
        (
            {"name": "browse", "arguments": {"url": "https://a.org"}},
            "unknown tool 'browse': the search domain has web_search and web_extractor",
        ),
        ([{"keystrokes": "ls\n", "duration": 1}], "takes tool calls"),
    ],
)
def test_bad_actions_are_rejected_with_a_reason(raw, message):
    with pytest.raises(ActionError, match=message):
        coerce(raw)


def test_tool_specs_for_agents():
    specs = tools()
    assert [t.name for t in specs] == ["web_search", "web_extractor"]
    assert SCENARIO.tools() == specs
    openai = specs[0].to_openai()
    assert openai["function"]["parameters"]["properties"]["queries"]["maxItems"] == 5
    assert specs[1].parameters["required"] == ["url"]


# -- what a person types in `simgym play search` -----------------------------------------


@pytest.mark.parametrize(
    "line, action",
    [
        (
            "search python 3.13 release | free-threaded python ",
            Action.tool_call(
                "web_search", {"queries": ["python 3.13 release", "free-threaded python"]}
            ),
        ),
        (
            "open https://www.python.org/downloads/ latest version",
            Action.tool_call(
                "web_extractor",
                {"url": "https://www.python.org/downloads/", "goal": "latest version"},
            ),
        ),
        ("open https://a.org/x", Action.tool_call("web_extractor", {"url": "https://a.org/x"})),
        ("answer It was released in 2024.", Action.say("It was released in 2024.")),
        (
            '{"name": "web_search", "arguments": {"query": "x"}}',
            Action.tool_call("web_search", {"query": "x"}),
        ),
        (
            'web_extractor {"url": "https://a.org"}',
            Action.tool_call("web_extractor", {"url": "https://a.org"}),
        ),
    ],
)
def test_play_input(line, action):
    assert SEARCH.parse_input(line, SCENARIO) == action


@pytest.mark.parametrize(
    "line, message",
    [
        ("search  | ", "search QUERY"),
        ("open", "open URL"),
        ("what is python", "type `search QUERY"),
        ("web_search {not json", "not valid JSON"),
    ],
)
def test_play_input_errors(line, message):
    with pytest.raises(ActionError, match=message):
        SEARCH.parse_input(line, SCENARIO)


# -- scenario ----------------------------------------------------------------------------


def test_scenario_schema():
    s = SEARCH.scenario(
        {
            "current_date": "2024-05-01",
            "documents": [{"url": "https://a.org/x", "title": "X", "date": "2024-04-30"}],
        }
    )
    assert isinstance(s, SearchScenario) and s.current_date.isoformat() == "2024-05-01"
    assert s.document("https://www.A.org/x/") is s.documents[0]  # compared loosely
    assert s.document("https://a.org/y") is None
    with pytest.raises(simgym.ScenarioError, match="must start with http"):
        SEARCH.scenario({"documents": [{"url": "file:///etc/passwd", "title": "t"}]})
    with pytest.raises(simgym.ScenarioError, match="unique"):
        SEARCH.scenario(
            {
                "documents": [
                    {"url": "https://a.org/x", "title": "one"},
                    {"url": "https://www.a.org/x/", "title": "two"},
                ]
            }
        )
    with pytest.raises(simgym.ScenarioError, match="results_per_query"):
        SEARCH.scenario({"results_per_query": 0})
    with pytest.raises(simgym.ScenarioError, match="current_date"):
        SEARCH.scenario({"current_date": "next tuesday"})


def test_system_prompt_carries_the_hidden_web():
    scenario = SEARCH.scenario(
        {
            "engine": "Bing",
            "current_date": "2024-02-29",
            "results_per_query": 3,
            "language": "de",
            "facts": ["Der Beitrag beträgt 18,36 Euro."],
            "notes": "The fees page moved in 2023.",
            "documents": [
                {
                    "url": "https://a.org/fees",
                    "title": "Fees",
                    "content": "```\ncode\n```\n| a | b |",
                }
            ],
        }
    )
    prompt = SEARCH.system_prompt(scenario)
    for piece in (
        "Engine: Bing",
        "Today is 2024-02-29",
        "pages: de",
        "at most 3 results",
        "- Der Beitrag beträgt 18,36 Euro.",
        "- The fees page moved in 2023.",
        "URL: https://a.org/fees",
        "   Page text:\n      ```\n      code\n      ```\n      | a | b |",  # indented
        '## Results for "node 22 recall"',  # demonstrations
    ):
        assert piece in prompt, piece
    assert "$" not in SEARCH.system_prompt(SCENARIO).replace("$60", "")
    # Compact for the embedded model: the default prompt stays well under 1000 tokens.
    assert len(SEARCH.system_prompt(SCENARIO)) < 3900


def test_initial_observation_and_prefix():
    assert "Today is 2025-06-02" in SEARCH.initial_observation(SCENARIO)
    search = coerce({"name": "web_search", "arguments": {"queries": ["a", "b"]}})
    assert SEARCH.observation_prefix(search, SCENARIO, "") == '## Results for "a"\n'
    known = coerce(
        {
            "name": "web_extractor",
            "arguments": {"url": "https://python.org/downloads/release/python-3130"},
        }
    )
    assert SEARCH.observation_prefix(known, SCENARIO, "") == (
        "# Python Release Python 3.13.0 | Python.org\n"
    )
    unknown = coerce({"name": "web_extractor", "arguments": {"url": "https://a.org"}})
    assert SEARCH.observation_prefix(unknown, SCENARIO, "") == ""


# -- observation check -----------------------------------------------------------------

ONE = Action.tool_call("web_search", {"queries": ["python 3.13 release"]})
TWO = Action.tool_call("web_search", {"queries": ["python 3.13 release", "python 3.13 recall"]})
PAGE = Action.tool_call("web_extractor", {"url": "https://www.python.org/downloads/"})

RESULTS = """## Results for "python 3.13 release"
[1] Python Release Python 3.13.0 | Python.org
URL: https://www.python.org/downloads/release/python-3130/
Snippet: Python 3.13.0 is the newest major release of the Python language.
Date: 2024-10-07

[2] What's New In Python 3.13 — Python 3.13.3 documentation
URL: https://docs.python.org/3/whatsnew/3.13.html
Snippet: This article explains the new features in Python 3.13,
compared to 3.12.
"""


@pytest.mark.parametrize(
    "text, action",
    [
        (RESULTS, ONE),
        (RESULTS + '\n## Results for "python 3.13 recall"\nNo results found.', TWO),
        (RESULTS.replace("Results for", "Results for ", 1), ONE),  # spacing in the heading
        (RESULTS.replace("python 3.13 release", "Python 3.13 Release", 1), ONE),
        (RESULTS.replace("Date: 2024-10-07", "Date: 2024-10"), ONE),  # dated to the month
        (RESULTS.replace("Date: 2024-10-07", "Date: 2025-06-02"), ONE),  # today is fine
        ('## Results for "python 3.13 release"\nError: timeout after 10s', ONE),
        ("Error: 429 Too Many Requests (search quota exceeded)", TWO),
        (  # a query with its own quotes
            '## Results for ""free-threaded" python"\nNo results found for ""free-threaded" '
            'python".',
            Action.tool_call("web_search", {"query": '"free-threaded" python'}),
        ),
        ("# Download Python\n\nThe latest release is Python 3.13.3.", PAGE),
        ("## Downloads\n\n| Version | Date |\n|---|---|\n| 3.13.3 | 2025-04-08 |", PAGE),
        ("Error: 404 Not Found for URL https://www.python.org/downloads/", PAGE),
        ("anything at all", Action.say("final answer")),
    ],
)
def test_well_formed_observations_pass(text, action):
    assert SEARCH.check_observation(text, action, SCENARIO) == []


@pytest.mark.parametrize(
    "text, action, problem",
    [
        ("", ONE, "empty observation"),
        ("[1] Python\nURL: https://python.org", ONE, "no `## Results for"),
        ("Here you go:\n" + RESULTS, ONE, "text before the first results heading: 'Here you go:'"),
        (RESULTS, TWO, "1 results sections for 2 queries"),
        (
            RESULTS.replace("python 3.13 release", "python 3.12 release", 1),
            ONE,
            'section 1 is for "python 3.12 release", expected "python 3.13 release"',
        ),
        (RESULTS.replace("[1]", "[2]").replace("[2] What", "[3] What"), ONE, r"ranks \[2, 3\]"),
        (
            '## Results for "python 3.13 release"\n'
            + "\n".join(f"[{n}] T{n}\nURL: https://a.org/{n}" for n in range(1, 7)),
            ONE,
            r"6 results, more than results_per_query \(5\)",
        ),
        (RESULTS.replace("URL: https://docs", "Link: https://docs"), ONE, r"\[2\] has no URL"),
        (RESULTS.replace("https://docs", "docs"), ONE, r"\[2\]: URL must start with http"),
        (RESULTS.replace("Date: 2024-10-07", "Date: last week"), ONE, "not YYYY-MM-DD"),
        (RESULTS.replace("Date: 2024-10-07", "Date: 2024-13-07"), ONE, "not YYYY-MM-DD"),
        (
            RESULTS.replace("Date: 2024-10-07", "Date: 2025-07-01"),
            ONE,
            r"dated 2025-07-01, after today \(2025-06-02\)",
        ),
        ('## Results for "python 3.13 release"\n', ONE, "no results and no 'No results found'"),
        (
            '## Results for "python 3.13 release"\nSorry, I cannot search.',
            ONE,
            "text before the first result",
        ),
        (RESULTS + "\nNo results found.", ONE, "both results and a 'No results' line"),
        (RESULTS + "</predicted_observation>", ONE, "stray tag"),
        ("The page says Python 3.13.3 is the latest.", PAGE, "does not start with a markdown"),
        ("# Download Python", PAGE, "title but no content"),
        (RESULTS, PAGE, "search results where a page was expected"),
    ],
)
def test_broken_observations_are_flagged(text, action, problem):
    problems = SEARCH.check_observation(text, action, SCENARIO)
    assert any(re.search(problem, p) for p in problems), problems


# -- episodes ---------------------------------------------------------------------------


async def test_embedded_model_simulates_search_turns():
    env = simgym.make("search", world_model="local", max_tokens=48, seed=5, render_known=True)
    first = await env.reset("When was Python 3.13.0 released?")
    assert first.kind == "initial" and "web_search" in first.text
    res = await env.step({"name": "web_search", "arguments": {"queries": ["python 3.13.0"]}})
    assert res.observation.kind == "observation" and res.observation.text.strip()
    res = await env.step(
        {
            "name": "web_extractor",
            "arguments": {"url": "https://www.python.org/downloads/release/python-3130/"},
        }
    )
    assert res.observation.kind == "observation" and res.observation.text.strip()
    turns = env.trajectory.turns
    assert len(turns) == 2 and all(t.in_history for t in turns)
    assert all(t.usage.completion_tokens > 0 for t in turns)
    assert turns[0].usage.prompt_tokens > 500
    await env.close()


def _spec(name: str):
    (spec,) = load_specs([next(p for p in EXAMPLES if p.name == name)])
    return spec


async def test_replay_round_trip(tmp_path):
    spec = _spec("pandas_release_date.yaml")
    scenario = SEARCH.scenario(spec.task.scenario)
    path = tmp_path / "search.jsonl"
    with simgym.TrajectoryWriter(path) as writer:
        env = simgym.make(
            "search", world_model=simgym.FunctionWorldModel(rules_engine(scenario)), writer=writer
        )
        recorded = await run_episode(env, spec)
    assert recorded.done and not recorded.truncated
    replay = simgym.make("search", world_model="replay", trajectories=path)
    replayed = await run_episode(replay, spec)
    assert replayed.done and not replayed.error
    assert [t.observation.text for t in replayed.turns] == [
        t.observation.text for t in recorded.turns
    ]
    simulated = [t for t in replayed.turns if t.in_history]
    assert len(simulated) == 4
    assert "Error: 404 Not Found" in simulated[2].observation.text
    for turn in simulated:
        assert SEARCH.check_observation(turn.observation.text, turn.action, scenario) == []


def test_there_are_five_or_more_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
async def test_examples_run_cleanly(path):
    (spec,) = load_specs([path])
    assert spec.task.domain == "search" and spec.task.instruction and 3 <= len(spec.actions) <= 5
    scenario = SEARCH.scenario(spec.task.scenario)
    env = simgym.make("search", world_model=simgym.FunctionWorldModel(rules_engine(scenario)))
    trajectory = await run_episode(env, spec)
    assert not [t for t in trajectory.turns if t.observation.kind == "error"]
    assert trajectory.done  # every example ends with the agent's answer
    for turn in trajectory.turns:
        if turn.in_history:
            assert turn.format_problems == [], (turn.action_text, turn.observation.text)
            assert SEARCH.check_observation(turn.observation.text, turn.action, scenario) == []


# -- strict mode mends a results page the engine could not have written ------------------

# What the embedded model wrote for two dev-set rows (a URL only inside the title line, an
# entry with no URL at all; a page fetch answered with a results list).
LOOSE_RESULTS = (
    '## Results for "option parsing"\n\n'
    "[1] option parsing: https://docs.python.org/3/library/getopt.html\n"
    "  ... the default parser for command line options\n"
    "[2] Counter.count() counts hashable items\n\n"
    '## Results for "a query nobody asked"\n[1] x\nURL: https://example.org/x'
)
RESULTS_FOR_A_PAGE = (
    '## Results for "web_extractor"\n'
    "[1] calendar — Calendar class\n"
    "URL: https://docs.python.org/3/library/calendar.html\n"
    "Snippet: … The following classes are available in the module …"
)


def _call(name, **arguments):
    return SEARCH.validate_action(Action.tool_call(name, arguments), SCENARIO)


def test_repair_keeps_the_models_results_in_the_engines_layout():
    action = _call("web_search", queries=["option parsing", "heap queue"])
    assert SEARCH.check_observation(LOOSE_RESULTS, action, SCENARIO)  # broken as written
    fixed = SEARCH.repair(LOOSE_RESULTS, action, SCENARIO)
    assert fixed == (
        '## Results for "option parsing"\n'
        "[1] option parsing\n"
        "URL: https://docs.python.org/3/library/getopt.html\n"
        "Snippet: ... the default parser for command line options\n\n"
        '## Results for "heap queue"\n'
        'No results found for "heap queue".'
    )
    assert SEARCH.check_observation(fixed, action, SCENARIO) == []


def test_repair_turns_a_results_list_for_a_page_into_the_page():
    action = _call("web_extractor", url="https://docs.python.org/3/library/calendar.html")
    fixed = SEARCH.repair(RESULTS_FOR_A_PAGE, action, SCENARIO)
    assert fixed == (
        "# calendar — Calendar class\n\nThe following classes are available in the module"
    )
    assert SEARCH.check_observation(fixed, action, SCENARIO) == []
    # a page, an error and prose with no entries are left as they are
    assert SEARCH.repair("# Calendar\n\ntext", action, SCENARIO) is None
    assert SEARCH.repair("Error: 404 Not Found for URL x", action, SCENARIO) is None
    assert SEARCH.repair("The calendar module prints calendars.", action, SCENARIO) is None


@pytest.mark.parametrize(("grounding", "mended"), [("strict", True), ("facts", False)])
async def test_strict_mode_mends_a_loose_results_page_and_records_the_models(grounding, mended):
    answer = f"<predicted_observation>{LOOSE_RESULTS}</predicted_observation>"
    env = simgym.make(
        "search",
        world_model=simgym.FunctionWorldModel(lambda messages: answer),
        grounding=grounding,
        validation_retries=0,
    )
    await env.reset("find the option parser")
    result = await env.step({"name": "web_search", "arguments": {"queries": ["option parsing"]}})
    turn = env.trajectory.turns[0]
    if mended:
        assert result.observation.text.startswith('## Results for "option parsing"\n[1] option')
        assert turn.format_problems == []
        assert turn.grounding["strict"]["repaired"] == LOOSE_RESULTS
    else:
        assert result.observation.text == LOOSE_RESULTS
        assert turn.format_problems
