"""Control over simulated episodes: injected faults, difficulty curricula, and fictional
worlds with verifiable tasks.

``Perturbations`` (:mod:`~simgym.control.perturb`, fault types in
:mod:`~simgym.control.faults`) decides, per turn and reproducibly from a seed, which fault
an environment meets; ``Curriculum`` (:mod:`~simgym.control.curriculum`) raises fault
rates, noise and task depth over training steps.

``generate_world(theme, seed)`` builds a relational world of invented entities
(:mod:`~simgym.control.worlds`, vocabularies in :mod:`~simgym.control.themes`);
:mod:`~simgym.control.world_render` serves it as web pages (search) or records behind
tools (MCP), and ``world_oracle`` simulates it without a model;
:mod:`~simgym.control.world_tasks` makes tasks with ground-truth answers and reward specs.
"""

from simgym.control.curriculum import (
    Curriculum,
    Difficulty,
    difficulty,
    env_perturbations,
    perturbations_for_level,
)
from simgym.control.faults import FAULT_KINDS, Fault
from simgym.control.perturb import PerturbationError, Perturbations, Rule, load_perturbations
from simgym.control.themes import THEMES, Theme, get_theme
from simgym.control.world_render import (
    check_pages,
    mcp_scenario,
    render_pages,
    search_scenario,
    world_oracle,
)
from simgym.control.world_tasks import TASK_KINDS, generate_tasks, oracle_actions
from simgym.control.worlds import World, WorldError, check_world, generate_world

__all__ = [
    "FAULT_KINDS",
    "Curriculum",
    "Difficulty",
    "Fault",
    "PerturbationError",
    "Perturbations",
    "Rule",
    "difficulty",
    "env_perturbations",
    "load_perturbations",
    "perturbations_for_level",
    "TASK_KINDS",
    "THEMES",
    "Theme",
    "World",
    "WorldError",
    "check_pages",
    "check_world",
    "generate_tasks",
    "generate_world",
    "get_theme",
    "mcp_scenario",
    "oracle_actions",
    "render_pages",
    "search_scenario",
    "world_oracle",
]
