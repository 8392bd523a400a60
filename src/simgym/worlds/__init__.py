"""Fictional worlds with verifiable tasks.

``generate_world(theme, seed)`` builds a relational world of invented entities
(:mod:`~simgym.worlds.generate`, vocabularies in :mod:`~simgym.worlds.themes`);
:mod:`~simgym.worlds.render` serves it as web pages (search) or records behind tools
(MCP), and ``world_oracle`` simulates it without a model; :mod:`~simgym.worlds.tasks`
makes tasks with ground-truth answers and reward specs.
"""

from simgym.worlds.generate import World, WorldError, check_world, generate_world
from simgym.worlds.render import (
    check_pages,
    mcp_scenario,
    render_pages,
    search_scenario,
    world_oracle,
)
from simgym.worlds.tasks import TASK_KINDS, generate_tasks, oracle_actions
from simgym.worlds.themes import THEMES, Theme, get_theme

__all__ = [
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
