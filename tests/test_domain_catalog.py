"""Every domain is complete: prompt, scenario schema, validator, demonstrations, examples."""

import string
from pathlib import Path

import pytest

import simgym
from simgym.rollout.scripted import load_specs

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ["mcp", "search", "terminal", "swe", "web", "os", "android"]


def test_all_seven_domains_are_registered():
    assert sorted(simgym.domain_names()) == sorted(DOMAINS)


@pytest.mark.parametrize("name", DOMAINS)
def test_domain_is_complete(name):
    """The public conformance check (what a plugin's own tests run) passes on each."""
    domain = simgym.check_domain(name)
    assert domain.name == name and domain.family in ("shell", "tool", "search", "gui")


@pytest.mark.parametrize("name", DOMAINS)
def test_domain_has_five_examples_that_load(name):
    files = sorted((ROOT / "examples" / name).glob("*.yaml"))
    assert len(files) >= 5, f"{name}: {len(files)} examples"
    domain = simgym.get_domain(name)
    for spec in load_specs(files):
        assert spec.task.domain == name and spec.actions and spec.task.instruction
        scenario = domain.scenario(spec.task.scenario)
        template = domain.prompt_template()
        prompt = domain.system_prompt(scenario)
        assert not [s for s in string.Template(template).get_identifiers() if f"${s}" in prompt]
