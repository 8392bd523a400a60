"""``bench judge``: an LLM judge grades each prediction against the real observation.

The judge is any world-model backend used as a plain chat model (``openai`` for any
OpenAI-compatible endpoint, or ``local``). Its system prompt is ``prompts/judge.md``
filled with the domain family's part (``prompts/judge_<family>.md``: tool, search,
shell, gui, generic); the user message holds the earlier turns, the action, the real
and the simulated observation. The judge answers with a JSON object of five 1-5 scores;
:func:`parse_judge_output` reads it leniently, and an answer that cannot be read is
asked again (``attempts``). A row whose judge never produced a readable answer is written
with ``judge.status = "failed"``; a row with no prediction to grade (inference failed,
or the model answered nothing) with ``"skipped"``. Scoring counts both as failures.

The output row is the prediction row plus ``judge`` (status, error, scores, total,
strengths, weaknesses, raw answer, attempts, judge model and settings, prompt family
and hash) and the reference script's flat fields (``format`` ... ``quality``,
``total_score``, ``failed``), so its own ``score`` step can read our files too.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgym.bench.data import clean_observation, row_from_record
from simgym.bench.pool import RunSummary, now, run_pool, with_retries
from simgym.bench.store import RowWriter, prepare_resume
from simgym.core.domain import family_of as domain_family
from simgym.core.worldmodel import WorldModel
from simgym.rewards.answers import json_objects, read_number, strip_reasoning
from simgym.rewards.judge import LLMJudge

DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")
SCALE = 5.0  # each dimension is graded 1-5
PROMPTS = Path(__file__).parent / "prompts"
OFFICIAL_ATTEMPTS = 3

OnResult = Callable[[dict[str, Any]], None]


# -- prompts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgePrompt:
    family: str
    system: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.system.encode()).hexdigest()[:16]


def family_of(domain: str) -> str:
    """The judge rubric's family for ``domain``: the domain's own :attr:`Domain.family`,
    ``"generic"`` for a domain with none (or one not installed here)."""
    return domain_family(domain) or "generic"


def load_prompt(domain: str, prompts_dir: str | os.PathLike[str] | None = None) -> JudgePrompt:
    """The judge's system prompt for ``domain``. A ``prompts_dir`` may hold
    ``judge.md`` and ``judge_<domain>.md`` or ``judge_<family>.md`` to replace ours, or
    be laid out like the Qwen-AgentWorld repository's ``prompts/`` folder
    (``<domain>/judge_system_prompt.txt``), whose file is then used as it is."""
    family = family_of(domain)
    if prompts_dir:
        whole = Path(prompts_dir) / domain / "judge_system_prompt.txt"
        if whole.is_file():
            return JudgePrompt(f"{domain} (from {prompts_dir})", whole.read_text("utf-8").strip())
    folders = [Path(prompts_dir)] if prompts_dir else []
    folders.append(PROMPTS)

    def find(*names: str) -> Path:
        for folder in folders:
            for name in names:
                if (folder / name).is_file():
                    return folder / name
        raise FileNotFoundError(f"no judge prompt among {names}")

    frame = find("judge.md").read_text(encoding="utf-8")
    part = find(f"judge_{domain}.md", f"judge_{family}.md").read_text(encoding="utf-8")
    slots = {"environment": "the environment", "name": "the environment"}
    lines = part.strip("\n").split("\n")
    while lines and re.match(r"^(environment|name):", lines[0]):
        key, _, value = lines.pop(0).partition(":")
        slots[key] = value.strip()
    slots["criteria"] = "\n".join(lines).strip()
    return JudgePrompt(family, string.Template(frame).safe_substitute(slots).strip())


def fence(text: str) -> str:
    """``text`` in a code fence longer than any run of backticks inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{text}\n{ticks}"


def judge_messages(
    row: dict[str, Any], prompt: JudgePrompt, *, context_turns: int | None = None
) -> list[dict[str, str]]:
    """The judge's request for one prediction row."""
    sample = row_from_record(row)
    earlier = min(sample.turn_idx - 1, len(sample.prompt), len(sample.response))
    first = 0 if context_turns is None else max(0, earlier - context_turns)
    parts = []
    if earlier:
        history = []
        if first:
            history.append(f"({first} earlier turns left out)")
        for i in range(first, earlier):
            history.append(
                f"{sample.prompt[i].strip()}\n\nReal observation:\n"
                f"{fence(clean_observation(sample.response[i]))}"
            )
        parts.append("## Earlier turns\n\n" + "\n\n".join(history))
    else:
        parts.append("## Earlier turns\n\nNone: this is the first turn.")
    parts.append(f"## The action to simulate\n\n{sample.current_prompt.strip()}")
    parts.append(f"## Real observation\n\n{fence(clean_observation(sample.reference))}")
    parts.append(f"## Simulated observation\n\n{fence(row.get('observation') or '')}")
    parts.append("Grade the simulated observation. Answer with the JSON object only.")
    return [
        {"role": "system", "content": prompt.system},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


# -- parsing ----------------------------------------------------------------------------


@dataclass
class JudgeVerdict:
    """A judge answer read into scores, or the reason it could not be."""

    scores: dict[str, float] = field(default_factory=dict)
    strengths: list[str] = field(default_factory=list)
    weaknesses: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def total(self) -> float | None:
        return sum(self.scores.values()) / len(self.scores) if self.ok else None


_LOOSE = r'["\']?{dim}(?:[ _-]?score)?["\']?\s*[:=]\s*["\']?([0-9]+(?:\.[0-9]+)?)'


def parse_judge_output(raw: str) -> JudgeVerdict:
    """Read five 1-5 scores from a judge's answer.

    Reasoning is dropped and JSON found as :mod:`simgym.rewards.answers` does, accepting
    keys such as ``Format``, ``format_score`` or a nested ``scores`` object, and numbers
    written as strings (``"4"``, ``"4/5"``). As a last resort ``format: 4``-style pairs
    are read from the text. All five dimensions must be present and within 1-5.
    """
    text = strip_reasoning(raw)
    if not text.strip():
        return JudgeVerdict(error="the judge answered nothing")
    problems: list[str] = []
    for value in json_objects(text):
        verdict = _from_object(value)
        if verdict.ok:
            return verdict
        problems.append(verdict.error or "")
    loose = _from_text(text)
    if loose.ok:
        return loose
    reason = problems[0] if problems else "no JSON object with the five scores"
    return JudgeVerdict(error=f"unreadable judge answer: {reason}")


def _dimension(key: str) -> str | None:
    word = re.sub(r"[^a-z]", "", str(key).lower())
    word = word.removesuffix("score")
    return word if word in DIMENSIONS else None


def _from_object(value: dict[str, Any]) -> JudgeVerdict:
    scores: dict[str, float] = {}
    sources = [value] + [
        v for k, v in value.items() if isinstance(v, dict) and _dimension(k) is None
    ]
    for source in sources:
        for key, raw in source.items():
            dim = _dimension(key)
            if dim and dim not in scores:
                number = read_number(raw, SCALE)
                if number is not None:
                    scores[dim] = number
    verdict = _checked(scores)
    if verdict.ok:
        verdict.strengths = _strings(value.get("strengths"))
        verdict.weaknesses = _strings(value.get("weaknesses"))
    return verdict


def _from_text(text: str) -> JudgeVerdict:
    scores = {}
    for dim in DIMENSIONS:
        match = re.search(_LOOSE.format(dim=dim), text, re.IGNORECASE)
        if match:
            scores[dim] = float(match.group(1))
    return _checked(scores)


def _checked(scores: dict[str, float]) -> JudgeVerdict:
    missing = [d for d in DIMENSIONS if d not in scores]
    if missing:
        return JudgeVerdict(error=f"missing {', '.join(missing)}")
    outside = [f"{d}={scores[d]:g}" for d in DIMENSIONS if not 1 <= scores[d] <= 5]
    if outside:
        return JudgeVerdict(error=f"scores outside 1-5: {', '.join(outside)}")
    return JudgeVerdict(scores={d: scores[d] for d in DIMENSIONS})


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value][:20]
    return []


# -- running ----------------------------------------------------------------------------


def judge_status(row: dict[str, Any]) -> str | None:
    judge = row.get("judge")
    return judge.get("status") if isinstance(judge, dict) else None


def plan_judge(
    predictions: list[dict[str, Any]],
    out: str | os.PathLike[str],
    *,
    retry_failed: bool = True,
    restart: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(predictions still to judge, judged rows kept)``. A judged row is kept when it
    grades the same prediction (``pred_id``) and did not fail (unless ``retry_failed``
    is off)."""
    if restart:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("", encoding="utf-8")
    current = {p["key"]: p.get("pred_id") for p in predictions}

    def keep(row: dict[str, Any]) -> bool:
        if row.get("key") in current and row.get("pred_id") != current[row["key"]]:
            return False  # the prediction was redone since: grade the new one
        status = judge_status(row)
        return status in ("ok", "skipped") or (not retry_failed and status == "failed")

    finished = prepare_resume(out, keep)
    return [p for p in predictions if p["key"] not in finished], finished


def judged_row(
    prediction: dict[str, Any],
    *,
    status: str,
    verdict: JudgeVerdict | None,
    error: str | None,
    raw: str,
    attempts: int,
    settings: dict[str, Any],
    prompt: JudgePrompt | None,
    latency_s: float,
    usage: dict[str, int],
) -> dict[str, Any]:
    ok = status == "ok" and verdict is not None
    judge = {
        "status": status,
        "error": error,
        "scores": verdict.scores if ok else None,
        "total": round(verdict.total, 4) if ok and verdict.total is not None else None,
        "strengths": verdict.strengths if ok else [],
        "weaknesses": verdict.weaknesses if ok else [],
        "raw": raw,
        "attempts": attempts,
        "latency_s": round(latency_s, 4),
        "usage": usage,
        "family": prompt.family if prompt else None,
        "prompt_sha256": prompt.sha256 if prompt else None,
        **settings,
        "finished_at": now(),
    }
    flat: dict[str, Any] = {d: (verdict.scores[d] if ok else 0) for d in DIMENSIONS}
    flat["total_score"] = judge["total"] if ok else 0
    flat["failed"] = 0.0 if ok else 1.0
    return {**prediction, "judge": judge, **flat}


async def judge_rows(
    predictions: list[dict[str, Any]],
    judge: WorldModel,
    writer: RowWriter,
    *,
    concurrency: int = 16,
    attempts: int = OFFICIAL_ATTEMPTS,
    max_tokens: int | None = None,
    temperature: float | None = None,
    retries: int = 2,
    backoff_s: float = 1.0,
    context_turns: int | None = None,
    prompts_dir: str | os.PathLike[str] | None = None,
    on_result: OnResult | None = None,
) -> RunSummary:
    """Grade each prediction; every row gets a judged row, failures included."""
    summary = RunSummary(selected=len(predictions))

    def settings() -> dict[str, Any]:
        return {
            "model": judge.describe(),  # per row: the served model's name is learnt late
            "max_tokens": max_tokens,
            "temperature": temperature,
            "attempts_allowed": attempts,
            "context_turns": context_turns,
        }

    prompts: dict[str, JudgePrompt] = {}
    asker = _BackendJudge(judge, attempts, max_tokens, temperature, retries, backoff_s)

    async def grade(prediction: dict[str, Any]) -> dict[str, Any]:
        if prediction.get("status") != "ok":
            reason = f"inference failed: {prediction.get('error') or 'unknown error'}"
            return _unjudged(prediction, "skipped", reason, settings())
        if not (prediction.get("observation") or "").strip():
            return _unjudged(prediction, "skipped", "the world model answered nothing", settings())
        domain = prediction.get("domain") or ""
        if domain not in prompts:
            prompts[domain] = load_prompt(domain, prompts_dir)
        prompt = prompts[domain]
        messages = judge_messages(prediction, prompt, context_turns=context_turns)
        reading = await asker.read(messages, _readable)
        return judged_row(
            prediction,
            status="ok" if reading.verdict is not None else "failed",
            verdict=reading.verdict,
            error=reading.error,
            raw=reading.raw or "",
            attempts=reading.attempts,
            settings=settings(),
            prompt=prompt,
            latency_s=reading.latency_s,
            usage=reading.usage,
        )

    async def work(prediction: dict[str, Any]) -> dict[str, Any]:
        try:
            return await grade(prediction)
        except Exception as exc:  # a bug or bad row: record it, keep going
            return _unjudged(prediction, "failed", f"{type(exc).__name__}: {exc}", settings())

    def finish(row: dict[str, Any]) -> None:
        writer.write(row)
        summary.written += 1
        if row["judge"]["status"] != "ok":
            summary.failed += 1
            summary.note_error(row["judge"]["error"] or "")
        if on_result is not None:
            on_result(row)

    start = time.perf_counter()
    try:
        await run_pool(predictions, work, finish, concurrency=concurrency)
    finally:
        summary.seconds = time.perf_counter() - start
    return summary


class _BackendJudge(LLMJudge):
    """The bench judge on the shared retry loop: a world-model backend asked as a chat
    model (transient errors retried with backoff inside a try), a failed try tried again,
    an unreadable answer asked again unchanged (as the reference scoring does)."""

    call_errors = (Exception,)  # the judge is down or refuses: try again, then fail
    retry_failed_calls = True

    def __init__(
        self,
        backend: WorldModel,
        attempts: int,
        max_tokens: int | None,
        temperature: float | None,
        retries: int,
        backoff_s: float,
    ) -> None:
        self.backend = backend
        self.attempts = max(1, attempts)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retries = retries
        self.backoff_s = backoff_s

    async def ask(self, messages: list[dict[str, str]]) -> tuple[str, dict[str, int], float]:
        answer, _ = await with_retries(
            lambda: self.backend.predict(
                messages, max_tokens=self.max_tokens, temperature=self.temperature
            ),
            retries=self.retries,
            backoff_s=self.backoff_s,
        )
        usage = {
            "prompt_tokens": answer.usage.prompt_tokens,
            "completion_tokens": answer.usage.completion_tokens,
        }
        return answer.raw, usage, answer.latency_s

    def call_error(self, exc: BaseException) -> str:
        return f"{type(exc).__name__}: {exc}"

    def unreadable(self, exc: ValueError) -> str:
        return str(exc)


def _readable(raw: str) -> JudgeVerdict:
    """The answer's verdict; ValueError (asked again) when it cannot be read."""
    verdict = parse_judge_output(raw)
    if not verdict.ok:
        raise ValueError(verdict.error)
    return verdict


def _unjudged(
    prediction: dict[str, Any], status: str, reason: str, settings: dict[str, Any]
) -> dict[str, Any]:
    return judged_row(
        prediction,
        status=status,
        verdict=None,
        error=reason,
        raw="",
        attempts=0,
        settings=settings,
        prompt=None,
        latency_s=0.0,
        usage={"prompt_tokens": 0, "completion_tokens": 0},
    )


async def run_judge(
    predictions: list[dict[str, Any]],
    judge: WorldModel,
    out: str | os.PathLike[str],
    *,
    retry_failed: bool = True,
    restart: bool = False,
    fsync: bool = False,
    on_start: Callable[[int], None] | None = None,
    **options: Any,
) -> RunSummary:
    """Resume or start ``out``, then grade every prediction not finished there.
    ``on_start`` gets the number of rows left; ``options`` are those of
    :func:`judge_rows`."""
    todo, _ = plan_judge(predictions, out, retry_failed=retry_failed, restart=restart)
    if on_start is not None:
        on_start(len(todo))
    with RowWriter(out, fsync=fsync) as writer:
        summary = await judge_rows(todo, judge, writer, **options)
    summary.selected = len(predictions)
    summary.skipped = len(predictions) - len(todo)
    return summary
