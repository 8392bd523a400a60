"""The experience store: recorded real transitions, retrieved as demonstrations.

Build an index from trajectory files, AgentWorldBench rows or the factory's output, then
hand it to an environment; each simulated action is shown to the world model with the
most similar recorded transitions of the same domain (and, first, of the same tool or
command)::

    from simgym.experience import open_store

    store = open_store("experience.db")
    store.add_file("devset/rows.jsonl")
    env = simgym.make("terminal", world_model="local", grounding="facts", experience=store)

``simgym experience build OUT.db FILES...`` does the same from a shell.
"""

from simgym.experience.keys import action_key, action_terms, command_word
from simgym.experience.sources import ExperienceError, IndexReport, Transition, read_file
from simgym.experience.store import ExperienceStore, build_store, open_store

__all__ = [
    "ExperienceError",
    "ExperienceStore",
    "IndexReport",
    "Transition",
    "action_key",
    "action_terms",
    "build_store",
    "command_word",
    "open_store",
    "read_file",
]
