"""Slots of the local backend: each live episode keeps its evaluated prompt prefix."""

import asyncio

import pytest

from simgym.worldmodels.local import (
    LocalWorldModel,
    SlotChoice,
    SlotView,
    choose_slot,
    common_prefix,
    generate_chat,
    unload_models,
)

# --- the chooser, as a pure function -------------------------------------------------


def test_a_continuing_episode_keeps_its_slot():
    views = [
        SlotView(shared=400, settled=380, last_used=1),  # this episode's history
        SlotView(shared=300, settled=350, last_used=2),  # another episode, same system prompt
    ]
    assert choose_slot(views, can_open=True) == SlotChoice(0)


def test_among_slots_holding_the_history_the_longest_prefix_wins():
    views = [
        SlotView(shared=300, settled=250, last_used=5),
        SlotView(shared=420, settled=400, last_used=1),
    ]
    assert choose_slot(views, can_open=False) == SlotChoice(1)


def test_a_new_episode_opens_a_slot_seeded_from_the_longest_shared_prefix():
    # Both slots share only the system prompt (300 tokens) with the request: taking either
    # would throw away another episode's history, so open a slot and copy the prefix.
    views = [
        SlotView(shared=300, settled=900, last_used=1),
        SlotView(shared=310, settled=700, last_used=2),
    ]
    assert choose_slot(views, can_open=True) == SlotChoice(None, source=1)


def test_a_finished_episodes_slot_is_reused_before_opening_another():
    # Slot 0 has been idle for four rounds of the open slots: its episode is over.
    views = [
        SlotView(shared=300, settled=900, last_used=1),
        SlotView(shared=320, settled=700, last_used=9),
    ]
    assert choose_slot(views, can_open=True) == SlotChoice(0, source=1)
    # One used within the last rounds may belong to a live episode: open another instead.
    views = [SlotView(shared=300, settled=900, last_used=3), SlotView(300, 700, last_used=9)]
    assert choose_slot(views, can_open=True) == SlotChoice(None, source=1)


def test_a_full_pool_of_live_episodes_gives_up_the_most_recently_used_slot():
    # More live episodes than slots, taking turns: the least recently used slot is the one
    # whose episode comes next, the most recently used the one that comes last.
    views = [
        SlotView(shared=300, settled=900, last_used=7),
        SlotView(shared=300, settled=700, last_used=3),
        SlotView(shared=300, settled=800, last_used=5),
    ]
    # The evicted slot already holds the shared prefix: nothing to copy.
    assert choose_slot(views, can_open=False) == SlotChoice(0)
    views[0] = SlotView(shared=40, settled=900, last_used=7)
    assert choose_slot(views, can_open=False) == SlotChoice(0, source=2)


def test_a_full_pool_gives_up_a_stale_slot_first_the_least_recently_used():
    views = [
        SlotView(shared=2, settled=0, last_used=30),
        SlotView(shared=2, settled=0, last_used=5),
        SlotView(shared=2, settled=0, last_used=9),
    ]
    # Slots 1 and 2 have been idle for four rounds of the three slots; no useful prefix.
    assert choose_slot(views, can_open=False) == SlotChoice(1)


def test_more_episodes_than_slots_still_mostly_hit():
    """Round-robin over n episodes with k < n slots keeps about k - 1 of them in place
    (evicting the least recently used instead would make every request miss). Counted from
    the third round: on the first turn, episodes share all but their action and may still
    take each other's slot (losing only one turn)."""

    def hit_rate(episodes: int, capacity: int, rounds: int = 8) -> float:
        held: list[tuple[int, int, int]] = []  # (episode, history tokens, last used)
        history = dict.fromkeys(range(episodes), 0)
        clock = hits = 0
        for r in range(rounds):
            for e in range(episodes):
                views = [
                    SlotView(300 + history[e] if ep == e else 300, 300 + h, used)
                    for ep, h, used in held
                ]
                choice = choose_slot(views, can_open=len(held) < capacity)
                clock += 1
                if choice.target is None:
                    held.append((e, history[e], clock))
                else:
                    hits += r > 1 and held[choice.target][0] == e
                    held[choice.target] = (e, history[e], clock)
                history[e] += 50
        return hits / (episodes * (rounds - 2))

    assert hit_rate(6, 8) == 1.0
    assert hit_rate(6, 6) == 1.0
    assert hit_rate(8, 6) > 0.6
    assert hit_rate(6, 4) > 0.5


def test_a_never_used_slot_comes_before_opening_or_evicting():
    views = [SlotView(shared=500, settled=900, last_used=1), SlotView(0, 0, 0)]
    assert choose_slot(views, can_open=True) == SlotChoice(1, source=0)


def test_busy_slots_are_neither_targets_nor_sources():
    views = [
        SlotView(shared=0, settled=100, last_used=3, busy=True),
        SlotView(shared=50, settled=900, last_used=2),
    ]
    assert choose_slot(views, can_open=False) == SlotChoice(1)
    assert choose_slot([SlotView(0, 0, 1, busy=True)], can_open=False) is None
    assert choose_slot([SlotView(0, 0, 1, busy=True)], can_open=True) == SlotChoice(None)


def test_one_slot_behaves_like_a_single_context():
    for view in (SlotView(500, 400, 1), SlotView(300, 900, 1), SlotView(0, 0, 0)):
        assert choose_slot([view], can_open=False) == SlotChoice(0)


def test_common_prefix():
    assert common_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([5], [6]) == 0


# --- the real model --------------------------------------------------------------------

SYSTEM = {
    "role": "system",
    "content": "You are a Linux terminal. Print only what the screen shows. Files in the "
    "home directory: " + ", ".join(f"notes{i}.txt" for i in range(30)) + ".",
}


def episode(name: str, turns: int) -> list[dict[str, str]]:
    """The messages of an episode after ``turns`` earlier turns, asking for the next."""
    messages = [SYSTEM]
    for t in range(turns):
        messages.append(
            {"role": "user", "content": f"### Turn {t + 1}\n\n**Action:**\necho {name}{t}"}
        )
        messages.append(
            {"role": "assistant", "content": f"**Environment Observation:**\n{name}{t}"}
        )
    messages.append({"role": "user", "content": f"### Turn {turns + 1}\n\n**Action:**\ncat {name}"})
    return messages


@pytest.fixture(scope="module", autouse=True)
def _free_models():
    yield
    unload_models()


def run_interleaved(wm: LocalWorldModel, names: list[str], turns: int) -> list[str]:
    async def go() -> list[str]:
        out = []
        for t in range(turns):
            for name in names:
                pred = await wm.predict(episode(name, t), temperature=0.0, seed=1)
                out.append(pred.raw)
        return out

    return asyncio.run(go())


def test_interleaved_episodes_each_keep_their_own_slot():
    wm = LocalWorldModel(slots=4, max_tokens=6, temperature=0.0, n_ctx=1024)
    run_interleaved(wm, ["alpha", "beta"], turns=3)
    calls = list(wm.calls)
    slot_of = {
        "alpha": {c["slot"] for c in calls[0::2][1:]},
        "beta": {c["slot"] for c in calls[1::2][1:]},
    }
    # After the first turn each episode stays on one slot, and not the other's.
    assert len(slot_of["alpha"]) == 1 and len(slot_of["beta"]) == 1
    assert slot_of["alpha"] != slot_of["beta"]
    first_alpha, first_beta = calls[0], calls[1]
    assert first_alpha["evaluated"] == first_alpha["prompt_tokens"]  # a cold start
    # The second episode starts from the system prompt another slot already evaluated.
    assert first_beta["reused"] > 60
    for call in calls[2:]:
        # Only the newest turn (and the answer header) is evaluated, never the history.
        assert call["evaluated"] < 60 < call["reused"], call
    stats = wm.stats()
    assert stats["calls"] == 6 and stats["reused"] + stats["evaluated"] == stats["prompt_tokens"]
    assert stats["slots_open"] == 2


def test_one_slot_re_evaluates_interleaved_histories():
    wm = LocalWorldModel(slots=1, max_tokens=6, temperature=0.0, n_ctx=1024)
    run_interleaved(wm, ["alpha", "beta"], turns=3)
    last = wm.calls[-1]
    assert {c["slot"] for c in wm.calls} == {0}
    # The other episode's history displaced this one's: everything after the system prompt
    # is evaluated again.
    assert last["evaluated"] > 60


@pytest.mark.slow  # ~20 s of two cores: two models, histories re-evaluated with one slot
def test_outputs_do_not_depend_on_the_number_of_slots():
    one = LocalWorldModel(slots=1, max_tokens=8, temperature=0.0, n_ctx=1024)
    four = LocalWorldModel(slots=4, max_tokens=8, temperature=0.0, n_ctx=1024)
    names = ["gamma", "delta"]
    assert run_interleaved(one, names, turns=2) == run_interleaved(four, names, turns=2)
    # The slots were really used, one of them seeded with a prefix copied from another.
    assert {c["slot"] for c in four.calls} != {0} and four.stats()["copied"] > 0


def test_the_local_agent_path_shares_the_slots():
    wm = LocalWorldModel(slots=2, max_tokens=6, n_ctx=1024, prefill=False, adapter=None)
    messages = [SYSTEM, {"role": "user", "content": "List the files."}]
    text, usage = generate_chat(wm, messages, max_tokens=6, temperature=0.0, seed=1)
    again, _ = generate_chat(wm, messages, max_tokens=6, temperature=0.0, seed=1)
    assert text == again and usage.completion_tokens > 0
    assert wm.calls[-1]["evaluated"] <= 1  # the whole prompt was already held


def test_state_cache_option_still_works():
    wm = LocalWorldModel(slots=1, cache_mb=64, max_tokens=6, temperature=0.0, n_ctx=1024)
    first = run_interleaved(wm, ["alpha"], turns=1)
    assert first == run_interleaved(wm, ["alpha"], turns=1)


def test_slots_must_be_positive():
    from simgym import WorldModelError

    with pytest.raises(WorldModelError, match="at least 1"):
        LocalWorldModel(slots=0)
