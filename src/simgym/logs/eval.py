"""Fidelity of a twin on held-out sessions: ``simgym logs eval``.

The sessions of a log are split by a keyed hash of their ids (the same ``seed`` gives the
same split on every run and in every format). A world is built from the training part;
each held-out session is then replayed, call by call, through the twin (a fresh episode
from the world's initial state) and compared with what the real system logged:

* **outcome agreement**: both succeeded, or both refused with the same error code;
* **violations answered**: of the held-out calls the real system refused with a kind of
  refusal the world mined (life-cycle 409s, permission 401/403s, and the rest), the share
  the twin refused with the same code, and with exactly the same answer;
* **JSON validity**: the share of the twin's observations that parse as JSON;
* **state agreement**: for every object a session touched, each field of the state the
  log last shows it in (ids and times left out) against the twin's ledger right after
  the same call.

Ids the real system assigned in a session (a new loan) differ from those the twin
assigns; a create's id is mapped to the twin's new record so later calls name it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgym.domains.mcp_rules import find
from simgym.logs.behaviour import call_result, error_code, outcome
from simgym.logs.calls import CallMapper
from simgym.logs.mask import Masker
from simgym.logs.model import ImportReport, LogRecord
from simgym.logs.registry import read_logs
from simgym.logs.twin import collection_names, load_world, world_scenario
from simgym.logs.world import build_world

LIFE_CYCLE = frozenset({409, 412, 423})
PERMISSION = frozenset({401, 403})
_VOLATILE = re.compile(r"(^id$|_at$|^time|stamp)")
_ABSENT = object()  # a record or field the twin does not have


def held_out(session: str, fraction: float, seed: int) -> bool:
    """Whether a session is in the held-out part (a keyed hash: stable across runs)."""
    digest = hashlib.sha256(f"{seed}:{session}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


@dataclass
class Tally:
    """Counts of one evaluation; :meth:`summary` turns them into rates."""

    sessions: int = 0
    calls: int = 0
    replayed: int = 0
    not_replayed: Counter[str] = field(default_factory=Counter)
    json_valid: int = 0
    agree: int = 0
    violations: Counter[str] = field(default_factory=Counter)
    violations_answered: Counter[str] = field(default_factory=Counter)
    violations_exact: Counter[str] = field(default_factory=Counter)
    unmined: int = 0
    checks: int = 0
    checks_agree: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        def rate(n: int, d: int) -> float | None:
            return round(n / d, 4) if d else None

        groups = sorted(self.violations)
        total = sum(self.violations.values())
        return {
            "sessions": self.sessions,
            "calls": self.calls,
            "replayed": self.replayed,
            "not_replayed": dict(self.not_replayed.most_common()),
            "json_validity": rate(self.json_valid, self.replayed),
            "outcome_agreement": rate(self.agree, self.replayed),
            "violations": total,
            "violations_answered": rate(sum(self.violations_answered.values()), total),
            "violations_exact": rate(sum(self.violations_exact.values()), total),
            "violations_by_kind": {
                g: {
                    "calls": self.violations[g],
                    "answered": rate(self.violations_answered[g], self.violations[g]),
                    "exact": rate(self.violations_exact[g], self.violations[g]),
                }
                for g in groups
            },
            "refusals_not_mined": self.unmined,
            "final_state_checks": self.checks,
            "final_state_agreement": rate(self.checks_agree, self.checks),
            "mismatches": self.mismatches[:20],
        }


def _group(status: int) -> str:
    if status in LIFE_CYCLE:
        return "life-cycle"
    if status in PERMISSION:
        return "permission"
    return "other"


def _parse(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (TypeError, ValueError):
        return False, None


def _twin_code(body: Any) -> str | None:
    """The error code of a twin's answer, or None when it answered a success."""
    if isinstance(body, dict) and "error" in body:
        return error_code(body) or "error"
    if isinstance(body, dict) and body.get("isError"):
        return "error"
    return None


def _mined_kinds(world_dir: Path) -> dict[str, set[str]]:
    """Tool -> the kinds of refusal (``409:invalid_transition``) its guards answer."""
    path = world_dir / "behaviour.json"
    if not path.is_file():
        return {}
    tools = json.loads(path.read_text(encoding="utf-8")).get("tools", {})
    return {
        tool: {f"{g.get('status')}:{error_code(g.get('answer'))}" for g in rules.get("guards", [])}
        for tool, rules in tools.items()
    }


def _swap(value: Any, ids: dict[str, Any]) -> Any:
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value) in ids:
        return ids[str(value)]
    if isinstance(value, dict):
        return {k: _swap(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, ids) for v in value]
    return value


def _swap_text(value: Any, ids: dict[str, Any]) -> Any:
    """Ids inside text too ("customer cust-7 has not passed KYC")."""
    if isinstance(value, str):
        for real, twin in ids.items():
            value = re.sub(rf"(?<![\w-]){re.escape(real)}(?![\w-])", str(twin), value)
        return value
    if isinstance(value, dict):
        return {k: _swap_text(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap_text(v, ids) for v in value]
    return value


class _Replay:
    def __init__(self, world_dir: Path, env: Any, tally: Tally) -> None:
        world = load_world(world_dir)
        self.scenario = world_scenario(world_dir)
        self.mapper = CallMapper(
            [op for op in world["interface"]["operations"] if isinstance(op, dict)],
            roles=bool(world["roles"]),
        )
        self.bindings = self.scenario["tool_map"]
        self.mined = _mined_kinds(world_dir)
        self.env = env
        self.tally = tally
        self.collection_of = collection_names(
            world["entities"].get("types", {}) or {}, world["interface"]["operations"]
        )

    def session(self, records: list[dict[str, Any]]) -> None:
        from simgym.core.types import Action

        tally = self.tally
        tally.sessions += 1
        self.env.reset()
        ids: dict[str, Any] = {}
        real_final: dict[tuple[str, str], dict[str, Any]] = {}
        for logged in records:
            tally.calls += 1
            call = self.mapper.call(logged)
            if isinstance(call, str):
                tally.not_replayed[call] += 1
                continue
            binding = self.bindings.get(call.tool, {})
            collection = binding.get("collection")
            before = self._ids(collection)
            result = self.env.step(Action.tool_call(call.tool, _swap(call.arguments, ids)))
            tally.replayed += 1
            text = result.observation.text
            if result.truncated:
                tally.not_replayed["the twin ended the episode: " + text[:80]] += 1
                break
            valid, body = _parse(text)
            tally.json_valid += valid
            kind = outcome(logged)
            twin = _twin_code(body) if valid else "unreadable"
            if kind == "ok":
                agree = twin is None
            else:
                real_code = kind.split(":", 1)[1]
                agree = twin is not None and (twin == real_code or not real_code)
            tally.agree += agree
            if kind != "ok":
                status = int(kind.split(":", 1)[0]) if kind[0].isdigit() else 500
                if kind in self.mined.get(call.tool, set()):
                    group = _group(status)
                    tally.violations[group] += 1
                    tally.violations_answered[group] += agree
                    # the twin names its own ids: compare with the real answer's ids mapped
                    expected = _swap(logged.get("response"), ids)
                    tally.violations_exact[group] += body == _swap_text(expected, ids)
                else:
                    tally.unmined += 1
            if not agree and len(tally.mismatches) < 50:
                tally.mismatches.append(
                    {"tool": call.tool, "real": kind, "twin": twin or "ok", "twin_text": text[:200]}
                )
            if kind != "ok":
                continue
            response = call_result(binding, logged, call.arguments, self.collection_of)
            shown: list[tuple[str, dict[str, Any]]] = []
            if response is not None and collection:
                if binding.get("op") == "create":
                    new = self._ids(collection) - before
                    if len(new) == 1:
                        ids[str(response["id"])] = next(iter(new))
                shown.append((collection, response))
            for obj in logged.get("objects") or []:
                coll = self.collection_of.get(str(obj.get("type")))
                if coll and isinstance(obj.get("state"), dict):
                    shown.append((coll, {"id": obj.get("id"), **obj["state"]}))
            # the log shows these objects as they were after this call: compare them with
            # the twin's records at the same moment (a later change the log never shows,
            # like a customer's KYC status after a check, cannot be checked from it)
            for coll, fields in shown:
                real_id = str(fields.get("id"))
                seen = real_final.setdefault((coll, real_id), {})
                state = self.env.state or {}
                twin = find(state.get(coll) or [], "id", ids.get(real_id, real_id))
                seen.update(
                    {
                        k: (v, _ABSENT if twin is None else twin.get(k, _ABSENT))
                        for k, v in fields.items()
                    }
                )
        self._final_state(real_final, ids)

    def _ids(self, collection: str | None) -> set[Any]:
        state = self.env.state or {}
        records = state.get(collection) if collection else None
        return {r.get("id") for r in records or [] if isinstance(r, dict)}

    def _final_state(
        self, real: dict[tuple[str, str], dict[str, tuple[Any, Any]]], ids: dict[str, Any]
    ) -> None:
        for (collection, real_id), fields in real.items():
            for name, (value, got) in fields.items():
                if _VOLATILE.search(name):
                    continue
                self.tally.checks += 1
                same = got is not _ABSENT and _swap(value, ids) == got
                self.tally.checks_agree += same
                if not same and len(self.tally.mismatches) < 50:
                    self.tally.mismatches.append(
                        {
                            "object": f"{collection}/{real_id}",
                            "field": name,
                            "real": value,
                            "twin": None if got is _ABSENT else got,
                        }
                    )


def _sessions(records: Iterable[LogRecord], masker: Masker) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[tuple[float, int, dict[str, Any]]]] = defaultdict(list)
    for seq, record in enumerate(records):
        masked = masker.record(record)
        when = masked.time if masked.time is not None else float("inf")
        grouped[masked.session].append((when, seq, masked.to_json()))
    return {s: [r for _, _, r in sorted(rows, key=lambda x: x[:2])] for s, rows in grouped.items()}


def evaluate(
    files: list[str],
    out_dir: str | Path,
    *,
    format: str = "auto",
    holdout: float = 0.2,
    seed: int = 0,
    world_model: Any = "local",
    grounding: str = "strict",
    experience: bool = False,
    mask_key: str = "simgym",
    max_sessions: int | None = None,
    **backend: Any,
) -> dict[str, Any]:
    """Build a world from the training sessions of ``files`` in ``out_dir/world`` and
    replay the held-out sessions through its twin; return the report (see module doc)."""
    from simgym.build import make  # the engine only when an evaluation runs

    out = Path(out_dir)
    world_dir = out / "world"
    if world_dir.exists():
        shutil.rmtree(world_dir)
    report = ImportReport()
    held: list[LogRecord] = []

    def training() -> Iterable[LogRecord]:
        for record in read_logs(files, report, format=format):
            if held_out(record.session, holdout, seed):
                held.append(record)
            else:
                yield record

    manifest = build_world(training(), world_dir, report=report, mask_key=mask_key)
    sessions = _sessions(held, Masker(mask_key))
    names = sorted(sessions)[:max_sessions] if max_sessions else sorted(sessions)
    scenario = world_scenario(world_dir)
    longest = max((len(sessions[n]) for n in names), default=1)
    options: dict[str, Any] = {"grounding": grounding, "max_turns": longest + 1, **backend}
    store = world_dir / "experience.db"  # the training sessions' transitions only
    if experience and store.is_file():
        options["experience"] = str(store)
    env = make("mcp", world_model, scenario=scenario, **options).sync()
    tally = Tally()
    replay = _Replay(world_dir, env, tally)
    try:
        for name in names:
            replay.session(sessions[name])
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()
    result = {
        "files": files,
        "format": format,
        "holdout": holdout,
        "seed": seed,
        "world_model": world_model if isinstance(world_model, str) else type(world_model).__name__,
        "grounding": grounding,
        "experience": bool(options.get("experience")),
        "train": {
            "records": manifest["counts"]["records"],
            "sessions": manifest["counts"]["sessions"],
        },
        **tally.summary(),
    }
    (out / "eval.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result
