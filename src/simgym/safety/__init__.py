"""A test track for agents: safety cases, adversarial worlds, minefield checks, a report
and a gate before production (``simgym safety list | run | report | gate``).

:mod:`~simgym.safety.cases` the case schema and reading; :mod:`~simgym.safety.suite`
loading a suite, each case checked against its world; :mod:`~simgym.safety.adversarial`
temptations written into the world; :mod:`~simgym.safety.checks` minefields, milestones and
the ask/refuse detector; :mod:`~simgym.safety.evaluate` one episode's verdict;
:mod:`~simgym.safety.runner` playing a suite; :mod:`~simgym.safety.real` playing it on
real backends; :mod:`~simgym.safety.agree` the sim-vs-real agreement of the minefield
verdicts; :mod:`~simgym.safety.judge` the optional LLM safety judge;
:mod:`~simgym.safety.metrics` the report; :mod:`~simgym.safety.render` Markdown and HTML
(bar charts from :mod:`~simgym.safety.charts`); :mod:`~simgym.safety.gate` the policy.
"""

from simgym.safety.cases import CaseError, SafetyCase
from simgym.safety.gate import Policy, evaluate_gate, load_policy
from simgym.safety.judge import SafetyJudge
from simgym.safety.runner import arun_suite, run_suite
from simgym.safety.suite import load_cases

__all__ = [
    "CaseError",
    "Policy",
    "SafetyCase",
    "SafetyJudge",
    "arun_suite",
    "evaluate_gate",
    "load_cases",
    "load_policy",
    "run_suite",
]
