"""Small helpers shared by the tests."""

from __future__ import annotations


def scripted_world(observations):
    """A world model (for FunctionWorldModel) that answers turn N with observations[N - 1],
    tagged like a real model would."""

    def world(messages):
        turn = sum(1 for m in messages if m["role"] == "user")
        return f"<predicted_observation>\n{observations[turn - 1]}\n</predicted_observation>"

    return world
