"""Table answers: parsing markdown or JSON tables, and item- and row-level F1 against a
reference table (WideSearch style)."""

from __future__ import annotations

import json
import re
from typing import Any

from simgym.core.types import Trajectory
from simgym.rewards._text import answers_match, normalize_answer
from simgym.rewards._verifier import TARGETS, Verifier, check_choice, episode_text, text_of
from simgym.rewards.base import RewardResult

Rows = list[dict[str, str]]
_DELIMITER_CELL = re.compile(r":?-+:?")


def _split_row(line: str) -> list[str]:
    """The cells of one markdown table line (``\\|`` is a literal bar)."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells = re.split(r"(?<!\\)\|", body)
    return [c.strip().replace("\\|", "|") for c in cells]


def parse_markdown_table(text: str) -> tuple[list[str], list[list[str]]] | None:
    """The header and body rows of the first markdown table in ``text`` (a header line,
    a delimiter line like ``|---|:--:|``, then rows), or None when there is none."""
    lines = text.splitlines()
    for i in range(1, len(lines)):
        if "|" not in lines[i] and "-" not in lines[i]:
            continue
        cells = _split_row(lines[i])
        if not cells or not all(_DELIMITER_CELL.fullmatch(c.replace(" ", "")) for c in cells):
            continue
        if "|" not in lines[i - 1] and "|" not in lines[i]:
            continue
        header = _split_row(lines[i - 1])
        rows = []
        for line in lines[i + 1 :]:
            if "|" not in line or not line.strip():
                break
            rows.append(_split_row(line))
        return header, rows
    return None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else text_of(value)


def parse_table(text: str) -> tuple[Rows, list[str]]:
    """Rows of a table answer: a JSON list of row objects (optionally in a code fence, or
    under one key of an object) or a markdown table. Returns the rows and notes on what
    was repaired; raises ``ValueError`` saying why when there is no usable table."""
    notes: list[str] = []
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    candidate = fenced.group(1).strip() if fenced else body
    if candidate[:1] in ("[", "{"):
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else None
        if isinstance(data, list):
            if not all(isinstance(r, dict) for r in data):
                raise ValueError("the JSON answer is a list, but not of row objects")
            return [{str(k): _cell(v) for k, v in r.items()} for r in data], notes
    table = parse_markdown_table(text)
    if table is None:
        raise ValueError("no markdown table (header, |---| line, rows) or JSON list of rows found")
    header, body_rows = table
    if len(set(header)) != len(header):
        raise ValueError(f"the table header repeats a column: {header}")
    rows = []
    for n, cells in enumerate(body_rows, 1):
        if len(cells) != len(header):
            notes.append(f"row {n} has {len(cells)} cells for {len(header)} columns")
            cells = (cells + [""] * len(header))[: len(header)]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows, notes


def _f1(correct: int, predicted: int, reference: int) -> tuple[float, float, float]:
    if predicted == 0 and reference == 0:
        return 1.0, 1.0, 1.0
    precision = correct / predicted if predicted else 0.0
    recall = correct / reference if reference else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


class TableF1(Verifier):
    """Scores a filled table against the reference rows (``table=`` or
    ``metadata["table"]``, a list of row objects or a markdown table), rows aligned on
    ``key_columns`` (else ``metadata["key_columns"]``, else the first column).

    Item level: each non-empty cell is an item; precision is correct cells over predicted
    cells, recall correct over reference cells. Row level: a row is correct when every
    reference column matches. ``level`` picks which F1 is the value; both are in the
    details. Cells compare as answers do (normalized text, equal numbers). Answer columns
    are matched to reference columns by normalized name; extra columns are ignored."""

    name = "table_f1"

    def __init__(
        self,
        table: list[dict[str, Any]] | str | None = None,
        key_columns: list[str] | None = None,
        *,
        level: str = "item",
        target: str = "answer",
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.level = check_choice("level", level, ("item", "row"))
        self.target = check_choice("target", target, TARGETS)
        self.table = table
        self.key_columns = key_columns

    def _reference(self, trajectory: Trajectory) -> tuple[Rows, list[str], list[str]]:
        meta = trajectory.task.metadata
        table = self.table if self.table is not None else meta.get("table")
        if table is None:
            raise ValueError("no reference table: the task has no metadata 'table'")
        if isinstance(table, str):
            try:
                rows, _ = parse_table(table)
            except ValueError as exc:
                raise ValueError(f"the reference table does not parse: {exc}") from None
        elif isinstance(table, list) and all(isinstance(r, dict) for r in table):
            rows = [{str(k): _cell(v) for k, v in r.items()} for r in table]
        else:
            raise ValueError("the reference table must be a list of row objects or markdown")
        columns = list(dict.fromkeys(c for r in rows for c in r))
        keys = self.key_columns if self.key_columns is not None else meta.get("key_columns")
        if keys is None:
            keys = columns[:1]
        if isinstance(keys, str):
            keys = [keys]
        missing = [k for k in keys if k not in columns]
        if not keys or missing:
            raise ValueError(f"key columns {keys} are not columns of the reference {columns}")
        return rows, columns, list(keys)

    def check(self, trajectory: Trajectory) -> RewardResult:
        try:
            reference, columns, keys = self._reference(trajectory)
        except ValueError as exc:
            return self.fail(str(exc))
        got = episode_text(trajectory, self.target)
        if got is None:
            return self.fail("the agent gave no final answer")
        try:
            predicted, notes = parse_table(got)
        except ValueError as exc:
            return self.fail(f"malformed table: {exc}", got=got[:1000])
        # answer column names -> reference column names, by normalized name
        by_norm = {normalize_answer(c): c for c in columns}
        answer_columns = list(dict.fromkeys(c for r in predicted for c in r))
        mapping: dict[str, str] = {}
        for column in answer_columns:
            target = by_norm.get(normalize_answer(column))
            if target is not None and target not in mapping.values():
                mapping[column] = target
        absent_keys = [k for k in keys if k not in mapping.values()]
        if predicted and absent_keys:
            return self.fail(
                f"malformed table: key column(s) {absent_keys} missing, rows cannot be matched",
                answer_columns=answer_columns,
                got=got[:1000],
            )
        rows = [{mapping[c]: v for c, v in r.items() if c in mapping} for r in predicted]
        return self._score(reference, rows, columns, keys, notes, answer_columns, mapping)

    def _score(
        self,
        reference: Rows,
        rows: Rows,
        columns: list[str],
        keys: list[str],
        notes: list[str],
        answer_columns: list[str],
        mapping: dict[str, str],
    ) -> RewardResult:
        def key_of(row: dict[str, str]) -> tuple[str, ...]:
            return tuple(normalize_answer(row.get(k, "")) for k in keys)

        unmatched: dict[tuple[str, ...], list[int]] = {}
        for i, ref in enumerate(reference):
            unmatched.setdefault(key_of(ref), []).append(i)
        correct_items = correct_rows = 0
        unmatched_rows = []
        for row in rows:
            slots = unmatched.get(key_of(row))
            if not slots:
                unmatched_rows.append({k: row.get(k, "") for k in keys})
                continue
            ref = reference[slots.pop(0)]
            cells_ok = [answers_match(row.get(c, ""), ref.get(c, "")) for c in columns]
            correct_items += sum(
                ok for ok, c in zip(cells_ok, columns, strict=True) if ref.get(c, "") != ""
            )
            correct_rows += all(cells_ok)
        predicted_items = sum(1 for r in rows for c in columns if r.get(c, "") != "")
        reference_items = sum(1 for r in reference for c in columns if r.get(c, "") != "")
        ip, ir, item_f1 = _f1(correct_items, predicted_items, reference_items)
        rp, rr, row_f1 = _f1(correct_rows, len(rows), len(reference))
        value = item_f1 if self.level == "item" else row_f1
        missing_rows = [
            {k: reference[i].get(k, "") for k in keys} for s in unmatched.values() for i in s
        ]
        return self.result(
            value,
            level=self.level,
            item_f1=item_f1,
            item_precision=ip,
            item_recall=ir,
            row_f1=row_f1,
            row_precision=rp,
            row_recall=rr,
            rows_predicted=len(rows),
            rows_reference=len(reference),
            rows_correct=correct_rows,
            unmatched_rows=unmatched_rows[:20],
            missing_rows=missing_rows[:20],
            missing_columns=[c for c in columns if c not in mapping.values()],
            extra_columns=[c for c in answer_columns if c not in mapping],
            notes=notes,
        )
