"""The consistency report: cells by domain, gap and mode, and their table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simgym.bench.consistency.domains import PROBE_DOMAINS
from simgym.bench.consistency.probes import GROUNDINGS, MODES, OPS, label, row_grounding


@dataclass
class Cell:
    """Results for one domain, gap, context mode and grounding mode."""

    domain: str
    gap: int
    mode: str
    grounding: str = "off"
    passed: int = 0
    total: int = 0
    errors: int = 0
    corrected: int = 0  # passes whose look strict mode corrected (simgym's, not the model's)
    rendered: int = 0  # turns the model under test wrote
    contradictions: int = 0  # of those, served against the state's facts (strict: unresolved)
    by_op: dict[str, list[int]] = field(default_factory=dict)  # op -> [passed, total]
    ledger_ok: int = 0
    ledger_total: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    request_chars: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def label(self) -> str:
        return label(self.mode, self.grounding)

    def as_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "gap": self.gap,
            "mode": self.mode,
            "grounding": self.grounding,
            "passed": self.passed,
            "total": self.total,
            "pass_rate": round(self.rate, 4),
            "corrected": self.corrected,
            "rendered": self.rendered,
            "contradictions": self.contradictions,
            "errors": self.errors,
            "by_op": self.by_op,
            "ledger_ok": self.ledger_ok if self.ledger_total else None,
            "ledger_total": self.ledger_total,
            "probe_prompt_tokens": _mean(self.prompt_tokens),
            "probe_request_chars": _mean(self.request_chars),
        }


def _mean(values: list[int]) -> int | None:
    return round(sum(values) / len(values)) if values else None


def summarize(rows: Sequence[dict[str, Any]]) -> list[Cell]:
    """One cell per domain, gap, mode and grounding, in that order (so a mode's
    grounding-off row sits right above its grounded rows)."""
    cells: dict[tuple[str, int, str, str], Cell] = {}
    for row in rows:
        key = (row["domain"], row["gap"], row["mode"], row_grounding(row))
        cell = cells.setdefault(key, Cell(*key))
        cell.total += 1
        cell.passed += bool(row["passed"])
        cell.errors += row.get("status") == "error"
        probe = row.get("probe") or {}
        cell.corrected += bool(row["passed"]) and probe.get("strict") == "corrected"
        cell.rendered += row.get("rendered", 0)
        cell.contradictions += row.get("contradictions", 0)
        counts = cell.by_op.setdefault(row["op"], [0, 0])
        counts[0] += bool(row["passed"])
        counts[1] += 1
        if row.get("ledger_ok") is not None:
            cell.ledger_total += 1
            cell.ledger_ok += bool(row["ledger_ok"])
        if probe.get("prompt_tokens"):
            cell.prompt_tokens.append(probe["prompt_tokens"])
        if probe.get("request_chars"):
            cell.request_chars.append(probe["request_chars"])
    order = {name: i for i, name in enumerate(PROBE_DOMAINS)}
    return sorted(
        cells.values(),
        key=lambda c: (
            order.get(c.domain, len(order)),
            c.domain,
            c.gap,
            MODES.index(c.mode),
            GROUNDINGS.index(c.grounding) if c.grounding in GROUNDINGS else len(GROUNDINGS),
        ),
    )


def report_table(cells: Sequence[Cell], title: str = "World-state consistency") -> Any:
    """A rich table: pass rate by domain, gap n, context mode and grounding (off on the
    row above strict), with the passes strict mode corrected, the passes per op, the
    hidden state's agreement and the probe turn's prompt tokens. Compact enough for an
    80-column terminal at the default three probes a cell."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=title,
        caption="ground: grounding mode; fix: passes whose look strict mode corrected to "
        "the exact observation; bad: model answers served against the state's facts "
        "(contradictions); new/chg/del: passes per op; ledger: hidden state right at "
        "the look; tok: probe prompt tokens (backend's count; the JSON report has the "
        "request size in characters too)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    for name, right in COLUMNS:
        table.add_column(name, justify="right" if right else "left", no_wrap=True)
    previous: tuple[str, int, str] | None = None
    for cell in cells:
        ops = [
            f"{cell.by_op[op][0]}/{cell.by_op[op][1]}" if op in cell.by_op else "-" for op in OPS
        ]
        ledger = f"{cell.ledger_ok}/{cell.ledger_total}" if cell.ledger_total else "-"
        tokens = _mean(cell.prompt_tokens)
        group = (cell.domain, cell.gap, cell.mode)
        if previous is not None and group[:2] != previous[:2]:
            table.add_section()
        previous = group
        table.add_row(
            cell.domain,
            str(cell.gap),
            cell.mode,
            cell.grounding,
            f"{cell.passed}/{cell.total}",
            f"{100 * cell.rate:.0f}%",
            str(cell.corrected) if cell.grounding == "strict" else "-",
            str(cell.contradictions) if cell.grounding == "strict" else "-",
            *ops,
            ledger,
            "-" if tokens is None else str(tokens),
            str(cell.errors),
        )
    return table


# (header, right-aligned); "tok" is the probe turn's prompt tokens as the backend counts
# them, "fix" the corrected passes.
COLUMNS = (
    ("domain", False),
    ("n", True),
    ("mode", False),
    ("ground", False),
    ("pass", True),
    ("rate", True),
    ("fix", True),
    ("bad", True),
    ("new", True),
    ("chg", True),
    ("del", True),
    ("ledger", True),
    ("tok", True),
    ("err", True),
)


def mode_totals(cells: Sequence[Cell]) -> dict[str, tuple[int, int]]:
    """``label -> (passed, total)`` over all cells, the label being the context mode
    (``history``) with grounding off and ``history+strict`` with it on."""
    totals: dict[str, list[int]] = {}
    for cell in cells:
        t = totals.setdefault(cell.label, [0, 0])
        t[0] += cell.passed
        t[1] += cell.total
    return {name: (p, n) for name, (p, n) in totals.items()}


def corrected_totals(cells: Sequence[Cell]) -> dict[str, int]:
    """``label -> passes strict mode corrected`` (only grounded labels)."""
    out: dict[str, int] = {}
    for cell in cells:
        if cell.grounding != "off":
            out[cell.label] = out.get(cell.label, 0) + cell.corrected
    return out
