"""Sim2real: does a policy trained in simgym's simulated twin do better on the real server?

:mod:`~simgym.bench.sim2real.tasks` makes the held-out and training task sets on the
customer-records MCP server, :mod:`~simgym.bench.sim2real.shell_tasks` those on a real
sandboxed shell (``get_suite("records" | "shell")``); :func:`evaluate` plays a policy on
both the real backend and its twin and reports success with 95% intervals and the
sim-minus-real gap (``examples/sim2real/`` runs it); :func:`rescore` applies fixed checks to
the episodes an evaluation stored.
"""

from simgym.bench.sim2real.evaluate import (
    aevaluate,
    after_faults,
    conditions_table,
    evaluate,
    faults_table,
    report_table,
    summarize,
)
from simgym.bench.sim2real.reader import ReaderAgent
from simgym.bench.sim2real.rescore import arescore, rescore
from simgym.bench.sim2real.shell_tasks import shell_heldout_tasks, shell_training_tasks
from simgym.bench.sim2real.stats import newcombe_difference, paired_task_bootstrap, wilson
from simgym.bench.sim2real.suites import SUITES, Suite, get_suite
from simgym.bench.sim2real.tasks import heldout_tasks, training_tasks, training_world

__all__ = [
    "SUITES",
    "ReaderAgent",
    "Suite",
    "aevaluate",
    "arescore",
    "after_faults",
    "conditions_table",
    "evaluate",
    "faults_table",
    "get_suite",
    "heldout_tasks",
    "newcombe_difference",
    "paired_task_bootstrap",
    "report_table",
    "rescore",
    "shell_heldout_tasks",
    "shell_training_tasks",
    "summarize",
    "training_tasks",
    "training_world",
    "wilson",
]
