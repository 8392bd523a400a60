"""World-model fidelity benchmark, compatible with AgentWorldBench.

The pipeline has three steps, each resumable and concurrent:

* :func:`run_infer` asks a world model for every benchmark row's next observation;
* :func:`run_judge` has an LLM judge grade each prediction against the real observation
  on Format, Factuality, Consistency, Realism and Quality (1-5 each);
* :func:`score_rows` aggregates per domain and overall (0-100), with rule metrics that
  need no judge (exact match, edit similarity, line F1, JSON checks, the domain's format
  check, length ratio) and with failures counted, never averaged away.

Rows are read from the official per-domain JSONL files (``{domain}_test.jsonl``), from
rows in the same layout written by simgym, or from simgym trajectory files.
"""

from simgym.bench.compare_runs import compare_reports
from simgym.bench.data import BenchRow, load_rows, select_rows
from simgym.bench.infer import run_infer
from simgym.bench.judge import parse_judge_output, run_judge
from simgym.bench.messages import build_messages
from simgym.bench.metrics import rule_metrics
from simgym.bench.score import score_rows

__all__ = [
    "BenchRow",
    "build_messages",
    "compare_reports",
    "load_rows",
    "parse_judge_output",
    "rule_metrics",
    "run_infer",
    "run_judge",
    "score_rows",
    "select_rows",
]
