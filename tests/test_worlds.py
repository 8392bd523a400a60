"""Fictional worlds: deterministic generation, constraints, pages that agree with the
world, tasks with ground truth, and the world served through search and MCP."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from typer.testing import CliRunner

import simgym
from simgym.cli.world import world_app
from simgym.core.types import Action, Task, Trajectory
from simgym.domains.mcp import MCPScenario
from simgym.domains.search import SearchScenario
from simgym.rollout.runner import load_tasks
from simgym.rollout.scripted import load_specs
from simgym.worlds.generate import World, WorldError, check_world, generate_world
from simgym.worlds.render import (
    mcp_scenario,
    read_key_facts,
    read_lists,
    render_page,
    search_scenario,
    world_oracle,
)
from simgym.worlds.tasks import generate_tasks, oracle_actions, task_lines
from simgym.worlds.themes import THEMES, UnknownThemeError, get_theme

THEME_KEYS = sorted(THEMES)
runner = CliRunner()


@pytest.fixture(scope="module")
def worlds() -> dict[str, World]:
    return {key: generate_world(key, 7) for key in THEME_KEYS}


# -- generation and constraints ---------------------------------------------------------


@pytest.mark.parametrize("theme", THEME_KEYS)
def test_same_seed_same_world_other_seed_other_world(theme):
    first = generate_world(theme, 7).to_json()
    assert generate_world(theme, 7).to_json() == first
    assert generate_world(theme, 8).to_json() != first
    # titles and aliases name the same theme
    assert generate_world(get_theme(theme).title, 7).to_json() == first
    assert World.from_json(first).to_json() == first


def test_cli_new_twice_gives_identical_files(tmp_path):
    paths = [tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"]
    for path, seed in zip(paths, (7, 7, 8), strict=True):
        result = runner.invoke(
            world_app,
            ["new", "--theme", "2029 smartphone market", "--seed", str(seed), "-o", str(path)],
        )
        assert result.exit_code == 0, result.output
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()
    world = World.load(paths[0])
    assert world.theme == "smartphones" and world.seed == 7


def test_constraints_pass_on_100_worlds():
    sizes = []
    for number in range(100):
        theme = THEME_KEYS[number % len(THEME_KEYS)]
        world = generate_world(theme, number)
        assert check_world(world) == [], (theme, number)
        sizes.append(world.row_count())
    assert min(sizes) >= 250 and max(sizes) <= 600  # hundreds of rows, as Qwen's worlds


def _broken(world: World, table: str, position: int, field: str, value) -> World:
    data = json.loads(world.to_json())
    data["tables"][table][position][field] = value
    return World.model_validate(data)


def test_constraint_checks_catch_each_kind_of_contradiction(worlds):
    phones = worlds["smartphones"]
    first = phones.tables["phones"][0]
    maker = phones.row("makers", first["maker_id"])
    cases = {
        "not unique": _broken(phones, "phones", 1, "phone_id", first["phone_id"]),
        "missing makers row": _broken(phones, "phones", 0, "maker_id", "MK-999"),
        "above the maximum": _broken(phones, "phones", 0, "price_usd", 99999),
        "not one of": _broken(phones, "phones", 0, "storage_gb", 100),
        "not an ISO date": _broken(phones, "phones", 0, "launch_date", "2027-02-30"),
        "after the world's today": _broken(phones, "phones", 0, "launch_date", "2031-01-01"),
        "expected an integer": _broken(phones, "phones", 0, "battery_mah", "4000"),
        "rows add up to": _broken(
            phones,
            "makers",
            phones.tables["makers"].index(maker),
            "phone_count",
            maker["phone_count"] + 1,
        ),
    }
    for expected, world in cases.items():
        problems = check_world(world)
        assert any(expected in p for p in problems), (expected, problems)
    # a cross-field rule: a phone launched before its maker was founded
    early = next(p for p in phones.tables["phones"] if p["launch_date"] < "2029")
    position = phones.tables["makers"].index(phones.row("makers", early["maker_id"]))
    founded = int(early["launch_date"][:4])  # the same year: not after it
    problems = check_world(_broken(phones, "makers", position, "founded_year", founded))
    assert any("rule launch_after_founding" in p for p in problems), problems

    bank = worlds["bank"]
    loan = next(i for i, r in enumerate(bank.tables["loans"]) if r["kind"] == "Mortgage")
    problems = check_world(_broken(bank, "loans", loan, "term_months", 13))
    assert any("13-month term is not offered" in p for p in problems), problems

    logistics = worlds["logistics"]
    problems = check_world(_broken(logistics, "shipments", 0, "weight_kg", 26000))
    capacity = logistics.row("vehicles", logistics.tables["shipments"][0]["vehicle_id"])
    assert capacity["capacity_kg"] < 26000
    assert any("exceeds the vehicle's capacity" in p for p in problems), problems


def test_bad_world_files_and_themes_give_clear_errors(tmp_path):
    with pytest.raises(UnknownThemeError, match="unknown world theme 'moon base'; known: "):
        generate_world("moon base", 1)
    with pytest.raises(WorldError, match="not a world file"):
        World.from_json('{"tables": {}}')
    result = runner.invoke(world_app, ["new", "--theme", "moon base"])
    assert result.exit_code == 2 and "unknown world theme" in result.output
    result = runner.invoke(world_app, ["check", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "world file not found" in result.output


# -- pages ------------------------------------------------------------------------------


def _expected_text(world: World, table: str, field: str, value) -> str:
    """What a page should show for a raw value, worked out here from the JSON alone."""
    attr = world.schema.entity(table).attr(field)
    if attr.kind == "ref":
        target = world.schema.entity(attr.ref)
        row = next(r for r in world.tables[attr.ref] if r[target.key.name] == value)
        return str(row[target.name.name])
    if attr.kind == "float":
        return f"{value:.{attr.decimals}f}"
    return str(value)


@pytest.mark.parametrize("theme", THEME_KEYS)
def test_pages_state_only_the_worlds_facts(worlds, theme):
    world = worlds[theme]
    checked = 0
    for entity in world.schema.entities:
        for row in world.tables[entity.table][::9]:  # a sample of every table
            page = render_page(world, entity.table, row[entity.key.name])
            facts = read_key_facts(page.content)
            assert facts == {
                entity.attr(f).label: _expected_text(world, entity.table, f, v)
                for f, v in row.items()
            }
            # every number in the opening sentence is one of the row's values
            allowed = " ".join(facts.values())
            for number in re.findall(r"\d[\d.-]*\d|\d", page.content.splitlines()[0]):
                assert number in allowed, (page.url, number)
            # the lists of related rows are exactly the rows pointing here
            for child, attr, parent in world.schema.relations():
                if parent.table == entity.table:
                    listed = [
                        name
                        for name, _ in read_lists(page.content)[
                            f"{child.plural.capitalize()} ({attr.label})"
                        ]
                    ]
                    want = [
                        str(r[child.name.name])
                        for r in world.tables[child.table]
                        if r[attr.name] == row[entity.key.name]
                    ]
                    assert listed == want
            checked += 1
    assert checked > 30


def test_cli_check_passes_a_world_and_fails_a_broken_one(tmp_path, worlds):
    good = tmp_path / "good.json"
    good.write_text(worlds["bank"].to_json())
    result = runner.invoke(world_app, ["check", str(good)])
    assert result.exit_code == 0 and "ok:" in result.output, result.output
    bad = tmp_path / "bad.json"
    bad.write_text(_broken(worlds["bank"], "accounts", 0, "customer_id", "CU-0").to_json())
    result = runner.invoke(world_app, ["check", str(bad)])
    assert result.exit_code == 1
    assert "refers to a missing customers row 'CU-0'" in result.output


# -- tasks ------------------------------------------------------------------------------


@pytest.mark.parametrize("theme", THEME_KEYS)
def test_search_tasks_carry_answers_their_pages_support(worlds, theme):
    world = worlds[theme]
    tasks = generate_tasks(world, 25, domain="search")
    assert [t.id for t in tasks] == [t.id for t in generate_tasks(world, 25, domain="search")]
    assert len({t.id for t in tasks}) == len({t.instruction for t in tasks}) == 25
    kinds = {t.metadata["kind"] for t in tasks}
    assert kinds == {"lookup", "multi_hop", "comparison", "aggregation", "table"}
    for task in tasks:
        scenario = SearchScenario.model_validate(task.scenario)
        text = "\n".join(d.content for d in scenario.documents)
        for table, key in task.metadata["refs"]:
            page = render_page(world, table, key)
            assert scenario.document(page.url) is not None
        kind = task.metadata["kind"]
        if kind == "table":
            assert task.metadata["reward"] == {"type": "table_f1"}
            rows = task.metadata["table"]
            assert rows and all(set(r) >= set(task.metadata["key_columns"]) for r in rows)
            for row in rows:
                for value in row.values():
                    assert value in text, (task.id, value)
        else:
            assert task.metadata["reward"] == {"type": "exact"}
            if kind != "aggregation":  # a count or total is computed, not printed
                assert task.metadata["answer"] in text, task.id


def test_aggregation_answers_match_the_rows(worlds):
    world = worlds["bank"]
    tasks = generate_tasks(world, 60, domain="search", kinds=["aggregation"], seed=3)
    counted = [t for t in tasks if t.instruction.startswith("How many")]
    assert counted
    for task in counted:
        refs = task.metadata["refs"]
        assert task.metadata["answer"] == str(len(refs) - 1)  # the parent, then its children


def test_tasks_file_loads_for_simgym_run(tmp_path, worlds):
    path = tmp_path / "world.json"
    path.write_text(worlds["logistics"].to_json())
    out = tmp_path / "tasks.jsonl"
    result = runner.invoke(
        world_app, ["tasks", str(path), "-o", str(out), "--count", "12", "--domain", "mcp"]
    )
    assert result.exit_code == 0, result.output
    loaded = load_tasks([out])
    assert len(loaded) == 12 and all(t.domain == "mcp" for t in loaded)
    assert {t.metadata["kind"] for t in loaded} >= {"update", "table", "lookup"}
    assert out.read_text() == task_lines(
        generate_tasks(worlds["logistics"], 12, domain="mcp"), worlds["logistics"]
    )
    result = runner.invoke(
        world_app, ["tasks", str(path), "-o", str(out), "--kinds", "update", "--domain", "search"]
    )
    assert result.exit_code == 2 and "update tasks need the mcp domain" in result.output


def test_update_tasks_name_a_valid_change_of_the_hidden_state(worlds):
    for theme in THEME_KEYS:
        world = worlds[theme]
        for task in generate_tasks(world, 6, domain="mcp", kinds=["update"]):
            scenario = MCPScenario.model_validate(task.scenario)
            check = task.metadata["reward"]["checks"][0]
            _, table, key, field = check["path"].split("/")
            assert scenario.state[table][key][field] != check["equals"]
            tool = next(t for t in scenario.tools if t.name.startswith("update_"))
            args = {world.schema.entity(table).key.name: key, "changes": {field: check["equals"]}}
            jsonschema.validate(args, tool.parameters)  # the change the task asks is allowed
            # and the changed world still passes its constraints
            assert (
                check_world(
                    _broken(world, table, _position(world, table, key), field, check["equals"])
                )
                == []
            )


def _position(world: World, table: str, key: str) -> int:
    name = world.schema.entity(table).key.name
    return next(i for i, r in enumerate(world.tables[table]) if r[name] == key)


# -- serving the world ------------------------------------------------------------------


def test_search_scenario_is_sized_and_whole_world_needs_a_bigger_limit(worlds):
    world = worlds["smartphones"]
    with pytest.raises(WorldError, match="more than max_chars"):
        search_scenario(world)
    assert len(json.dumps(search_scenario(world, max_chars=10**7)["documents"])) > 10**5
    small = search_scenario(world, [("phones", "PH-0001"), ("makers", "MK-001")])
    assert [d["url"].split("/")[3] for d in small["documents"]] == ["phones", "makers"]
    assert "fictional" in small["notes"]


async def test_search_episode_on_a_world_task(worlds):
    world = worlds["smartphones"]
    task = next(
        t for t in generate_tasks(world, 10, domain="search") if t.metadata["kind"] == "lookup"
    )
    page = render_page(world, *task.metadata["refs"][0])
    prompts = []

    def engine(messages):  # serves the page the scenario holds, as a faithful model would
        prompts.append(messages[0]["content"])
        return (
            f"<predicted_observation>\n# {page.title}\n\n{page.content}\n</predicted_observation>"
        )

    env = simgym.make("search", world_model=simgym.FunctionWorldModel(engine))
    await env.reset(task)
    result = await env.step(Action.tool_call("web_extractor", {"url": page.url}))
    assert task.metadata["answer"] in result.observation.text
    assert page.url in prompts[0] and task.metadata["answer"] in prompts[0]
    assert "fictional" in prompts[0]
    await env.finish(task.metadata["answer"])
    assert env.trajectory.answer == task.metadata["answer"]


async def test_mcp_episode_on_a_world_record(worlds, tmp_path):
    world = worlds["bank"]
    path = tmp_path / "world.json"
    path.write_text(world.to_json())
    out = tmp_path / "bank.yaml"
    result = runner.invoke(
        world_app,
        ["scenario", str(path), "--domain", "mcp", "--row", "loans:LN-00001", "-o", str(out)],
    )
    assert result.exit_code == 0, result.output
    spec = load_specs([out])[0]
    scenario = MCPScenario.model_validate(spec.task.scenario)
    assert set(scenario.state) == {"loans"}
    assert list(scenario.state["loans"]) == ["LN-00001"]
    loan = scenario.state["loans"]["LN-00001"]

    def server(messages):  # answers get_loan from the hidden state in the prompt
        assert '"LN-00001"' in messages[0]["content"]
        return f"<predicted_observation>{json.dumps(loan)}</predicted_observation>"

    env = simgym.make("mcp", world_model=simgym.FunctionWorldModel(server))
    await env.reset(Task(instruction="Show loan LN-00001.", scenario=spec.task.scenario))
    result = await env.step(Action.tool_call("get_loan", {"loan_id": "LN-00001"}))
    assert (
        json.loads(result.observation.text)["principal_usd"]
        == world.row("loans", "LN-00001")["principal_usd"]
    )
    bad = await env.step(
        Action.tool_call("update_loan", {"loan_id": "LN-00001", "changes": {"kind": "Auto"}})
    )
    assert bad.observation.kind == "error" and "invalid arguments" in bad.observation.text

    whole = mcp_scenario(world, max_chars=10**7)
    assert sum(len(rows) for rows in whole["state"].values()) == world.row_count()
    assert "total_deposits_usd" not in json.dumps(whole["state"])  # derived totals stay out
    with pytest.raises(WorldError, match="more than max_chars"):
        mcp_scenario(world, max_chars=5000)


# -- rewards ----------------------------------------------------------------------------


async def test_world_tasks_reward_specs_score_right_and_wrong_answers(worlds):
    from simgym.rewards import build_reward

    world = worlds["logistics"]
    tasks = generate_tasks(world, 24, domain="mcp", seed=5)
    assert {t.metadata["reward"]["type"] for t in tasks} == {"exact", "table_f1", "state"}
    for task in tasks:
        reward = build_reward(task.metadata["reward"])
        kind = task.metadata["kind"]
        if kind == "update":
            state = json.loads(json.dumps(task.scenario["state"]))
            check = task.metadata["state_checks"][0]
            _, table, key, field = check["path"].split("/")
            before = Trajectory(task=task, domain="mcp", final_state=state)
            state_after = json.loads(json.dumps(state))
            state_after[table][key][field] = check["equals"]
            after = Trajectory(task=task, domain="mcp", final_state=state_after)
            assert (await reward.score(after)).value == 1.0
            assert (await reward.score(before)).value == 0.0
            continue
        right = Trajectory(task=task, domain="mcp", answer=task.metadata["answer"])
        assert (await reward.score(right)).value == 1.0, task.id
        if kind == "table":
            lines = task.metadata["answer"].splitlines()
            partial = Trajectory(task=task, domain="mcp", answer="\n".join(lines[:-1]))
            assert 0.0 < (await reward.score(partial)).value < 1.0
        else:
            wrong = Trajectory(task=task, domain="mcp", answer="no idea")
            assert (await reward.score(wrong)).value == 0.0


async def test_oracle_solutions_earn_full_reward_through_a_rollout(worlds, tmp_path):
    """Tasks → runner → world-backed simulator → task rewards, end to end: the
    reference solutions score 1.0 on every question (search and MCP)."""
    world = worlds["smartphones"]
    path = tmp_path / "tasks.jsonl"
    read = ["lookup", "multi_hop", "comparison", "aggregation", "table"]
    tasks = generate_tasks(world, 10, domain="search") + generate_tasks(
        world, 10, domain="mcp", kinds=read
    )
    path.write_text(task_lines(tasks, world))
    specs = load_specs([path])
    trajectories = await simgym.arollout(
        [s.task for s in specs],
        agent="scripted",
        agent_options={"by_task": {s.task.id: s.actions for s in specs}},
        world_model=simgym.FunctionWorldModel(world_oracle(world)),
        max_turns=40,
    )
    assert len(trajectories) == 20
    scores = {t.task.id: t.total_reward for t in trajectories}
    assert all(value == 1.0 for value in scores.values()), scores
    assert all(not t.error for t in trajectories)


async def test_oracle_serves_updates_as_state_patches(worlds):
    world = worlds["bank"]
    task = generate_tasks(world, 1, domain="mcp", kinds=["update"])[0]
    actions = oracle_actions(world, task)
    env = simgym.make("mcp", world_model=simgym.FunctionWorldModel(world_oracle(world)))
    await env.reset(task)
    for action in actions[:-1]:
        result = await env.step(action)
        assert result.observation.kind != "error", result.observation.text
    check = task.metadata["state_checks"][0]
    field = check["path"].rsplit("/", 1)[1]
    assert json.loads(result.observation.text)[field] == check["equals"]
