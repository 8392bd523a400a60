"""Fidelity of a twin on held-out sessions: ``simgym logs eval``.

A world is built from training logs and each held-out session is replayed, call by
call, through its twin (a fresh episode from the world's initial state) and compared
with what the real system logged. The held-out sessions are either a separate log
(``heldout``: the training logs are all used) or a share of the sessions of the same
logs, split by a keyed hash of their ids (the same ``seed`` gives the same split on
every run and in every format).

* **outcome agreement**: the real call succeeded and the twin answered a success of the
  same shape (a JSON object with the real answer's fields, no error); or the real call
  was refused and the twin refused with the same status and the same error code. An
  answer that is neither (free text, an object missing the real fields) disagrees;
* **refusals**: per kind of refusal (:mod:`simgym.logs.refusals`: life-cycle,
  permission, limit, self-approval, segregation of duties, match, duplicate, validation,
  not found, unknown), the real refusals the twin answered with the right status and
  error code, and with exactly the same answer; the kind comes from the mined guard
  that explains the refusal, else from the real error code;
* **violations**: the same, over the refusals of a kind (status and code) the world mined;
* **JSON validity**: the share of the twin's observations that parse as JSON;
* **state agreement**: for every object a session touched, each field of the state the
  log last shows it in (ids and times left out) against the twin's ledger right after
  the same call, as a share of these field checks;
* **model's share**: the replayed calls whose answer no rule or state decided (the
  world model wrote it).

A world whose import found no bodies or no object state is no twin: the evaluation
says why and stops (:class:`NotATwin`).

Ids the real system assigned in a session (a new loan) differ from those the twin
assigns; a create's id is mapped to the twin's new record so later calls name it.

Each held-out session of a separate log starts from the world's state with: the records
the sessions before it (in time) showed, as they last showed them, and what the world's
mined effects did to them (a payout makes its claim "paid", though the log shows only the
payout); the records the session itself reads before it changes them (data the system
had before the log began); and without the training records whose ids the held-out run
gives records it makes (two runs number their claims alike).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgym.core.errors import SimgymError
from simgym.domains.mcp_rules import Guard, ParentEffect, find, key_of
from simgym.experience import open_store
from simgym.logs.behaviour import call_result, error_code, outcome
from simgym.logs.calls import CallMapper
from simgym.logs.coverage import coverage_problems
from simgym.logs.mask import Masker
from simgym.logs.model import OUTCOME_KEYS, ImportReport, LogRecord
from simgym.logs.refusals import KINDS, guard_kind, refusal_kind
from simgym.logs.registry import read_logs
from simgym.logs.twin import collection_names, load_world, world_scenario
from simgym.logs.world import build_world

_VOLATILE = re.compile(r"(^id$|_at$|^time|stamp)")
_ABSENT = object()  # a record or field the twin does not have
_REFUSED = re.compile(r"refuses this call with status (\w+) \((.*)\)$")


class NotATwin(SimgymError):
    """The world built from the logs holds no bodies or no state: nothing to evaluate."""


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
    model_answers: int = 0
    refusals: Counter[str] = field(default_factory=Counter)
    refusals_answered: Counter[str] = field(default_factory=Counter)
    refusals_exact: Counter[str] = field(default_factory=Counter)
    kind_from: Counter[str] = field(default_factory=Counter)
    conflicts: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    violations: Counter[str] = field(default_factory=Counter)
    violations_answered: Counter[str] = field(default_factory=Counter)
    violations_exact: Counter[str] = field(default_factory=Counter)
    unmined: int = 0
    errored: Counter[str] = field(default_factory=Counter)
    checks: int = 0
    checks_agree: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        def rate(n: int, d: int) -> float | None:
            return round(n / d, 4) if d else None

        def by_kind(
            calls: Counter[str], answered: Counter[str], exact: Counter[str], order: Iterable[str]
        ) -> dict[str, Any]:
            return {
                g: {
                    "calls": calls[g],
                    "answered": rate(answered[g], calls[g]),
                    "exact": rate(exact[g], calls[g]),
                }
                for g in order
                if calls[g]
            }

        total = sum(self.violations.values())
        refused = sum(self.refusals.values())
        return {
            "sessions": self.sessions,
            "calls": self.calls,
            "replayed": self.replayed,
            "not_replayed": dict(self.not_replayed.most_common()),
            "json_validity": rate(self.json_valid, self.replayed),
            "outcome_agreement": rate(self.agree, self.replayed),
            "calls_errored": sum(self.errored.values()),
            "errors": dict(self.errored.most_common(10)),
            "model_answers": self.model_answers,
            "model_share": rate(self.model_answers, self.replayed),
            "refusals": refused,
            "refusals_answered": rate(sum(self.refusals_answered.values()), refused),
            "refusals_exact": rate(sum(self.refusals_exact.values()), refused),
            "refusals_by_kind": by_kind(
                self.refusals, self.refusals_answered, self.refusals_exact, KINDS
            ),
            "refusal_kind_from": dict(self.kind_from.most_common()),
            "refusal_kind_conflicts": [
                {"tool": t, "code": c, "kind": k, "guard_says": g, "calls": n}
                for (t, c, k, g), n in self.conflicts.most_common(20)
            ],
            "violations": total,
            "violations_answered": rate(sum(self.violations_answered.values()), total),
            "violations_exact": rate(sum(self.violations_exact.values()), total),
            "violations_by_kind": by_kind(
                self.violations,
                self.violations_answered,
                self.violations_exact,
                sorted(self.violations),
            ),
            "refusals_not_mined": self.unmined,
            "final_state_checks": self.checks,
            "final_state_agreement": rate(self.checks_agree, self.checks),
            "mismatches": self.mismatches[:20],
        }


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


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


def _success_shape(real: Any, twin: Any) -> bool:
    """Whether a twin's success answer has the real success's shape: the same kind of
    JSON value and, for an object, every field the real answer has (bar the outcome
    notes a process log adds to an event)."""
    if isinstance(real, dict):
        wanted = {k for k in real if k not in OUTCOME_KEYS or k in ("result", "reason")}
        return isinstance(twin, dict) and wanted <= set(twin)
    if isinstance(real, list):
        return isinstance(twin, list)
    if real is None:
        return True  # the log kept no answer: any success will do
    return type(real) is type(twin) or (isinstance(real, str) and isinstance(twin, str))


def _fired(grounding: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """The status and the conditions of the mined guard that refused a twin's call."""
    for fact in (grounding or {}).get("facts") or []:
        found = _REFUSED.search(str(fact))
        if found:
            status = int(found.group(1)) if found.group(1).isdigit() else None
            return status, found.group(2)
    return None, None


def _guards(world_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Tool -> its mined guards (``behaviour.json``), each with the text of its
    conditions as the twin states them."""
    path = world_dir / "behaviour.json"
    if not path.is_file():
        return {}
    tools = json.loads(path.read_text(encoding="utf-8")).get("tools", {})
    out: dict[str, list[dict[str, Any]]] = {}
    for tool, rules in tools.items():
        kept = []
        for guard in rules.get("guards") or []:
            try:
                when = "; ".join(c.text() for c in Guard.model_validate(guard).when)
            except ValueError:
                when = None  # a guard the twin could not load either
            kept.append({**guard, "_text": when or "the record does not exist"})
        out[tool] = kept
    return out


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
    def __init__(
        self, world_dir: Path, env: Any, tally: Tally, *, start_from_reads: bool = True
    ) -> None:
        world = load_world(world_dir)
        self.scenario = world_scenario(world_dir)
        self.mapper = CallMapper(
            [op for op in world["interface"]["operations"] if isinstance(op, dict)],
            roles=bool(world["roles"]),
        )
        self.bindings = self.scenario["tool_map"]
        self.start_from_reads = start_from_reads  # see evaluate()
        self.guards = _guards(world_dir)
        self.creates = frozenset(
            tool
            for tool, b in self.bindings.items()
            if isinstance(b, dict) and b.get("op") == "create"
        )
        self.env = env
        self.tally = tally
        self.collection_of = collection_names(
            world["entities"].get("types", {}) or {}, world["interface"]["operations"]
        )
        self.made: dict[str, set[str]] = {}  # see :meth:`made_ids`

    def known(self, records: list[dict[str, Any]], into: dict[str, dict[str, Any]]) -> None:
        """What a held-out session's log shows of objects (their states after its calls),
        into ``into`` (collection -> key -> record): the system's data as later sessions
        find it."""
        state = self.scenario["state"]
        for logged in records:
            if outcome(logged) != "ok":
                continue
            for obj in logged.get("objects") or []:
                coll = self.collection_of.get(str(obj.get("type")))
                if not coll or not isinstance(obj.get("state"), dict) or coll not in state:
                    continue
                key = key_of(state, coll)
                found = into.setdefault(coll, {}).setdefault(str(obj.get("id")), {})
                found.update({key: obj.get("id"), **obj["state"]})
            self._consequences(logged, into)

    def _consequences(self, logged: dict[str, Any], into: dict[str, dict[str, Any]]) -> None:
        """What a successful call did to the records it points to, by the world's mined
        effects (a payout makes its claim "paid"), where the log shows only the record
        it made: the state a later session finds, until the log shows it again."""
        call = self.mapper.call(logged)
        if isinstance(call, str):
            return
        binding = self.bindings.get(call.tool, {})
        parents = (binding.get("rules") or {}).get("parents") or []
        made = call_result(binding, logged, call.arguments, self.collection_of) if parents else None
        for data in parents if made is not None else []:
            try:
                effect = ParentEffect.model_validate(data)
            except ValueError:
                continue
            pointer = call.arguments.get(effect.via, made.get(effect.via))
            parent = into.get(effect.collection, {}).get(str(pointer))
            if parent is not None and effect.source in made:
                parent[effect.field] = effect.value(parent, made)

    def read_first(self, records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Records a session reads before it changes them (collection -> key -> record):
        the system's data as it was when the session began, which no earlier session
        showed (a policy sold before the log began, read before a claim is filed on
        it). A record the session made or changed before reading it is left out: its
        read shows the session's own work."""
        state = self.scenario["state"]
        changed: set[str] = set()
        found: dict[str, dict[str, Any]] = {}
        for logged in records:
            call = self.mapper.call(logged)
            if isinstance(call, str) or outcome(logged) != "ok":
                continue
            binding = self.bindings.get(call.tool, {})
            coll = binding.get("collection")
            if binding.get("op") != "get" or not coll or coll not in state:
                # whatever a call that writes names may have changed (its ids)
                changed.update(str(v) for v in call.arguments.values() if _scalar(v))
                body = logged.get("response")
                if isinstance(body, dict):
                    changed.update(str(v) for v in body.values() if _scalar(v))
                continue
            body = call_result(binding, logged, call.arguments, self.collection_of)
            key = key_of(state, coll)
            rid = None if body is None else body.get(key, body.get("id"))
            if rid is None or str(rid) in changed or str(rid) in found.get(coll, {}):
                continue
            found.setdefault(coll, {})[str(rid)] = {**body, key: rid}
        return found

    def made_ids(self, sessions: Iterable[list[dict[str, Any]]]) -> None:
        """The ids a separate held-out run gives the records it makes (collection ->
        ids): that run's own records, so a training record under the same id (claim
        CLM-2026-000029 of the other run) is not there before the held-out run makes it."""
        for records in sessions:
            for logged in records:
                call = self.mapper.call(logged)
                if isinstance(call, str) or outcome(logged) != "ok":
                    continue
                binding = self.bindings.get(call.tool, {})
                coll = binding.get("collection")
                if binding.get("op") != "create" or not coll:
                    continue
                made = call_result(binding, logged, call.arguments, self.collection_of)
                key = key_of(self.scenario["state"], coll)
                rid = None if made is None else made.get(key, made.get("id"))
                if rid is not None:
                    self.made.setdefault(coll, set()).add(str(rid))

    def start(self, known: dict[str, dict[str, Any]] | None) -> None:
        """A fresh episode from the world's state, with the records a separate held-out
        log showed before this session (its system's own data, which the training log
        never saw) put in or over the world's, and without the training records whose
        ids the held-out run gives records it makes."""
        if not known and not self.made:
            self.env.reset()
            return
        state = dict(self.scenario["state"])
        for coll in {*(known or {}), *self.made}:
            found = (known or {}).get(coll, {})
            gone = self.made.get(coll, set())
            key = key_of(state, coll)
            records = [
                r
                for r in state.get(coll) or []
                if str(r.get(key)) not in found and str(r.get(key)) not in gone
            ]
            state[coll] = [*records, *(dict(r) for r in found.values())]
        self.env.reset(scenario={**self.scenario, "state": state})

    def session(
        self, records: list[dict[str, Any]], known: dict[str, dict[str, Any]] | None = None
    ) -> None:
        from simgym.core.types import Action

        tally = self.tally
        tally.sessions += 1
        # the records this session reads before it changes them were there when it began
        first = self.read_first(records) if self.start_from_reads else {}
        if first:
            known = {c: dict(r) for c, r in (known or {}).items()}
            for coll, found in first.items():
                known.setdefault(coll, {}).update(found)
        self.start(known)
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
            state = self.env.state
            result = self.env.step(Action.tool_call(call.tool, _swap(call.arguments, ids)))
            tally.replayed += 1
            text = result.observation.text
            if result.info.get("error_type") == "world_model" or result.truncated:
                # the world model could not answer (a prompt over its context, a server
                # down): a miss for this call, never an agreement; the replay goes on
                # from the ledger as it was, in a fresh episode (the error changed nothing)
                error = str(result.info.get("error") or text)
                tally.errored[error[:120]] += 1
                if len(tally.mismatches) < 50:
                    real = outcome(logged)
                    tally.mismatches.append(
                        {"tool": call.tool, "real": real, "twin": f"error: {error[:160]}"}
                    )
                if outcome(logged) != "ok":
                    self._kind(call.tool, logged, None, None, "error", False, None, ids)
                self.env.reset(scenario={**self.scenario, "state": state or {}})
                if outcome(logged) == "ok":  # what the real call changed, the twin did not
                    self._shown(binding, logged, call.arguments, before, ids, real_final)
                continue
            valid, body = _parse(text)
            tally.json_valid += valid
            turns = self.env.trajectory.turns if self.env.trajectory else []
            grounding = turns[-1].grounding if turns else None
            # an answer the state or a rule decided whole; any other is the model's
            tally.model_answers += not (grounding or {}).get("exact")
            kind = outcome(logged)
            twin = _twin_code(body) if valid else "unreadable"
            fired_status, fired_when = _fired(grounding)
            if twin is None and fired_when is not None:
                # a mined guard refused it with the system's own body, whatever its shape
                # (an RFC 9457 problem has its code at the top, no "error" member)
                twin = error_code(body) or "error"
            if kind == "ok":
                agree = valid and twin is None and _success_shape(logged.get("response"), body)
                seen = "ok" if agree else twin or "another shape"
            else:
                agree = self._refusal(logged, valid, twin, fired_status)
                seen = f"{fired_status}:{twin}" if twin and twin != "unreadable" else twin or "ok"
            tally.agree += agree
            if kind != "ok":
                self._kind(call.tool, logged, fired_status, fired_when, twin, agree, body, ids)
            if not agree and len(tally.mismatches) < 50:
                tally.mismatches.append(
                    {"tool": call.tool, "real": kind, "twin": seen, "twin_text": text[:200]}
                )
            if kind != "ok":
                continue
            self._shown(binding, logged, call.arguments, before, ids, real_final)
        self._final_state(real_final, ids)

    def _shown(
        self,
        binding: dict[str, Any],
        logged: dict[str, Any],
        arguments: dict[str, Any],
        before: set[Any],
        ids: dict[str, Any],
        real_final: dict[tuple[str, str], dict[str, Any]],
    ) -> None:
        """Note the objects a successful real call shows against the twin's records."""
        collection = binding.get("collection")
        response = call_result(binding, logged, arguments, self.collection_of)
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
            twin = find(state.get(coll) or [], key_of(state, coll), ids.get(real_id, real_id))
            seen.update(
                {
                    k: (v, _ABSENT if twin is None else twin.get(k, _ABSENT))
                    for k, v in fields.items()
                }
            )

    @staticmethod
    def _refusal(
        logged: dict[str, Any], valid: bool, twin: str | None, fired_status: int | None
    ) -> bool:
        """Whether the twin refused a call the real system refused, with its status (where
        the log has one) and its error code (where the real answer has one)."""
        if not valid or twin is None:
            return False
        status = logged.get("status")
        code = error_code(logged.get("response"))
        if isinstance(status, int) and status != fired_status:
            return False  # a refusal the model wrote has no status: not the right one
        return not code or twin == code

    def _kind(
        self,
        tool: str,
        logged: dict[str, Any],
        fired_status: int | None,
        fired_when: str | None,
        twin: str | None,
        agree: bool,
        body: Any,
        ids: dict[str, Any],
    ) -> None:
        """Count one real refusal under its kind: the mined guard that fired when it gave
        the real status and code, else the first mined guard of the tool that gives them,
        else what the real error code says."""
        tally = self.tally
        status = logged.get("status")
        code = error_code(logged.get("response"))
        guards = self.guards.get(tool, [])
        same = [
            g for g in guards if g.get("status") == status and error_code(g.get("answer")) == code
        ]
        fired = [g for g in same if g["_text"] == fired_when and fired_status == g.get("status")]
        guard = (fired or same or [None])[0]
        kind, source = refusal_kind(
            guard, code, status if isinstance(status, int) else None, self.creates
        )
        tally.kind_from[source] += 1
        if guard is not None and source != "mined guard":
            # the guard that explains it says another kind: worth a look at the miner
            tally.conflicts[(tool, code, kind, guard_kind(guard, self.creates))] += 1
        # the twin names its own ids: compare with the real answer's ids mapped
        expected = _swap_text(_swap(logged.get("response"), ids), ids)
        exact = agree and body == expected
        tally.refusals[kind] += 1
        tally.refusals_answered[kind] += agree
        tally.refusals_exact[kind] += exact
        if same:
            tally.violations[kind] += 1
            tally.violations_answered[kind] += agree
            tally.violations_exact[kind] += exact
        else:
            tally.unmined += 1

    def _ids(self, collection: str | None) -> set[Any]:
        state = self.env.state or {}
        records = state.get(collection) if collection else None
        key = key_of(state, collection) if collection else "id"  # a key of any name
        return {r.get(key) for r in records or [] if isinstance(r, dict)}

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


def _before(
    sessions: dict[str, list[dict[str, Any]]], name: str, replay: _Replay
) -> dict[str, dict[str, Any]]:
    """The objects the sessions that began before ``name`` showed, as they last showed
    them (collection -> key -> record)."""
    start = _began(sessions[name])
    known: dict[str, dict[str, Any]] = {}
    for other in sorted(sessions, key=lambda n: _began(sessions[n])):
        if other != name and _began(sessions[other]) < start:
            replay.known(sessions[other], known)
    return known


def _began(records: list[dict[str, Any]]) -> float:
    times = [r["time"] for r in records if isinstance(r.get("time"), int | float)]
    return min(times) if times else float("inf")


def evaluate(
    files: list[str],
    out_dir: str | Path,
    *,
    format: str = "auto",
    heldout: list[str] | None = None,
    holdout: float = 0.2,
    seed: int = 0,
    world_model: Any = "local",
    grounding: str = "strict",
    experience: bool = False,
    mask_key: str = "simgym",
    max_sessions: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    start_from_reads: bool = True,
    **backend: Any,
) -> dict[str, Any]:
    """Build a world in ``out_dir/world`` from the training sessions and replay the
    held-out ones through its twin; return the report (see the module doc), also written
    to ``out_dir/eval.json``. With ``heldout`` (log files of the same system), every
    session of ``files`` trains and those files' sessions are held out; else a
    ``holdout`` share of the sessions of ``files``, picked by ``seed``. Raises
    :class:`NotATwin` when the world has no bodies or no state.

    Args:
        on_progress: called with (sessions replayed, sessions to replay) once the
            held-out sessions are known and after each one (a command's progress bar).
        start_from_reads: a session also starts with the records it reads before it
            changes them (the system's data before the log began, as a snapshot would
            give it); False: only what earlier sessions showed, so such reads are the
            twin's to guess. The report says which.
    """
    from simgym.build import make  # the engine only when an evaluation runs

    if heldout is None and not 0 < holdout < 1:
        raise ValueError(f"holdout is a share between 0 and 1, not {holdout}")
    out = Path(out_dir)
    world_dir = out / "world"
    if world_dir.exists():
        shutil.rmtree(world_dir)
    report = ImportReport()
    held: list[LogRecord] = []

    def training() -> Iterable[LogRecord]:
        for record in read_logs(files, report, format=format):
            if heldout is None and held_out(record.session, holdout, seed):
                held.append(record)
            else:
                yield record

    manifest = build_world(training(), world_dir, report=report, mask_key=mask_key)
    setup: dict[str, Any] = {
        "files": files,
        "format": format,
        "heldout": heldout,
        "holdout": None if heldout else holdout,
        "seed": None if heldout else seed,
        "mask_key": "default" if mask_key == "simgym" else "given",
        "start_from_reads": start_from_reads,
    }
    problems = coverage_problems(world_dir)
    if problems:
        out.mkdir(parents=True, exist_ok=True)
        refused = {**setup, "twin": False, "problems": problems}
        (out / "eval.json").write_text(json.dumps(refused, indent=2, default=str) + "\n")
        raise NotATwin(
            "not a twin, so not evaluated: " + "; ".join(problems) + f" (world: {world_dir})"
        )
    if heldout is not None:
        held_report = ImportReport()
        held = list(read_logs(heldout, held_report, format=format))
        if not held:
            raise SimgymError(f"the held-out logs hold no records: {', '.join(heldout)}")
    sessions = _sessions(held, Masker(mask_key))
    names = sorted(sessions)[:max_sessions] if max_sessions else sorted(sessions)
    scenario = world_scenario(world_dir)
    longest = max((len(sessions[n]) for n in names), default=1)
    options: dict[str, Any] = {"grounding": grounding, "max_turns": longest + 1, **backend}
    store = world_dir / "experience.db"  # the training sessions' transitions only
    if experience and store.is_file():
        options["experience"] = open_store(store, readonly=True)
    env = make("mcp", world_model, scenario=scenario, **options).sync()
    tally = Tally()
    replay = _Replay(world_dir, env, tally, start_from_reads=start_from_reads)
    if heldout:
        replay.made_ids(sessions.values())
    try:
        if on_progress is not None:
            on_progress(0, len(names))
        for done, name in enumerate(names, 1):
            # a separate log is another run of the system, with its own data: each
            # session starts from what the sessions before it (in time) showed
            replay.session(sessions[name], _before(sessions, name, replay) if heldout else None)
            if on_progress is not None:
                on_progress(done, len(names))
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()
    result = {
        **setup,
        "twin": True,
        "world_model": world_model if isinstance(world_model, str) else type(world_model).__name__,
        "grounding": grounding,
        "experience": options.get("experience") is not None,
        "train": {
            "records": manifest["counts"]["records"],
            "sessions": manifest["counts"]["sessions"],
        },
        **tally.summary(),
    }
    (out / "eval.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result
