"""Rewards for finished episodes: rule verifiers, a rubric judge, and weighted hybrids.

``build_reward(spec)`` turns a spec (None, a name, a dict, a list) into a reward; see
:mod:`simgym.rewards.registry`.
"""

from simgym.rewards._state import StateCheck
from simgym.rewards._tables import TableF1, parse_table
from simgym.rewards._text import (
    Contains,
    ExactMatch,
    RegexMatch,
    TokenF1,
    answers_match,
    normalize_answer,
    token_f1,
)
from simgym.rewards._tools import ToolCallCheck
from simgym.rewards._verifier import Verifier
from simgym.rewards.base import Reward, RewardResult
from simgym.rewards.hybrid import HybridReward
from simgym.rewards.judge import JudgeError, RubricJudge, parse_verdict
from simgym.rewards.registry import TaskReward, build_reward, register_reward, reward_names

__all__ = [
    "Contains",
    "ExactMatch",
    "HybridReward",
    "JudgeError",
    "RegexMatch",
    "Reward",
    "RewardResult",
    "RubricJudge",
    "StateCheck",
    "TableF1",
    "TaskReward",
    "TokenF1",
    "ToolCallCheck",
    "Verifier",
    "answers_match",
    "build_reward",
    "normalize_answer",
    "parse_table",
    "parse_verdict",
    "reward_names",
    "register_reward",
    "token_f1",
]
