"""Fault templates: each domain's observation for a fault, written in the domain's own
format, deterministically and without the world model. ``RENDERERS`` maps a domain to
``render(kind, context)``; one module per family of formats."""

from __future__ import annotations

from simgym.perturb.renderers._base import REASONS, Blank, Context, Renderer
from simgym.perturb.renderers.mcp import render_mcp
from simgym.perturb.renderers.search import render_search
from simgym.perturb.renderers.shell import render_swe, render_terminal
from simgym.perturb.renderers.ui import ui_renderer

RENDERERS: dict[str, Renderer] = {
    "mcp": render_mcp,
    "search": render_search,
    "terminal": render_terminal,
    "swe": render_swe,
    "web": ui_renderer("web"),
    "os": ui_renderer("os"),
    "android": ui_renderer("android"),
}

__all__ = ["REASONS", "RENDERERS", "Blank", "Context", "Renderer"]
