"""``bench consistency``: does a world model keep a fact straight over n turns?

A probe is one short episode about one fact (a file in ``terminal`` and ``swe``, a record
in ``mcp``). At turn ``k`` the fact is created, changed or deleted; at turn ``k + n`` it is
looked at again (``cat``, ``read_file``, ``get_record``), and a rule checks what the
observation shows: the newest value and not the one before it, or a not-found error and
not the deleted value. Values are random tokens from the seed (``teal-4821``), so a model
cannot pass by guessing. The same probes run in both context modes of :class:`SimEnv`:
``history`` (every earlier turn is sent) and ``state`` (the hidden state ledger plus the
last few turns), so the two can be compared pair by pair.

Which turns the model under test writes: only the change at turn ``k`` and the look at
turn ``k + n``. Everything else is written by rule, not by the model: the turn before
``k`` (creating the old value that a change or delete acts on, or an unrelated command)
and the ``n - 1`` filler turns in between (``pwd``, ``echo check-17``, reading an
unrelated record or setting). Those scripted observations are correct and leave the fact
alone; when the system prompt asks for hidden-state updates they carry the right patch
(``{}`` for fillers). This keeps the benchmark affordable (two model calls per probe,
whatever ``n`` is) while the model still sees ``n`` turns of realistic activity between
the change and the look; it measures memory of the fact, not the model's skill at
simulating the fillers (strict mode may add a call: it asks again when the state does
not determine the whole observation). A model that cannot fit the history into its
context (the embedded model has 4096 tokens; its backend drops the oldest turns) loses
the change at large ``n`` in ``history`` mode: that is the drift ``state`` mode is meant
to fix, and the report shows it as measured.

In ``state`` mode the hidden state is only as good as the patches the model wrote at
turn ``k``, so each row also says whether the ledger held the fact right just before the
look (``ledger_ok``): a failure with a wrong ledger is a bad patch, one with a right
ledger is a model that ignored the state it was shown. The report's prompt tokens are the
probe turn's ``usage.prompt_tokens`` as the backend counts them (the local backend adds
the second request it makes to write the ``<state_update>``), and the JSON report's
``probe_request_chars`` is the size of the messages simgym sent, the same measure for
every backend. Format retries
are off by default (``retries=0``): a retry re-rolls the answer and doubles the cost.

Grounding (:mod:`simgym.core.grounding`) is a second dimension: each probe runs with each
``SimEnv(grounding=...)`` mode asked for (``off``, ``facts``, ``strict``), so the report
shows a model on its own beside the same model with simgym's facts. With grounding on,
the domain computes what the change at turn ``k`` certainly does and applies it to the
hidden state itself, and the look at ``k + n`` is sent with the facts the state holds;
the scripted turns are written so that the effects simgym computes for them are the same
as their scripted patches (``echo value > file`` creates the same file either way), and
a scripted turn that strict mode would re-ask or correct is a bug in the probes, counted
in the row (``scripted_strict``). The look is still written by the model under test, but
in ``strict`` mode simgym may correct it to the exact observation the state determines:
the row keeps what strict mode did (``probe.strict``: accepted, reasked, corrected or
unresolved) and whether the model's own last answer passed (``model_passed``), and the
report counts the passes that came from corrections. With grounding on, the ledger is
kept by simgym in both context modes, so ``ledger_ok`` is reported for ``history`` too
(once a turn was grounded).

Rows (one per probe, context mode and grounding) go to a JSONL file as they finish; a
rerun with the same settings skips the finished ones and reruns those that ended in a
model error. Row keys are ``domain/mode/n5/p0`` with grounding off (the keys of rows
written before grounding existed, which read back as ``off``) and
``domain/mode+strict/n5/p0`` with it on.

Modules: ``domains`` (the probe library per domain), ``probes`` (generation), ``model``
(the scripted-turn wrapper), ``score``, ``run`` and ``report``.
"""

from simgym.bench.consistency.domains import (
    MCP_PROBES,
    PROBE_DOMAINS,
    SWE_PROBES,
    TERMINAL_PROBES,
    ProbeDomain,
    Scripted,
)
from simgym.bench.consistency.model import ScriptedTurns
from simgym.bench.consistency.probes import (
    DEFAULT_GAPS,
    DEFAULT_GROUNDINGS,
    GROUNDINGS,
    MODES,
    MUTATION_TURN,
    OPS,
    Probe,
    Step,
    generate_probes,
    label,
    row_grounding,
)
from simgym.bench.consistency.report import (
    COLUMNS,
    Cell,
    corrected_totals,
    mode_totals,
    report_table,
    summarize,
)
from simgym.bench.consistency.run import (
    SCHEMA,
    ProbeEpisode,
    RunSettings,
    plan_runs,
    row_key,
    run_consistency,
    run_probe,
)
from simgym.bench.consistency.score import Verdict, ledger_agrees, score_observation

__all__ = [
    "COLUMNS",
    "DEFAULT_GAPS",
    "DEFAULT_GROUNDINGS",
    "GROUNDINGS",
    "MCP_PROBES",
    "MODES",
    "MUTATION_TURN",
    "OPS",
    "PROBE_DOMAINS",
    "SCHEMA",
    "SWE_PROBES",
    "TERMINAL_PROBES",
    "Cell",
    "Probe",
    "ProbeDomain",
    "ProbeEpisode",
    "RunSettings",
    "Scripted",
    "ScriptedTurns",
    "Step",
    "Verdict",
    "corrected_totals",
    "generate_probes",
    "label",
    "ledger_agrees",
    "mode_totals",
    "plan_runs",
    "report_table",
    "row_grounding",
    "row_key",
    "run_consistency",
    "run_probe",
    "score_observation",
    "summarize",
]
