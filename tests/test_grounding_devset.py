"""benchmarks/grounding_devset.py with function world models (no model weights): the
replay sends exactly the dev-set rows' requests with grounding off, the history always
holds the real observations (teacher forcing), only scored turns cost a model call,
strict mode lifts a wrong-answer model on terminal rows, and results resume."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import simgym
from simgym.bench.data import clean_observation, load_rows, select_rows
from simgym.bench.messages import build_messages
from simgym.bench.store import RowWriter, read_rows
from simgym.core.grounding import FACTS_HEADER
from simgym.core.trajectories import read_trajectories

ROOT = Path(__file__).resolve().parent.parent
DEVSET = ROOT / "devset"
WRONG = "<predicted_observation>\nnothing to see here\n</predicted_observation>"


def _load_module():
    spec = importlib.util.spec_from_file_location(
        "grounding_devset", ROOT / "benchmarks" / "grounding_devset.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gd = _load_module()


@pytest.fixture(scope="module")
def devset():
    return load_rows(DEVSET / "rows.jsonl"), list(read_trajectories(DEVSET / "trajectories.jsonl"))


def replays_for(devset, domains, limit):
    rows, trajectories = devset
    chosen = select_rows(rows, domains=domains, limit=limit)
    return chosen, gd.plan_replays(trajectories, chosen)


class Recorder:
    """A function world model that answers ``answer`` and keeps every request."""

    def __init__(self, answer: str = WRONG) -> None:
        self.answer = answer
        self.requests: list[list[dict[str, str]]] = []
        self.model = simgym.FunctionWorldModel(self, name="recorder")

    def __call__(self, messages):
        self.requests.append([dict(m) for m in messages])
        return self.answer


async def test_a_model_trained_on_compact_prompts_is_asked_with_them(devset):
    from simgym.core.domain import get_domain

    chosen, replays = replays_for(devset, ["terminal", "mcp"], 2)
    recorder = Recorder()
    recorder.model.prompt_style = "compact"  # what a compact adapter's backend says
    rows = await gd.run_devset(replays, {"compact": recorder.model}, ["off"])
    assert len(rows) == len(recorder.requests) == len(chosen) == 4
    compact = set()
    for replay in replays:
        domain = get_domain(replay.trajectory.domain)
        scenario = domain.scenario(replay.trajectory.scenario or None)
        compact.add(domain.system_prompt(scenario, style="compact"))
    by_key = {r.key: r for r in chosen}
    for request, result in zip(recorder.requests, rows, strict=True):
        row = by_key[result["row"]]
        assert request[0]["content"] in compact and row.system_str not in compact
        assert request[1:] == build_messages(row)[1:]  # the turns are the row's, unchanged


def test_the_dev_set_has_rows_in_every_recorded_domain(devset):
    counts = gd.dataset_counts(devset[0])
    assert set(counts) == {"terminal", "swe", "mcp", "search", "web"}
    assert min(counts.values()) >= 20


async def test_with_grounding_off_the_requests_are_the_rows_exactly(devset):
    chosen, replays = replays_for(devset, ["terminal", "mcp", "swe", "search", "web"], 6)
    recorder = Recorder()
    rows = await gd.run_devset(replays, {"wrong": recorder.model}, ["off"])
    assert len(rows) == len(chosen) == 30 and len(recorder.requests) == 30
    by_key = {r.key: r for r in chosen}
    for request, result in zip(recorder.requests, rows, strict=True):
        row = by_key[result["row"]]
        # history = the real observations, not the model's "nothing to see here"
        assert request == build_messages(row), result["row"]
        assert result["status"] == "ok" and result["observation"] == "nothing to see here"
        assert result["reference"] == clean_observation(row.reference)
        assert result["metrics"]["edit_similarity"] < 1
        assert result["strict"] is None and result["facts"] == 0


async def test_teacher_forcing_keeps_real_observations_with_facts(devset):
    _, replays = replays_for(devset, ["terminal"], 12)
    recorder = Recorder()
    rows = await gd.run_devset(replays, {"wrong": recorder.model}, ["facts"])
    assert all(r["status"] == "ok" for r in rows)
    reals = {r["reference"] for r in rows}
    with_facts = 0
    for request in recorder.requests:
        earlier = [m["content"] for m in request[1:-1] if m["role"] == "assistant"]
        assert all("nothing to see here" not in text for text in earlier)
        assert all(clean_observation(text) in reals for text in earlier)
        # earlier user turns keep the facts they were sent with (SimEnv never rewrites)
        with_facts += FACTS_HEADER in request[-1]["content"]
    assert with_facts >= len(recorder.requests) // 2
    assert any(r["facts"] for r in rows)


async def test_only_scored_turns_call_the_model(devset):
    rows, trajectories = devset
    # one late row of a long episode: the turns before it are answered with the real
    # observation at no model cost, and their certain effects still reach the ledger
    long = next(t for t in trajectories if t.task.id == "dev-terminal-notes-long-horizon")
    late = [r for r in rows if r.domain == "terminal" and r.total_turns == len(long.turns)]
    late = [r for r in late if r.turn_idx == r.total_turns]
    assert late
    replays = gd.plan_replays(trajectories, late[:1])
    recorder = Recorder()
    results = await gd.run_devset(replays, {"wrong": recorder.model}, ["strict"])
    # one call, or two when strict mode asks again; none for the turns before
    assert len(results) == 1 and 1 <= len(recorder.requests) <= 2
    assert all(len(r) == 2 * late[0].turn_idx for r in recorder.requests)  # full history
    assert results[0]["turn_idx"] == late[0].turn_idx


async def test_strict_scores_at_least_off_for_a_wrong_answer_model_on_terminal_rows(devset):
    _, replays = replays_for(devset, ["terminal"], 20)
    models = {"wrong": Recorder().model}
    rows = await gd.run_devset(replays, models, ["off", "strict"])
    cells = {c.grounding: c for c in gd.summarize(rows) if c.domain == "terminal"}
    off, strict = cells["off"], cells["strict"]
    assert off.rows == strict.rows == 20
    for name in ("edit_similarity", "line_f1"):
        assert strict.mean(name) >= off.mean(name), name
    assert strict.mean("line_f1") > off.mean("line_f1")
    assert strict.corrected > 0 and off.corrected == 0
    corrected = [r for r in rows if r["strict"] == "corrected"]
    for row in corrected:  # the model's own answer is kept beside the correction
        assert row["model_observation"].endswith("nothing to see here")
        assert row["model_metrics"]["line_f1"] <= row["metrics"]["line_f1"]


async def test_the_ledger_follows_the_real_screens_not_the_models(devset):
    """A GUI's ledger learns each screen from the observation; under teacher forcing
    that must be the real one, or every later exact screen is built on the model's."""
    _, replays = replays_for(devset, ["web", "mcp"], 20)
    rows = await gd.run_devset(replays, {"wrong": Recorder().model}, ["strict"])
    exact = [r for r in rows if r["exact_matches_real"] is not None]
    assert len([r for r in exact if r["domain"] == "web"]) >= 8
    assert all(r["exact_matches_real"] for r in exact if r["domain"] == "web")
    assert sum(r["exact_matches_real"] for r in exact if r["domain"] == "mcp") >= 3


async def test_a_guessed_success_does_not_hide_the_servers_refusal(devset):
    """A model that answers a refused update with the changed record, whole, teaches the
    ledger nothing: only the real refusal is observed, so reading the record back is an
    exact answer again, and the server's own."""
    rows, trajectories = devset
    conflict = next(t for t in trajectories if t.task.id == "dev-mcp-email-conflict")
    wanted = {gd.row_id(conflict.episode_id, n) for n in (2, 4)}
    chosen = [r for r in rows if r.domain == "mcp" and r.id in wanted]
    assert len(chosen) == 2
    guess = json.dumps(
        {"id": "C-1003", "name": "Jonas Tanaka", "email": "ana.lima@example.com",
         "tier": "basic", "phone": "+351 912 686 312", "city": "Coimbra",
         "joined": "2021-12-20"}
    )  # fmt: skip
    recorder = Recorder(answer=f"<predicted_observation>{guess}</predicted_observation>")
    results = await gd.run_devset(
        gd.plan_replays(trajectories, chosen), {"guess": recorder.model}, ["strict"]
    )
    read_back = next(r for r in results if r["turn_idx"] == 4)
    assert read_back["exact_matches_real"] is True and read_back["strict"] == "corrected"
    assert read_back["metrics"]["exact_match"] == 1.0


async def test_an_empty_answer_still_lets_the_real_turn_into_the_history(devset):
    _, replays = replays_for(devset, ["swe"], 5)
    recorder = Recorder(answer="<predicted_observation>\n\n</predicted_observation>")
    rows = await gd.run_devset(replays, {"empty": recorder.model}, ["off"])
    assert len(rows) == 5 and all(r["status"] == "ok" for r in rows)
    assert all(r["observation"] == "" for r in rows)
    # the fifth request still has four earlier turns, each with its real observation
    assert len(recorder.requests[-1]) == 1 + 2 * 4 + 1


async def test_results_resume_and_the_report_has_every_cell(devset, tmp_path):
    chosen, replays = replays_for(devset, ["terminal", "mcp"], 3)
    out = tmp_path / "rows.jsonl"
    first = Recorder()
    with RowWriter(out) as writer:
        await gd.run_devset(replays[:1], {"wrong": first.model}, ["off", "strict"], writer=writer)
    done = {r["key"] for r in read_rows(out)[0] if r["status"] == "ok"}
    assert done
    second = Recorder()
    rows = await gd.run_devset(replays, {"wrong": second.model}, ["off", "strict"], finished=done)
    keys = {r["key"] for r in rows}
    assert not keys & done and len(keys | done) == len(chosen) * 2
    cells = gd.summarize([*read_rows(out)[0], *rows])
    names = [(c.domain, c.grounding) for c in cells]
    assert names == [
        ("mcp", "off"),
        ("mcp", "strict"),
        ("terminal", "off"),
        ("terminal", "strict"),
        ("all", "off"),
        ("all", "strict"),
    ]
    mcp = cells[0].as_dict()
    assert mcp["json_valid"] == 0 and mcp["json_valid_n"] == 3  # mcp rows are JSON
    assert json.dumps([c.as_dict() for c in cells])
    from rich.console import Console

    console = Console(width=100, record=True)
    console.print(gd.report_table(cells))
    text = console.export_text()
    assert "terminal" in text and "strict" in text


async def test_bad_grounding_is_refused(devset):
    _, replays = replays_for(devset, ["terminal"], 1)
    with pytest.raises(simgym.SimgymError, match="grounding must be"):
        await gd.run_devset(replays, {"w": Recorder().model}, ["loose"])


def test_rows_and_trajectories_must_be_one_recording(devset):
    rows, trajectories = devset
    with pytest.raises(simgym.SimgymError, match="no recorded episode"):
        gd.plan_replays(trajectories[:1], select_rows(rows, domains=["web"], limit=1))
