"""Grounding of the search, web, os and android domains: facts from the scenario's pages
and from the screen tree in the hidden state, and what SimEnv does with them."""

from __future__ import annotations

import json

import pytest

import simgym
from simgym import Action
from simgym.core.grounding import FACTS_HEADER
from simgym.core.state import StateLedger, merge_patch
from simgym.domains import search_ground
from simgym.domains._gui import ground as gui_ground
from simgym.domains.search import SearchScenario
from simgym.worldmodels.function import FunctionWorldModel
from simgym.worlds.generate import generate_world
from simgym.worlds.render import page_url
from simgym.worlds.tasks import generate_tasks
from simgym.worlds.themes import THEMES

PY_URL = "https://www.python.org/downloads/release/python-3130/"
PY_TITLE = "Python Release Python 3.13.0 | Python.org"


def setup(name, scenario=None):
    domain = simgym.get_domain(name)
    scn = domain.scenario(scenario)
    return domain, scn, domain.initial_state(scn)


def ground(name, raw, state=None, scenario=None):
    domain, scn, initial = setup(name, scenario)
    action = domain.coerce_action(raw, scn, 4000)
    return domain.ground(action, initial if state is None else state, scn)


def tagged(text):
    return f"<predicted_observation>\n{text}\n</predicted_observation>"


def last_user(messages):
    return messages[-1]["content"]


# -- search -------------------------------------------------------------------------------


def search(*queries):
    return {"name": "web_search", "arguments": {"queries": list(queries)}}


def extract(url, goal=None):
    return {"name": "web_extractor", "arguments": {"url": url, **({"goal": goal} if goal else {})}}


def test_search_facts_name_the_matching_page_and_expect_it_first():
    g = ground("search", search("python 3.13 release date"))
    fact = g.facts[0]
    assert '"python 3.13 release date"' in fact
    assert PY_URL in fact and PY_TITLE in fact and "Date: 2024-10-07" in fact
    assert "Snippet: Release date: Oct. 7, 2024" in fact  # no snippet: the text's start
    assert g.expect == [PY_URL] and g.observation is None and g.effects is None


def test_search_says_nothing_about_queries_the_scenario_does_not_answer():
    assert ground("search", search("node 22 release notes")) is None
    g = ground("search", search("node 22 release notes", "python 3.13 free-threaded"))
    assert len(g.facts) == 2 and "python 3.13 free-threaded" in g.facts[0]


def test_a_page_without_a_goal_is_exact_and_passes_the_domain_check():
    domain, scn, state = setup("search")
    action = domain.coerce_action(
        extract("http://python.org/downloads/release/python-3130"), scn, 99
    )
    g = domain.ground(action, state, scn)
    assert g.observation.startswith(f"# {PY_TITLE}\n\nRelease date: Oct. 7, 2024")
    assert domain.check_observation(g.observation, action, scn) == []
    assert PY_TITLE in g.facts[0] and "Release date" in g.facts[1]


def test_a_page_with_a_goal_expects_its_title_and_the_line_that_serves_the_goal():
    g = ground("search", extract(PY_URL, goal="release date"))
    assert g.observation is None
    assert g.expect == [f"# {PY_TITLE}", "Release date: Oct. 7, 2024"]


def test_the_open_web_is_left_to_the_model_unless_the_corpus_is_closed():
    assert ground("search", extract("https://nodejs.org/en")) is None

    class Closed(SearchScenario):
        closed: bool = True

    domain, scn, state = setup("search")
    closed = Closed.model_validate(scn.model_dump())
    action = domain.coerce_action(extract("https://nodejs.org/en"), closed, 99)
    g = domain.ground(action, state, closed)
    assert g.observation == "Error: 404 Not Found for URL https://nodejs.org/en"
    assert domain.check_observation(g.observation, action, closed) == []
    assert (
        "no other pages"
        in domain.ground(
            domain.coerce_action(search("python 3.13"), closed, 99), state, closed
        ).facts[-1]
    )


def test_observed_results_give_invented_pages_their_title():
    results = (
        '## Results for "node 22"\n[1] Node v22.0.0 (Current) | Node.js\n'
        "URL: https://nodejs.org/en/blog/release/v22.0.0\nSnippet: Node 22 is out."
    )
    action = Action.tool_call("web_search", {"queries": ["node 22"]})
    patch = search_ground.observe_search(results, action, {"facts": []})
    assert patch["seen"] == {
        "https://nodejs.org/en/blog/release/v22.0.0": results.split("\n")[1][4:]
    }
    assert patch["_answers"] == {"q:node 22": results}
    state = merge_patch({"facts": []}, patch)
    g = ground("search", extract("https://nodejs.org/en/blog/release/v22.0.0"), state)
    assert g.facts == [
        "earlier results listed https://nodejs.org/en/blog/release/v22.0.0 as "
        '"Node v22.0.0 (Current) | Node.js"'
    ]


def test_compound_terms_and_word_forms_meet():
    assert "3.13" in search_ground.page_terms("Python 3.13.0")
    assert search_ground.query_terms("phones released") == search_ground.query_terms(
        "phone release"
    )


@pytest.mark.parametrize("theme", sorted(THEMES))
def test_fictional_world_pages_are_found_by_their_names(theme):
    world = generate_world(theme, 7)
    for task in generate_tasks(world, 4, domain="search"):
        scenario = SearchScenario.model_validate(task.scenario)
        for table, key in task.metadata["refs"]:
            row = world.row(table, key)
            g = ground("search", search(world.label(table, row)), scenario=scenario)
            assert g is not None and g.expect == [page_url(world, table, row)]


# -- web ----------------------------------------------------------------------------------


def test_web_facts_name_the_element_and_forget_the_screen():
    g = ground("web", "click('10')")
    assert g.facts == [
        "the browser is at https://harborbooks.example/cart",
        'element 10 is a button "Checkout"',
    ]
    assert g.effects == {"tree": None} and g.expect == []
    quantity = ground("web", "click('7')").facts[1]
    assert quantity == (
        "element 7 is a spinbutton \"Quantity\" (value='1'), inside listitem 6 "
        '"The Salt Road - $18.00"'
    )


def test_web_missing_element_gets_the_browsers_error_line_on_the_unchanged_page():
    g = ground("web", "click('99')")
    assert "element 99 does not exist on the current page" in g.facts
    _, scenario, _ = setup("web")
    assert g.observation == (
        "URL: https://harborbooks.example/cart\nTitle: Your cart - Harbor Books\n"
        f"Error: element 99 not found\n{scenario.page}"
    )
    # A button cannot be filled; the real browser's wording is not known, so no exact page.
    unfillable = ground("web", "fill('10', 'hello')")
    assert unfillable.observation is None and unfillable.expect[0] == "Error:"


def test_web_fill_shows_the_text_except_in_password_fields():
    g = ground("web", "fill('3', 'lighthouse')")
    lines = g.observation.splitlines()
    assert "  [3] searchbox 'Search books', focused, value='lighthouse'" in lines
    assert "[1] RootWebArea 'Your cart - Harbor Books'" in lines  # the focus moved
    state = {
        "url": "https://x.example/login",
        "title": "Login",
        "tree": "[1] RootWebArea 'Login'\n  [2] textbox 'Password'",
    }
    shown = ground("web", "fill('2', 's3cret!')", state).observation
    assert "s3cret!" not in shown and "value='\u2022\u2022\u2022\u2022\u2022\u2022\u2022'" in shown
    del state["title"]  # the page's title unknown: no exact page, the text is not expected
    assert "s3cret!" not in ground("web", "fill('2', 's3cret!')", state).expect


def test_web_goto_changes_the_url_and_describes_known_pages():
    g = ground("web", "goto('https://harborbooks.example/checkout')")
    assert g.effects == {"tree": None, "url": "https://harborbooks.example/checkout"}
    assert any("Place order" in f for f in g.facts)
    assert g.expect == ["https://harborbooks.example/checkout"]
    assert ground("web", "new_tab()").effects["url"] == "about:blank"


def test_web_observation_becomes_the_screen_for_the_next_action():
    """What a core ``observe`` hook would do: effects, then the observation's patch."""
    _, _, state = setup("web")
    state = merge_patch(state, ground("web", "click('10')", state).effects)
    assert "tree" not in state and ground("web", "click('10')", state) is None
    page = "URL: https://harborbooks.example/checkout\nTitle: Checkout\n[1] RootWebArea 'Checkout'\n  [20] button 'Place order'"
    action = Action.tool_call("click", {"bid": "10"})
    state = merge_patch(state, gui_ground.observe_web(page, action, state))
    assert state["url"] == "https://harborbooks.example/checkout"
    assert 'element 20 is a button "Place order"' in ground("web", "click('20')", state).facts


# -- os -----------------------------------------------------------------------------------


def test_os_click_names_the_element_under_the_point_and_moves_the_mouse():
    g = ground("os", "pyautogui.click(1760, 50)")
    assert g.facts[0] == 'the focused window is "todo.txt (~/Documents) - Text Editor"'
    assert g.facts[1].startswith('the point (1760, 50) is on element 4, a push-button "Save"')
    assert g.effects == {"tree": None, "mouse": [1760, 50]}
    assert "no element" in ground("os", "pyautogui.click(5, 5)").facts[1]
    _, _, state = setup("os")
    state["mouse"] = [20, 50]
    assert 'push-button "Open"' in ground("os", "pyautogui.click()", state).facts[1]


def test_os_typing_expects_the_text_in_the_focused_editable_element():
    g = ground("os", "pyautogui.write('hello there')")
    assert "keyboard focus is on element 5" in g.facts[1] and g.expect == ["hello there"]
    # In a sequence the click may move the focus: only the first call is grounded.
    g = ground("os", "pyautogui.click(20, 50)\npyautogui.write('hello there')")
    assert g.expect == [] and "Open" in g.facts[1] and g.effects["mouse"] == [20, 50]


def test_os_observation_patch_reads_the_focused_window():
    shot = "Focused window: Open File\n[1] application 'Text Editor'\n  [20] dialog 'Open File'"
    patch = gui_ground.observe_os(shot, Action.tool_call("WAIT"), {})
    assert patch == {"tree": shot.split("\n", 1)[1], "focused": "Open File"}


# -- android ------------------------------------------------------------------------------


def test_android_tap_facts_and_missing_elements():
    g = ground("android", "tap('6')")
    assert g.facts == [
        "the foreground app is Settings (com.android.settings/.Settings)",
        'element 6 is an android.widget.LinearLayout "Battery" with text '
        '"72% - Should last until about 9 PM" (clickable)',
    ]
    assert "element 42 does not exist on the current screen" in ground("android", "tap('42')").facts


def test_android_typing_open_app_and_home():
    state = {
        "app": "Messages",
        "activity": "",
        "tree": "[1] android.widget.FrameLayout ''\n  [5] android.widget.EditText 'Message' focused",
    }
    assert ground("android", "type('5', 'see you at 6')", state).expect == ["see you at 6"]
    g = ground("android", "open_app('clock')")
    assert g.effects == {"tree": None, "app": "Clock", "activity": ""} and g.expect == ["Clock"]
    assert "is installed" in g.facts[-1]
    assert "no app named" in ground("android", "open_app('Maps')").facts[-1]
    assert ground("android", "home()").expect == ["App: Home screen"]


def test_android_observation_patch_reads_app_and_activity():
    screen = "App: Clock\n[1] android.widget.FrameLayout ''"
    patch = gui_ground.observe_android(screen, Action.tool_call("wait"), {})
    assert patch == {"tree": "[1] android.widget.FrameLayout ''", "app": "Clock", "activity": ""}


def test_os_click_hits_the_topmost_window():
    """A dialog listed after the editor is on top: its button takes the click, not the
    deeper text field under it."""
    tree = (
        "[1] application 'Text Editor'\n"
        "  [2] frame 'notes' pos=(0,0) size=(1920,1080)\n"
        "    [3] text 'body' editable pos=(0,40) size=(1920,1040)\n"
        "[9] dialog 'Allow?' pos=(660,420) size=(600,240)\n"
        "  [10] push-button 'Allow' pos=(1080,600) size=(160,40)"
    )
    state = {"focused": "Allow?", "tree": tree}
    assert (
        'element 10, a push-button "Allow"'
        in ground("os", "pyautogui.click(1160, 620)", state).facts[1]
    )
    assert "element 3, a text" in ground("os", "pyautogui.click(100, 100)", state).facts[1]


def state_only_env(name, scenario):
    """A strict env whose world model fails the test if asked: every answer must come
    from the state."""

    def no_model(messages):
        raise AssertionError("the world model was asked")

    env = simgym.SimEnv(
        name,
        FunctionWorldModel(no_model),
        scenario=scenario,
        grounding="strict",
        render_known=False,
    ).sync()
    env.reset()
    return env


PINNED = {
    "web": (
        "click('10')",
        "URL: https://harborbooks.example/checkout\nTitle: Checkout\n"
        "[1] RootWebArea 'Checkout', focused\n  [2] button 'Pay'",
    ),
    "os": ("pyautogui.click(1760, 50)", "Focused window: Saved\n[1] application 'Text Editor'"),
    "android": ("tap('6')", "App: Settings\n[1] android.widget.FrameLayout 'Battery'"),
}


@pytest.mark.parametrize("name", ["web", "os", "android"])
def test_pinned_screens_are_exact_and_served_without_the_model(name):
    action, screen = PINNED[name]
    domain = simgym.get_domain(name)
    # keys are read in call syntax and rewritten the way the domain renders actions
    loose = action.replace("'", '"').replace(", ", ",")
    scenario = {**domain.default_scenario(), "screens": {loose: screen}}
    g = ground(name, action, scenario=scenario)
    assert g.observation == screen and "fixes what this action shows" in g.facts[-1]

    env = state_only_env(name, scenario)
    assert env.step(action).observation.text == screen
    with pytest.raises(simgym.ScenarioError, match="screens"):
        domain.scenario({**scenario, "screens": {action: "no header line"}})


@pytest.mark.parametrize("name", ["web", "os", "android"])
def test_initial_state_holds_the_first_screen_and_fits_the_schema(name):
    domain, scn, state = setup(name)
    ledger = StateLedger(state, domain.state_schema)
    assert gui_ground.screen_tree(ledger.state) is not None
    assert ledger.apply({"tree": None}).applied


# -- in SimEnv ----------------------------------------------------------------------------


def recording(answer):
    """A world model that answers ``answer(messages)`` and keeps every request."""
    seen = []

    def world(messages):
        seen.append(json.loads(json.dumps(messages)))
        return tagged(answer(messages))

    return world, seen


async def run(name, actions, answer, grounding="facts", scenario=None):
    world, seen = recording(answer)
    env = simgym.make(
        name, world_model=FunctionWorldModel(world), grounding=grounding, scenario=scenario
    )
    await env.reset()
    results = [await env.step(a) for a in actions]
    return env, seen, results


async def test_search_env_strict_corrects_an_invented_page():
    env, seen, results = await run(
        "search", [extract(PY_URL)], lambda m: "# Python 3.13\n\nReleased in 2023.", "strict"
    )
    text = last_user(seen[-1])
    assert FACTS_HEADER in text and PY_TITLE in text
    assert text.index(FACTS_HEADER) < text.index("**Action:**")
    assert results[0].observation.text.startswith(f"# {PY_TITLE}\n\nRelease date")
    turn = env.trajectory.turns[0]
    assert turn.grounding["exact"] is True and turn.grounding["strict"]["action"] == "corrected"


INVENTED_RESULTS = (
    '## Results for "python 3.13 release date"\n'
    "[1] Node v22.0.0 (Current) | Node.js\n"
    "URL: https://nodejs.org/en/blog/release/v22.0.0\n"
    "Snippet: Node.js 22 was released on April 24, 2024.\n\n"
    "[2] a result with no address\n"
    "Snippet: nothing to open"
)


async def test_search_env_strict_puts_the_known_pages_first_and_keeps_the_open_web():
    env, seen, results = await run(
        "search", [search("python 3.13 release date")], lambda m: INVENTED_RESULTS, "strict"
    )
    text = results[0].observation.text
    sections = search_ground.results_sections(text.split("\n"))[1]
    assert [q for q, _ in sections] == ["python 3.13 release date"]
    entries = search_ground.parse_results(sections[0][1][1:])
    # the scenario's page as the index holds it, ranked first; the model's open-web
    # result after it; the entry with no URL is not a result
    assert (entries[0].title, entries[0].url) == (PY_TITLE, PY_URL)
    assert entries[-1].url == "https://nodejs.org/en/blog/release/v22.0.0"
    assert "a result with no address" not in text
    assert [e.title for e in entries].count(PY_TITLE) == 1
    strict = env.trajectory.turns[0].grounding["strict"]
    assert strict["reshaped"] == INVENTED_RESULTS  # the model's own text is kept
    # the rewrite resolved what strict mode found: the model was not asked again
    assert strict["action"] == "reshaped" and PY_URL in strict["problems"][0]
    assert not any("disagreed with the facts" in last_user(m) for m in seen)


async def test_search_env_strict_lists_known_pages_for_a_query_the_model_skipped():
    queries = ["python 3.13 release date", "zzqx unknown words"]
    env, _, results = await run("search", [search(*queries)], lambda m: INVENTED_RESULTS, "strict")
    sections = search_ground.results_sections(results[0].observation.text.split("\n"))[1]
    assert [q for q, _ in sections] == queries
    assert sections[1][1][1:] == ['No results found for "zzqx unknown words".']


async def test_search_env_strict_keeps_an_error_and_facts_mode_keeps_the_model_text():
    error = "Error: 429 Too Many Requests"
    _, _, results = await run("search", [search("python 3.13")], lambda m: error, "strict")
    assert results[0].observation.text == error
    _, _, results = await run(
        "search", [search("python 3.13 release date")], lambda m: INVENTED_RESULTS, "facts"
    )
    assert results[0].observation.text == INVENTED_RESULTS


def test_a_closed_web_shows_only_its_own_pages():
    scenario = {**simgym.get_domain("search").default_scenario()}
    scenario = SearchScenario.model_validate(scenario).model_copy()
    object.__setattr__(scenario, "closed", True)
    action = simgym.get_domain("search").validate_action(
        Action.parse(json.dumps(search("python 3.13 release date"))), None
    )
    g = search_ground.ground_search(action, {}, scenario)
    reshaped = g.reshape(INVENTED_RESULTS)
    assert PY_URL in reshaped and "nodejs.org" not in reshaped


def test_known_pages_that_fill_every_results_page_are_the_answer_without_the_model():
    scenario = {**simgym.get_domain("search").default_scenario(), "results_per_query": 1}

    env = state_only_env("search", scenario)
    text = env.step(search("python 3.13 release date")).observation.text
    assert text.split("\n")[:3] == [
        '## Results for "python 3.13 release date"',
        f"[1] {PY_TITLE}",
        f"URL: {PY_URL}",
    ]
    assert env.trajectory.turns[0].grounding["strict"]["action"] == "state"


async def test_search_env_off_sends_no_facts():
    env, seen, _ = await run("search", [search("python 3.13")], lambda m: "x", "off")
    assert not any(FACTS_HEADER in last_user(s) for s in seen)
    assert env.trajectory.turns[0].grounding is None


WEB_PAGE = "URL: https://harborbooks.example/cart\nTitle: Cart\n[1] RootWebArea 'Cart'\n  [10] button 'Checkout'"


async def test_web_env_grounds_every_action_on_the_screen_it_last_showed():
    pages = iter([WEB_PAGE, WEB_PAGE.replace("'Checkout'", "'Pay now'"), WEB_PAGE])
    env, seen, _ = await run(
        "web", ["click('10')", "click('10')", "click('10')"], lambda m: next(pages)
    )
    first = last_user(seen[0])
    assert 'element 10 is a button "Checkout"' in first
    turns = env.trajectory.turns
    assert turns[0].grounding["facts"][1] == 'element 10 is a button "Checkout"'
    assert turns[0].grounding["effects"] == {"tree": None}
    # the observation is the new screen: the domain's observe hook puts it in the ledger
    assert "tree" in turns[0].grounding["observed"]
    assert env.state["url"] == "https://harborbooks.example/cart"
    assert 'element 10 is a button "Checkout"' in last_user(seen[1])
    assert 'element 10 is a button "Pay now"' in last_user(seen[2])  # the second screen


async def test_web_env_strict_corrects_a_missing_element_that_seems_to_work():
    env, _, results = await run("web", ["click('99')"], lambda m: WEB_PAGE, "strict")
    strict = env.trajectory.turns[0].grounding["strict"]
    assert strict["action"] == "corrected"
    assert results[0].observation.text.splitlines()[2] == "Error: element 99 not found"


async def test_web_env_strict_asks_again_when_a_button_seems_to_take_text():
    def answer(messages):
        retry = "disagreed with the facts" in last_user(messages)
        error = "Error: element 10 is not a text field\n" if retry else ""
        return WEB_PAGE.replace("Title: Cart\n", f"Title: Cart\n{error}")

    env, _, results = await run("web", ["fill('10', 'hello')"], answer, "strict")
    strict = env.trajectory.turns[0].grounding["strict"]
    assert strict["action"] == "reasked" and "'Error:'" in strict["problems"][0]
    assert "Error:" in results[0].observation.text


async def test_web_env_off_keeps_the_state_as_seeded():
    env, seen, _ = await run("web", ["click('10')"], lambda m: WEB_PAGE, "off")
    assert FACTS_HEADER not in last_user(seen[0]) and "tree" in env.state
    assert env.trajectory.turns[0].grounding is None


async def test_os_env_facts_and_mouse():
    shot = "Focused window: todo.txt\n[1] application 'Text Editor'"
    env, seen, _ = await run("os", ["pyautogui.click(1760, 50)"], lambda m: shot)
    assert 'push-button "Save"' in last_user(seen[0])
    assert env.state["mouse"] == [1760, 50]
    assert env.trajectory.turns[0].grounding["effects"] == {"tree": None, "mouse": [1760, 50]}


async def test_android_env_open_app_is_checked_and_recorded():
    screen = (
        "App: Clock\n[1] android.widget.FrameLayout ''\n  [10] android.widget.TextView '7:00 AM'"
    )
    env, seen, _ = await run("android", ["open_app('Clock')"], lambda m: screen, "strict")
    assert "Clock is installed" in last_user(seen[0])
    turn = env.trajectory.turns[0]
    assert turn.grounding["strict"] == {"problems": [], "action": "accepted"}
    assert env.state["app"] == "Clock" and "7:00 AM" in env.state["tree"]  # observed


def test_search_gives_the_same_answer_to_the_same_call():
    """The engine and its pages do not change during an episode: a query or a page read
    again gets the answer it got before, whatever the model would say."""
    results = '## Results for "tide tables"\n[1] Tides\nURL: https://t.example/\nSnippet: 6am'
    query = Action.tool_call("web_search", {"queries": ["tide tables"]})
    state = merge_patch({}, search_ground.observe_search(results, query, {}))
    assert ground("search", query, state).observation == results
    both = Action.tool_call("web_search", {"queries": ["tide tables", "moon"]})
    assert getattr(ground("search", both, state), "observation", None) is None
    read = Action.tool_call("web_extractor", {"url": "https://t.example/", "goal": "high tide"})
    page = "# Tides\n\nHigh tide at 6."
    state = merge_patch(state, search_ground.observe_search(page, read, state))
    assert ground("search", read, state).observation == page
    other = Action.tool_call("web_extractor", {"url": "https://t.example/", "goal": "low"})
    assert getattr(ground("search", other, state), "observation", None) is None
    # an error is not remembered: a retry may succeed
    assert "_answers" not in search_ground.observe_search("Error: 503", other, state)
    # simgym's bookkeeping never reaches a model shown the state
    ledger = StateLedger(state)
    assert "_answers" not in ledger.render() and "seen" in ledger.render()
