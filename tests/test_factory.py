"""The trajectory factory and its training-data export: plans are pure functions of the
seed and valid for their domains; a small run on the real backends writes disjoint
splits, drops duplicates and resumes; exported rows are exactly what the environment
sends a world model, cut the way the embedded backend cuts."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import types
import unittest
from pathlib import Path
from typing import Any

import pytest

import simgym
import simgym.domains  # noqa: F401  (registers the built-in domains)
from simgym.core import contract
from simgym.core.errors import SimgymError, WorldModelError
from simgym.data import factory as F
from simgym.data.export import export_rows
from simgym.data.sft import (
    PREFILL,
    ContextBudget,
    SftStats,
    embedded_token_counter,
    export_sft_splits,
    fit_messages,
    message_cost,
    transition_rows,
)
from simgym.worldmodels.local import LocalWorldModel, embedded_model_path
from support import ls_trajectory

SEED = 7
HERE_PROBLEMS = F.backend_problems(F.DOMAINS)
AVAILABLE = tuple(d for d in F.DOMAINS if d not in HERE_PROBLEMS)
FAKE_OBSERVATIONS = {
    "terminal": "dev@box:~$ ls\nnotes.txt\ndev@box:~$",
    "swe": "README.md\npkg/\ntests/",
    "mcp": '{"content": [{"type": "text", "text": "{}"}], "isError": false}',
    "search": '## Results for "json"\n[1] json — JSON encoder and decoder\n'
    "URL: https://docs.python.org/3/library/json.html\nSnippet: JSON.",
    "web": "URL: https://shop.example/\nTitle: Shop\n[1] RootWebArea 'Shop', focused\n"
    "  [2] link 'Cart (1)'\n  [3] textbox 'Email'\n  [4] combobox 'Shipping'\n"
    "    [5] option 'Standard (3-5 days) $4.00', selected=true\n  [6] checkbox 'newsletter'\n"
    "  [7] button 'Place order'",
}


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> F.FactoryContext:
    work = tmp_path_factory.mktemp("factory-context")
    return F.FactoryContext.build(F.DOMAINS, work=work, seed=SEED, web_sites=8)


def _drive(plan: F.EpisodePlan, steps: int = 60) -> list[Any]:
    """The actions a plan's program takes when the world always shows the same screen."""
    observation = FAKE_OBSERVATIONS[plan.domain]
    program = plan.program(observation)
    actions = []
    try:
        actions.append(next(program))
        while len(actions) < steps:
            actions.append(program.send(observation))
    except StopIteration:
        pass
    return actions


# -- generators --------------------------------------------------------------------------


@pytest.mark.parametrize("domain", F.DOMAINS)
def test_plans_are_pure_functions_of_the_seed(context: F.FactoryContext, domain: str) -> None:
    for index in range(6):
        first = F.plan_episode(domain, SEED, index, context)
        again = F.plan_episode(domain, SEED, index, context)
        assert first.id == again.id == F.episode_id(domain, SEED, index)
        assert first.task.model_dump() == again.task.model_dump()
        assert _drive(first) == _drive(again)
    scenarios = {
        json.dumps(F.plan_episode(domain, seed, 0, context).task.scenario, sort_keys=True)
        for seed in range(6)
    }
    assert len(scenarios) >= 4, "different seeds should give different worlds"


@pytest.mark.parametrize("domain", F.DOMAINS)
def test_plans_are_valid_for_their_domain(context: F.FactoryContext, domain: str) -> None:
    spec = simgym.get_domain(domain)
    lengths = []
    for index in range(25):
        plan = F.plan_episode(domain, SEED, index, context)
        scenario = spec.scenario(plan.task.scenario)  # raises on an invalid scenario
        actions = _drive(plan)
        assert actions, f"{plan.id}: the program took no action"
        lengths.append(len(actions))
        for action in actions:
            spec.coerce_action(action, scenario, 16_000)  # raises ActionError when invalid
    assert min(lengths) <= 8 and max(lengths) >= 18, "short and long horizons are both drawn"


def test_terminal_plans_claim_no_clock(context: F.FactoryContext) -> None:
    """The sandboxes run at the real time: the recorded rows' facts must not state the
    scenario's clock as what `date` prints or `ls -l` shows."""
    spec = simgym.get_domain("terminal")
    plan = F.plan_episode("terminal", SEED, 0, context)
    scenario = spec.scenario(plan.task.scenario)
    assert scenario.clock is None
    state = spec.initial_state(scenario)
    for line in ("date +%F", "ls -l"):
        action = spec.coerce_action(line, scenario, 16_000)
        grounding = spec.ground(action, state, scenario)
        assert grounding is None or grounding.observation is None, line


def _unit_passes(unit: F._Unit, source: str) -> bool:
    """Run a unit's generated test file against ``source``, in this process."""
    package = types.ModuleType("factorypkg")
    package.__path__ = []
    module = types.ModuleType(f"factorypkg.{unit.module}")
    exec(compile(source, f"{unit.module}.py", "exec"), module.__dict__)
    saved = {k: sys.modules.get(k) for k in ("factorypkg", module.__name__)}
    sys.modules.update({"factorypkg": package, module.__name__: module})
    try:
        namespace: dict[str, Any] = {}
        exec(compile(F._unit_test_file("factorypkg", unit), "test.py", "exec"), namespace)
        cases = [
            v
            for v in namespace.values()
            if isinstance(v, type) and issubclass(v, unittest.TestCase)
        ]
        suite = unittest.TestSuite(
            unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in cases
        )
        result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
        return result.testsRun > 0 and result.wasSuccessful()
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value


def test_swe_units_pass_their_tests_and_their_bugs_fail_them() -> None:
    """Every generated module passes its own tests, and its injected bug (a unique snippet,
    so edit_file can put it in and take it out) makes them fail."""
    for unit in F.SWE_UNITS:
        assert unit.source.count(unit.good) == 1, unit.function
        buggy = unit.source.replace(unit.good, unit.bad, 1)
        assert buggy.count(unit.bad) == 1, unit.function
        assert _unit_passes(unit, unit.source), unit.function
        assert not _unit_passes(unit, buggy), unit.function


def test_mcp_state_matches_the_seeded_server(tmp_path: Path) -> None:
    from simgym.real.mcp_servers.records import RecordsStore

    state = F.records_state(4242)
    snapshot = RecordsStore(tmp_path / "r.db", seed=4242).snapshot()
    assert [c["id"] for c in state["customers"]] == [c["id"] for c in snapshot["customers"]]
    assert state["customers"][3]["email"] == snapshot["customers"][3]["email"]
    first = snapshot["accounts"][0]
    assert state["accounts"][0]["balance"] == first["balance_cents"] / 100
    assert F.records_state(4242) != F.records_state(4243)


def test_quotas_and_config_reject_bad_input(tmp_path: Path) -> None:
    assert F.quotas_for(10, ["terminal", "web"]) == {"terminal": 5, "web": 5}
    assert sum(F.quotas_for(101, F.DOMAINS, {"web": 3}).values()) == 101
    with pytest.raises(SimgymError, match="unknown domain"):
        F.quotas_for(10, ["terminal", "nope"])
    with pytest.raises(SimgymError, match="not being recorded"):
        F.quotas_for(10, ["terminal"], {"web": 2})
    with pytest.raises(SimgymError, match="positive"):
        F.quotas_for(0, ["terminal"])
    with pytest.raises(SimgymError, match="concurrency"):
        F.FactoryConfig(out=tmp_path, concurrency=0)
    with pytest.raises(SimgymError, match="split"):
        F.FactoryConfig(out=tmp_path, split=(0.5, 0.5, 0.5))


def test_split_is_by_episode_and_stable() -> None:
    ids = [F.episode_id("swe", 1, k) for k in range(2000)]
    splits = [F.split_of(i) for i in ids]
    assert splits == [F.split_of(i) for i in ids]
    share = splits.count("train") / len(splits)
    assert 0.86 < share < 0.94
    assert splits.count("val") > 40 and splits.count("test") > 40


# -- a small run on the real backends ------------------------------------------------------

needs_backends = pytest.mark.skipif(not AVAILABLE, reason=f"no real backend here: {HERE_PROBLEMS}")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Every available domain, episodes cut at 4 turns, about two episodes each."""
    if not AVAILABLE:
        pytest.skip(f"no real backend here: {HERE_PROBLEMS}")
    out = tmp_path_factory.mktemp("factory-run")
    config = F.FactoryConfig(
        out=out,
        transitions=8 * len(AVAILABLE),
        domains=AVAILABLE,
        concurrency=2,
        seed=SEED,
        max_turns=4,
        web_sites=4,
        split=(0.5, 0.25, 0.25),
    )
    return out, F.run_factory(config)


def _ids(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["task"]["id"] for line in f if line.strip()]


@needs_backends
def test_small_run_writes_disjoint_splits(small_run: tuple[Path, dict[str, Any]]) -> None:
    out, manifest = small_run
    by_split = {name: _ids(out / f"{name}.jsonl") for name in F.SPLITS}
    seen: set[str] = set()
    for name, ids in by_split.items():
        assert len(ids) == len(set(ids)), f"an episode twice in {name}"
        assert not seen & set(ids), "an episode in two splits"
        seen |= set(ids)
        assert all(F.split_of(i, (0.5, 0.25, 0.25)) == name for i in ids)
    for domain in AVAILABLE:
        info = manifest["domains"][domain]
        assert info["kept"] >= 2, f"{domain}: {info}, errors {manifest['errors']}"
        assert info["failed"] == 0 and info["rejected_actions"] == 0
        assert info["transitions"] >= 8
        counted = sum(manifest["splits"][s].get(domain, {}).get("transitions", 0) for s in F.SPLITS)
        assert counted == info["transitions"]
    for trajectory in F.read_split(out, "train"):
        assert trajectory.error is None
        assert 1 <= sum(t.in_history for t in trajectory.turns) <= 4
        assert trajectory.system_prompt


@needs_backends
def test_resume_skips_recorded_episodes_and_survives_a_cut_line(
    small_run: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    source, _ = small_run
    out = tmp_path / "resumed"
    out.mkdir()
    lines = (source / F.RAW_FILE).read_bytes().splitlines(keepends=True)
    domains = tuple(sorted({json.loads(line)["domain"] for line in lines}))
    # A crash while writing the last episode: its line is cut short.
    (out / F.RAW_FILE).write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    before = [json.loads(line)["task"]["id"] for line in lines[:-1]]
    cut_id = json.loads(lines[-1])["task"]["id"]
    config = F.FactoryConfig(
        out=out,
        transitions=8 * len(domains),
        domains=domains,
        concurrency=2,
        seed=SEED,
        max_turns=4,
        web_sites=4,
        split=(0.5, 0.25, 0.25),
    )
    manifest = F.run_factory(config)
    scan = F.scan_raw(out / F.RAW_FILE)
    ids = [r.id for r in scan.records]
    assert ids[: len(before)] == before, "recorded episodes are kept as they were"
    assert len(ids) == len(set(ids)), "no episode was recorded twice"
    assert cut_id in ids[len(before) :], "the cut episode is recorded again"
    assert manifest["runs"][-1]["episodes"] == len(ids) - len(before)
    assert scan.broken == 1 and manifest["unreadable_lines"] == 1
    with pytest.raises(SimgymError, match="already holds"):
        F.run_factory(
            F.FactoryConfig(out=out, transitions=10, domains=domains, resume=False, seed=SEED)
        )


@pytest.mark.skipif("terminal" not in AVAILABLE, reason="needs the bubblewrap sandbox")
def test_failing_episodes_are_recorded_and_the_domain_given_up(tmp_path: Path) -> None:
    """Episodes that cannot finish (here: a time limit shorter than a sandbox's start)
    are written as failed, kept out of the splits, and after ``max_failures`` in a row the
    domain is given up instead of retried forever."""
    config = F.FactoryConfig(
        out=tmp_path,
        transitions=50,
        domains=("terminal",),
        concurrency=1,
        seed=SEED,
        episode_timeout_s=0.05,
        max_failures=2,
    )
    manifest = F.run_factory(config)
    assert "terminal" in manifest["abandoned"]
    info = manifest["domains"]["terminal"]
    assert (info["recorded"], info["failed"], info["kept"]) == (2, 2, 0)
    assert "timed out" in manifest["errors"]["terminal"][0]
    assert all((tmp_path / f"{name}.jsonl").read_text() == "" for name in F.SPLITS)
    (trajectory,) = list(simgym.read_trajectories(tmp_path / F.RAW_FILE))[:1]
    assert trajectory.task.metadata["factory"]["status"] == "failed"


def test_finalize_drops_duplicate_and_failed_episodes(tmp_path: Path) -> None:
    def episode(index: int, actions: list[str], *, failed: bool = False) -> simgym.Trajectory:
        trajectory = simgym.Trajectory(
            task=simgym.Task(id=F.episode_id("terminal", 1, index), domain="terminal"),
            domain="terminal",
            scenario={"user": "dev"},
            turns=[
                simgym.Turn(
                    index=k, action_text=a, observation=simgym.Observation(text=f"out {index}")
                )
                for k, a in enumerate(actions, 1)
            ],
        )
        record = F.EpisodeRecord(
            id=trajectory.task.id,
            domain="terminal",
            index=index,
            status="failed" if failed else "ok",
            transitions=len(actions),
            hash=F.episode_hash(trajectory),
            error="boom" if failed else None,
        )
        trajectory.task.metadata["factory"] = {"seed": 1, "index": index}
        F._stamp(trajectory, record)
        return trajectory

    # The same actions in the same world are the same episode, whatever the screens said.
    assert F.episode_hash(episode(1, ["ls"])) == F.episode_hash(episode(2, ["ls"]))
    assert F.episode_hash(episode(1, ["ls"])) != F.episode_hash(episode(1, ["pwd"]))
    with simgym.TrajectoryWriter(tmp_path / F.RAW_FILE) as writer:
        for trajectory in (
            episode(3, ["ls", "pwd"]),  # a duplicate of episode 0, finished first
            episode(0, ["ls", "pwd"]),
            episode(1, ["cat x"], failed=True),
            episode(2, ["whoami"]),
        ):
            writer.write(trajectory)
    manifest = F.finalize(tmp_path)
    kept = [i for name in F.SPLITS for i in _ids(tmp_path / f"{name}.jsonl")]
    assert sorted(kept) == [F.episode_id("terminal", 1, 0), F.episode_id("terminal", 1, 2)]
    info = manifest["domains"]["terminal"]
    assert (info["recorded"], info["kept"], info["duplicates"], info["failed"]) == (4, 2, 1, 1)
    assert info["transitions"] == 3
    assert manifest["errors"]["terminal"] == [f"{F.episode_id('terminal', 1, 1)}: boom"]
    assert F.finalize(tmp_path)["splits"] == manifest["splits"]  # rerunnable, same result


# -- export ----------------------------------------------------------------------------------

needs_vocabulary = pytest.mark.skipif(
    embedded_model_path() is None, reason="the embedded model's vocabulary is not installed"
)


@pytest.fixture(scope="module")
def count() -> Any:
    return embedded_token_counter()


class _Recorder:
    """A FunctionWorldModel's function that records what it is sent and answers with the
    recorded observations of a real trajectory, in order."""

    def __init__(self, observations: list[str]) -> None:
        self.observations = list(observations)
        self.seen: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.seen.append([dict(m) for m in messages])
        return f"{contract.OPEN_TAG}\n{self.observations.pop(0)}\n{contract.CLOSE_TAG}"


async def _replay(trajectory: simgym.Trajectory) -> list[list[dict[str, str]]] | None:
    """What SimEnv sends a world model for each turn of ``trajectory``, replaying its
    actions; None when an observation would not survive the contract's parsing intact."""
    turns = [t for t in trajectory.turns if t.in_history]
    observations = [t.observation.text for t in turns]
    if any(contract.parse_output(o).observation != o for o in observations):
        return None
    recorder = _Recorder(observations)
    env = simgym.make(
        trajectory.domain,
        world_model=simgym.FunctionWorldModel(recorder),
        scenario=trajectory.scenario,
        validation_retries=0,
        max_turns=100,
        grounding="facts",  # as the factory runs: rows carry the facts the model was sent
        # the factory records on the real backends, which run every command themselves,
        # so its grounding never runs one in a sandbox: neither does the replay
        execution="off",
    )
    await env.reset(trajectory.task)
    for turn in trajectory.turns:
        if turn.in_history:
            assert turn.action is not None
            await env.step(turn.action)
    await env.close(reason=None)
    assert len(recorder.seen) == len(turns)
    return recorder.seen


def _unstamped(value: Any) -> Any:
    """``value`` (JSON-like) with every ISO UTC timestamp replaced by one placeholder."""
    return json.loads(re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", json.dumps(value)))


@needs_backends
@needs_vocabulary
async def test_rows_are_what_the_environment_sends(
    small_run: tuple[Path, dict[str, Any]], count: Any
) -> None:
    out, _ = small_run
    compared, grounded = set(), set()
    huge = ContextBudget(n_ctx=10**7, max_tokens=256)
    for name in F.SPLITS:
        for trajectory in F.read_split(out, name):
            sent = await _replay(trajectory)
            if sent is None:
                continue
            rows = list(transition_rows(trajectory, count=count, budget=huge))
            # a created record is stamped with the time of the call (the records server's
            # tool map says so), which the replay makes seconds after the recording
            assert _unstamped([r["messages"] for r in rows]) == _unstamped(sent)
            observations = [t.observation.text for t in trajectory.turns if t.in_history]
            for row, observation in zip(rows, observations, strict=True):
                assert row["completion"] == f"{PREFILL}{observation}\n{contract.CLOSE_TAG}"
                assert row["completion"].startswith(PREFILL)
                assert row["dropped_turns"] == 0
                assert row["domain"] == trajectory.domain
            compared.add(trajectory.domain)
            if any("**Facts:**" in m["content"] for r in rows for m in r["messages"]):
                grounded.add(trajectory.domain)
    assert compared == set(AVAILABLE), "every domain's rows were checked against SimEnv"
    assert {"terminal", "swe"} & set(AVAILABLE) <= grounded, "rows carry grounded facts"


@needs_backends
@needs_vocabulary
async def test_truncation_matches_the_local_backend(
    small_run: tuple[Path, dict[str, Any]], count: Any
) -> None:
    from simgym.data.sft import _vocabulary

    out, _ = small_run
    llm = _vocabulary(str(embedded_model_path()))
    budget = ContextBudget(n_ctx=1400, max_tokens=200)
    local = LocalWorldModel(n_ctx=budget.n_ctx, max_tokens=budget.max_tokens)
    checked = dropped = refused = 0
    for trajectory in F.read_split(out, "train"):
        sent = await _replay(trajectory)
        if sent is None:
            continue
        stats = SftStats()
        rows = iter(transition_rows(trajectory, count=count, budget=budget, stats=stats))
        for messages in sent:
            try:
                fitted = local._fit(llm, messages, budget.max_tokens + 16)
            except WorldModelError:
                refused += 1
                assert fit_messages(messages, budget, count) is None
                continue
            row = next(rows)
            assert row["messages"] == fitted == fit_messages(messages, budget, count)
            cost = sum(message_cost(m["content"], count) for m in row["messages"])
            assert row["prompt_tokens"] == cost <= budget.prompt_tokens
            assert row["messages"][0] == messages[0] and row["messages"][-1] == messages[-1]
            assert row["dropped_turns"] == (len(messages) - len(row["messages"])) // 2
            dropped += row["dropped_turns"] > 0
            checked += 1
        assert next(rows, None) is None
        assert stats.prompt_too_long == sum(
            1 for m in sent if fit_messages(m, budget, count) is None
        )
    assert checked >= 5 and dropped >= 1, (checked, dropped, refused)


@needs_backends
@needs_vocabulary
def test_split_export_dedups_and_writes_a_manifest(
    small_run: tuple[Path, dict[str, Any]], count: Any, tmp_path: Path
) -> None:
    out, _ = small_run
    budget = ContextBudget(n_ctx=8192, max_tokens=256)
    stats = export_sft_splits(out, tmp_path / "sft", count=count, budget=budget)
    manifest = json.loads((tmp_path / "sft" / "manifest.json").read_text())
    assert manifest["budget"]["prompt_tokens"] == 8192 - 256 - 16
    total = 0
    for name in F.SPLITS:
        rows = [
            json.loads(x) for x in (tmp_path / "sft" / f"{name}.jsonl").read_text().splitlines()
        ]
        assert len(rows) == stats[name].rows == manifest["splits"][name]["rows"]
        assert all(r["prompt_tokens"] <= budget.prompt_tokens for r in rows)
        total += len(rows)
    assert total > 0
    # Exporting the train split again with the same seen-set yields only duplicates.
    seen: set[str] = set()
    first = SftStats()
    trajectories = list(F.read_split(out, "train"))
    rows = [
        r
        for t in trajectories
        for r in transition_rows(t, count=count, seen=seen, stats=first, budget=budget)
    ]
    second = SftStats()
    again = [
        r
        for t in trajectories
        for r in transition_rows(t, count=count, seen=seen, stats=second, budget=budget)
    ]
    assert rows and not again and second.duplicates == first.rows


@needs_vocabulary
def test_export_transition_mode_uses_the_default_budget(count: Any) -> None:
    trajectory = ls_trajectory()
    (row,) = export_rows([trajectory], "sft", mode="transition")
    assert row == next(transition_rows(trajectory, count=count))
    assert row["prefill"] == PREFILL + "dev@box:~$ ls\n"
    assert row["completion"].startswith(row["prefill"])
    with pytest.raises(SimgymError, match="unknown SFT mode"):
        list(export_rows([trajectory], "sft", mode="bogus"))  # type: ignore[arg-type]
    with pytest.raises(SimgymError, match="no room"):
        ContextBudget(n_ctx=200, max_tokens=190)


# -- the command ---------------------------------------------------------------------------


def test_importing_the_module_adds_the_command() -> None:
    import simgym.cli
    import simgym.cli.factory  # noqa: F401

    names = {c.name or c.callback.__name__ for c in simgym.cli.app.registered_commands}
    assert "factory" in names


@pytest.mark.skipif("search" not in AVAILABLE, reason="needs SQLite FTS5")
@needs_vocabulary
def test_command_records_search_and_exports(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "120"}
    done = subprocess.run(
        [sys.executable, "-m", "simgym.cli.factory", "--out", str(tmp_path / "run"),
         "--domains", "search", "--transitions", "25", "--concurrency", "2", "--seed", "3",
         "--sft-out", str(tmp_path / "sft"), "--n-ctx", "8192"],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "run" / F.MANIFEST_FILE).read_text())
    assert manifest["domains"]["search"]["transitions"] >= 25
    assert (tmp_path / "sft" / "train.jsonl").stat().st_size > 0
    assert "sft rows" in done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "simgym.cli.factory", "--out", str(tmp_path / "x"),
         "--domains", "search,nope", "--transitions", "5"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "unknown domain" in bad.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "simgym.cli.factory", "--out", str(tmp_path / "x"),
         "--weights", "web=lots"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "DOMAIN=NUMBER" in bad.stderr


def test_programs_act_on_what_they_see(context: F.FactoryContext) -> None:
    """Search programs open URLs that earlier results showed."""
    opened = set()
    for index in range(12):
        for action in _drive(F.plan_episode("search", SEED, index, context)):
            if action["name"] == "web_extractor":
                opened.add(action["arguments"]["url"])
    assert "https://docs.python.org/3/library/json.html" in opened


@pytest.mark.skipif("mcp" in HERE_PROBLEMS, reason=str(HERE_PROBLEMS.get("mcp")))
def test_recorded_mcp_search_facts_agree_with_the_real_server(tmp_path: Path) -> None:
    """The factory's mcp scenario declares how the records server's tools touch its tables,
    so each search's facts list the customers the server then lists (its search matches a
    phone number ignoring spaces: a guessed search once told the model "no customers
    match" for digits the server found, in one training row of ten)."""
    config = F.FactoryConfig(
        out=tmp_path, transitions=160, domains=("mcp",), concurrency=2, seed=11, max_turns=12
    )
    F.run_factory(config)
    checked = digits = 0
    for trajectory in simgym.read_trajectories(tmp_path / F.RAW_FILE):
        assert trajectory.scenario["tool_map"]["search_customers"]["search"]["phone"] == (
            "contains_ignoring_spaces"
        )
        for turn in trajectory.turns:
            facts = (turn.grounding or {}).get("facts") or []
            if turn.action.name != "search_customers" or not facts:
                continue
            real = json.loads(_tool_text(turn.observation.text))
            said = [json.loads(f.split(": ", 1)[1])["id"] for f in facts if f.startswith("cust")]
            assert said[: len(real["customers"])] == [c["id"] for c in real["customers"]], facts
            assert facts[0].startswith("no customers match") == (real["total"] == 0)
            checked += 1
            digits += turn.action.arguments["query"].isdigit()
    assert checked >= 10 and digits >= 1, (checked, digits)


def _tool_text(observation: str) -> str:
    """The JSON text of a records-server answer in any of the factory's output formats."""
    try:
        envelope = json.loads(observation)
    except json.JSONDecodeError:
        return observation
    if isinstance(envelope, dict) and "content" in envelope:
        return envelope["content"][0]["text"]
    return observation
