"""Control over simulated episodes: injected faults and difficulty curricula.

``Perturbations`` (:mod:`~simgym.perturb.plan`, fault types in
:mod:`~simgym.perturb.faults`) decides, per turn and reproducibly from a seed, which fault
an environment meets; ``Curriculum`` (:mod:`~simgym.perturb.curriculum`) raises fault
rates, noise and task depth over training steps.
"""

from simgym.perturb.curriculum import (
    Curriculum,
    Difficulty,
    difficulty,
    env_perturbations,
    perturbations_for_level,
)
from simgym.perturb.faults import FAULT_KINDS, Fault
from simgym.perturb.plan import PerturbationError, Perturbations, Rule, load_perturbations

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
]
