"""Rewards for finished episodes: rule verifiers, a rubric judge, and weighted hybrids."""

from simgym.rewards.base import Reward, RewardResult

__all__ = ["Reward", "RewardResult"]
