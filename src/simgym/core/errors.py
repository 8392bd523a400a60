"""Errors simgym raises. Every one carries a message meant for a person to read."""

from __future__ import annotations


class SimgymError(Exception):
    """Base class: anything simgym reports on purpose."""


class UnknownDomainError(SimgymError, KeyError):
    """A domain name that is not registered."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else "unknown domain"


class ActionError(SimgymError, ValueError):
    """An action that is malformed, too large, or not allowed by the scenario."""


class TaskError(SimgymError, ValueError):
    """A task that cannot be read, or that is for another domain."""


class ScenarioError(SimgymError, ValueError):
    """A scenario that does not fit the domain's schema."""


class WorldModelError(SimgymError):
    """A world model that failed to answer (down, timed out, or unusable output)."""


class EpisodeStateError(SimgymError, RuntimeError):
    """An environment used out of order: step before reset, or after the episode ended."""


class PluginError(SimgymError):
    """A plugin (an entry point another package declares) that could not be loaded, or
    that did not give what its group expects."""


class ConformanceError(SimgymError, AssertionError):
    """A domain or backend that breaks the contract (:mod:`simgym.core.conformance`);
    the message lists every problem found."""
