"""Every registered name resolves in a fresh process, with nothing imported beforehand:
names are ``"module:attr"`` strings loaded on first use, not import side effects."""

from __future__ import annotations

import subprocess
import sys

import pytest

from simgym.core.errors import SimgymError, UnknownDomainError
from simgym.core.registry import Registry, load_entry

PROBES = {
    "domains": (
        "from simgym.core.domain import domain_names, get_domain\n"
        "names = domain_names()\n"
        "assert {'terminal', 'mcp', 'swe', 'search', 'web', 'os', 'android'} <= set(names)\n"
        "assert all(get_domain(n).name == n for n in names)\n"
    ),
    "world models": (
        "from simgym.core.worldmodel import _BACKENDS, backend_names\n"
        "names = backend_names()\n"
        "assert {'local', 'openai', 'replay', 'function', 'real-terminal', 'real-mcp'} <= set(names)\n"
        "assert all(callable(_BACKENDS.get(n)) for n in names)\n"
    ),
    "agents": (
        "from simgym.agents.base import _AGENTS, agent_names\n"
        "names = agent_names()\n"
        "assert {'openai', 'local', 'scripted', 'human'} <= set(names)\n"
        "assert all(callable(_AGENTS.get(n)) for n in names)\n"
    ),
    "rewards": (
        "from simgym.rewards import build_reward, reward_names\n"
        "assert build_reward('exact').name and build_reward('f1').name\n"
        "assert {'exact', 'f1', 'state', 'judge'} <= set(reward_names())\n"
    ),
    "real executors": (
        "from simgym.real.registry import EXECUTORS\n"
        "names = EXECUTORS.names()\n"
        "assert set(names) == {'terminal', 'swe', 'web', 'mcp', 'search', 'http'}\n"
        "assert all(callable(EXECUTORS.get(n)) for n in names)\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_registered_names_resolve_without_prior_imports(kind):
    done = subprocess.run(
        [sys.executable, "-c", PROBES[kind]], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_make_builds_every_domain_in_a_fresh_process():
    code = (
        "import simgym\n"
        "for name in simgym.domain_names():\n"
        "    env = simgym.make(name, world_model='function', fn=lambda messages: 'x')\n"
        "    assert env.domain.name == name\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_registry_loads_strings_once_and_says_what_is_known():
    registry: Registry[object] = Registry("thing", {"path": "os.path:join"})
    assert registry.get("path") is load_entry("os.path:join")
    registry.register("mine", len)
    assert registry.names() == ["mine", "path"] and registry.get("mine") is len
    with pytest.raises(SimgymError, match="unknown thing 'nope'; available: mine, path"):
        registry.get("nope")


@pytest.mark.parametrize(
    "spec, problem",
    [("os.path", "is 'module:attr'"), ("no_such_mod:x", "cannot import"), ("os:nope", "has no")],
)
def test_bad_entry_points_say_what_is_wrong(spec, problem):
    with pytest.raises(SimgymError, match=problem):
        load_entry(spec)


def test_an_unknown_domain_keeps_its_error_type():
    from simgym.core.domain import get_domain

    with pytest.raises(UnknownDomainError, match="available: android"):
        get_domain("nowhere")


def test_public_names_stay_themselves_whatever_is_imported_first():
    """A lazily loaded name must not be shadowed by a submodule of the same name that
    another name's import brought in (``simgym.world_model`` once made ``simgym.make``
    the module, not the function)."""
    code = (
        "import simgym\n"
        "simgym.world_model\n"  # loads the module holding both make and world_model
        "assert callable(simgym.make) and callable(simgym.world_model), simgym.make\n"
        "import importlib\n"
        "for name, module in simgym._EXPORTS.items():\n"
        "    value = getattr(simgym, name)\n"
        "    assert value is getattr(importlib.import_module(module), name), name\n"
        "    assert not isinstance(value, type(simgym)), name\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
