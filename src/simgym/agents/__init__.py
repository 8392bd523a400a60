"""Agents (policies) that act in environments: an OpenAI-compatible tool-calling agent,
the embedded local model, a scripted agent, and a person at the terminal."""

from simgym.agents.base import (
    Agent,
    AgentError,
    AgentSession,
    Decision,
    EpisodeView,
    agent_names,
    create_agent,
    register_agent,
)
from simgym.agents.human import HumanAgent
from simgym.agents.local import LocalAgent
from simgym.agents.openai_agent import OpenAIAgent
from simgym.agents.scripted import ScriptedAgent

__all__ = [
    "Agent",
    "AgentError",
    "AgentSession",
    "Decision",
    "EpisodeView",
    "HumanAgent",
    "LocalAgent",
    "OpenAIAgent",
    "ScriptedAgent",
    "agent_names",
    "create_agent",
    "register_agent",
]
