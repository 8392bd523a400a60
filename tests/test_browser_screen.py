"""The browser's own part of a web step (simgym.domains._gui.browser): exact next screens
for page-local actions, checked against a real browser's recordings."""

from __future__ import annotations

from pathlib import Path

from simgym.core.domain import get_domain
from simgym.core.state import merge_patch
from simgym.core.trajectories import read_trajectories
from simgym.domains._gui import browser
from simgym.domains._gui.ground import ground_web, observe_web

DEVSET = Path(__file__).resolve().parent.parent / "devset" / "trajectories.jsonl"

FORM = """\
[1] RootWebArea 'Checkout', focused
  [2] form ''
    [3] textbox 'Name'
    [4] textbox 'Email', value='a@b.c', required
    [5] combobox 'Shipping', value='Standard'
      [6] option 'Standard', selected=true
      [7] option 'Express', selected=false
    [8] checkbox 'News', checked=false
    StaticText 'News'
    [9] textbox 'Password'
    [10] button 'Pay'"""


def state(**extra):
    return {"url": "https://s.example/cart", "title": "Checkout", "tree": FORM, **extra}


def screen(name, **args):
    found = browser.next_screen(name, args, state())
    return None if found is None else found.observation.splitlines()


def test_recorded_web_episodes_are_met_exactly_wherever_the_browser_decides():
    """Replays the dev set's web episodes (a real Chromium on the demo shop): every exact
    screen simgym computes equals the one the real browser showed."""
    domain = get_domain("web")
    answered = agreed = actions = 0
    for trajectory in read_trajectories(DEVSET):
        if trajectory.domain != "web":
            continue
        scenario = domain.scenario_model.model_validate(trajectory.scenario)
        ledger = domain.initial_state(scenario)
        for turn in trajectory.turns:
            if turn.action.kind != "tool_call":
                continue
            actions += 1
            grounding = ground_web(turn.action, ledger, scenario)
            real = turn.observation.text.strip()
            if grounding is not None and grounding.observation is not None:
                answered += 1
                agreed += grounding.observation.strip() == real
            ledger = merge_patch(ledger, observe_web(real, turn.action, ledger))
    assert actions == 74
    assert answered >= 30 and agreed == answered


def test_fill_moves_the_focus_and_shows_the_value_in_order():
    lines = screen("fill", bid="3", value="Ana")
    assert lines[:2] == ["URL: https://s.example/cart", "Title: Checkout"]
    assert "[1] RootWebArea 'Checkout'" in lines
    assert "    [3] textbox 'Name', focused, value='Ana'" in lines
    # the value sits between the focus and the other properties, as the browser writes
    assert "    [4] textbox 'Email', focused, value='x@y.z', required" in screen(
        "fill", bid="4", value="x@y.z"
    )
    assert "    [4] textbox 'Email', focused, required" in screen("clear", bid="4")
    assert "    [9] textbox 'Password', focused, value='\u2022\u2022\u2022'" in screen(
        "fill", bid="9", value="abc"
    )


def test_select_tick_tab_and_backspace():
    lines = screen("select_option", bid="5", options="Express")
    assert "    [5] combobox 'Shipping', value='Express'" in lines
    assert "      [7] option 'Express', selected=true" in lines
    assert screen("select_option", bid="5", options="Overnight") is None  # no such option
    assert "    [8] checkbox 'News', focused, checked=true" in screen("click", bid="8")
    assert "    [4] textbox 'Email', focused, value='a@b.c', required" in screen(
        "press", bid="3", key_comb="Tab"
    )
    assert "    [4] textbox 'Email', focused, value='a@b.', required" in screen(
        "press", bid="4", key_comb="Backspace"
    )


def test_what_the_site_decides_is_left_to_the_model():
    assert screen("click", bid="10") is None  # a button runs the site's code
    assert screen("press", bid="4", key_comb="Enter") is None  # submits the form
    assert screen("fill", bid="10", value="x") is None  # the browser's own error wording
    assert browser.next_screen("go_back", {}, state()) is None
    assert browser.next_screen("fill", {"bid": "3", "value": "x"}, {"tree": FORM}) is None
    # a layout this module cannot write back unchanged (tabs, double quotes)
    foreign = state(tree='[1] RootWebArea "Checkout"\n\t[3] textbox "Name"')
    assert browser.next_screen("fill", {"bid": "3", "value": "x"}, foreign) is None


def test_tabs_new_and_missing():
    lines = screen("new_tab")
    assert lines == [
        "URL: about:blank",
        "Title: ",
        "Tabs: [0] Checkout | [1] New Tab (active)",
        "[1] RootWebArea '', focused",
    ]
    two = state(tabs="[0] Checkout (active) | [1] Help")
    missing = browser.next_screen("tab_focus", {"index": 5}, two).observation.splitlines()
    assert missing[2:4] == [
        "Tabs: [0] Checkout (active) | [1] Help",
        "Error: no tab at index 5 (2 open)",
    ]
    assert browser.next_screen("tab_focus", {"index": 1}, two) is None  # that page is not known
    assert "Error: element 42 not found" in screen("hover", bid="42")
    assert screen("scroll", delta_x=0, delta_y=300)[2:] == FORM.splitlines()
