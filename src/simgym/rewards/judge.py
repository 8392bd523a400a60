"""A rubric judge: an LLM grades a finished episode against the task's rubric.

The judge sees the instruction, the rubric (``task.metadata["rubric"]``: a string or a
list of criteria), a transcript of the agent's actions and the observations they got
(each observation capped, the middle of a long episode left out to fit ``max_chars``),
and the final answer. It is asked for one JSON object with a 0-10 score per criterion and
overall. :func:`parse_verdict` reads that leniently (:mod:`simgym.rewards.answers`, or a
"score: N" line); an answer it cannot read is asked for again once, and a judge that
still fails, or cannot be reached, scores 0.0 with ``details["error"]``: a judge problem
never raises out of :meth:`RubricJudge.score`.

Any OpenAI-compatible server works; ``SIMGYM_JUDGE_BASE_URL``, ``SIMGYM_JUDGE_MODEL``
and ``SIMGYM_JUDGE_API_KEY`` (else ``OPENAI_API_KEY``) are the defaults.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from simgym.core.errors import SimgymError
from simgym.core.types import Trajectory, Turn
from simgym.rewards.answers import json_objects, read_number, scaled, strip_reasoning
from simgym.rewards.base import RewardResult
from simgym.worldmodels.chat import ChatClient, usage_of

SCALE = 10.0

SYSTEM_PROMPT = """You grade the work of an AI agent. You are given the task the agent \
was set, a rubric of criteria, a record of the episode (each action the agent took and \
what its environment showed in return) and the agent's final answer.

Score each criterion from 0 to 10: 0 when the episode does not meet it at all, 10 when it \
meets it fully, values in between for partial work. Judge only from the record: an action \
that failed did not happen, and a claim in the final answer that the record does not \
support earns no credit. Then give an overall score from 0 to 10.

Reply with a single JSON object and nothing else, with one entry in "criteria" per \
rubric criterion, in this form (replace each <...> with your own value):
{"criteria": [{"id": <criterion number>, "score": <0-10>, "reason": "<one short sentence>"}], \
"score": <0-10>, "reason": "<one or two sentences>"}"""

RETRY_PROMPT = """That reply could not be read. Answer again with only the JSON object \
{"criteria": [{"id": 1, "score": <0-10>, "reason": "..."}], "score": <0-10>, \
"reason": "..."} and no other text."""

DEFAULT_CRITERIA = ["The agent accomplished the task as instructed."]


class JudgeError(SimgymError):
    """The judge server failed or its verdict could not be read."""


# -- reading verdicts -------------------------------------------------------------------

_SCORE_LINE = re.compile(
    r"\bscore\b[\s*_\"']*(?:is|of|[:=])?[\s*_\"']*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?",
    re.IGNORECASE,
)


def _criteria_scores(value: Any) -> list[float]:
    items = value if isinstance(value, list) else []
    if isinstance(value, dict):  # {"1": 7, "2": {"score": 5}}
        items = list(value.values())
    scores = []
    for item in items:
        score = read_number(item, SCALE)
        if score is not None:
            scores.append(score)
    return scores


def _clamp(score: float) -> float:
    return min(max(score, 0.0), SCALE)


def parse_verdict(text: str, n_criteria: int = 1) -> dict[str, Any]:
    """Read a verdict: ``{"score", "criteria", "reason", "value"}`` with scores clamped to
    0-10 and ``value`` in [0, 1]. With several criteria their mean is the value when the
    judge scored every one (a model's own overall number is less reliable than its
    per-criterion marks); else the overall score. Raises ``ValueError`` when no score can
    be read."""
    body = strip_reasoning(text).strip()
    for obj in reversed(json_objects(body)):
        criteria = [_clamp(s) for s in _criteria_scores(obj.get("criteria"))]
        overall = read_number(obj.get("score"), SCALE)
        if n_criteria > 1 and len(criteria) == n_criteria:
            score = sum(criteria) / len(criteria)
        elif overall is not None:
            score = _clamp(overall)
        elif criteria:
            score = sum(criteria) / len(criteria)
        else:
            continue
        reason = obj.get("reason")
        return {
            "score": score,
            "criteria": criteria,
            "reason": reason if isinstance(reason, str) else None,
            "value": score / SCALE,
        }
    lines = _SCORE_LINE.findall(body)
    if lines:
        score = _clamp(scaled(*lines[-1], SCALE))
        return {"score": score, "criteria": [], "reason": None, "value": score / SCALE}
    raise ValueError("no JSON verdict with a score and no 'score: N' line")


# -- the episode as the judge reads it --------------------------------------------------


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def _turn_block(turn: Turn, observation_chars: int) -> str:
    action = turn.action_text or (turn.action.model_dump_json() if turn.action else "")
    lines = [f"### Step {turn.index}", f"Action: {_clip(action, observation_chars)}"]
    if turn.error:
        lines.append(f"Error: {turn.error}")
    lines.append(f"Observation:\n{_clip(turn.observation.text, observation_chars)}")
    return "\n".join(lines)


def render_episode(trajectory: Trajectory, max_chars: int, observation_chars: int) -> str:
    """The transcript: every action and observation, the final-answer turn excluded. When
    it is longer than ``max_chars``, the first step and as many of the last as fit stay
    (the end of an episode says most about its outcome)."""
    turns = [t for t in trajectory.turns if not t.observation.metadata.get("final_answer")]
    blocks = [_turn_block(t, observation_chars) for t in turns]
    if trajectory.initial_observation is not None:
        first = _clip(trajectory.initial_observation.text, observation_chars)
        blocks.insert(0, f"### Start\nObservation:\n{first}")
    if not blocks:
        return "(the agent took no actions)"
    if sum(len(b) + 2 for b in blocks) <= max_chars:
        return "\n\n".join(blocks)
    if len(blocks) == 1:
        return _clip(blocks[0], max_chars)
    head = _clip(blocks[0], max_chars // 4)
    budget = max_chars - len(head) - 80
    kept: list[str] = []
    for block in reversed(blocks[1:]):
        if len(block) + 2 > budget:
            if not kept:  # the last step matters most: keep part of it rather than none
                kept.append(_clip(block, max(budget - 60, 200)))
            break
        kept.insert(0, block)
        budget -= len(block) + 2
    left_out = len(blocks) - 1 - len(kept)
    return "\n\n".join([head, f"[... {left_out} step(s) left out ...]", *kept])


def rubric_criteria(rubric: Any) -> list[str]:
    """The criteria of a rubric: a string is one criterion, a list several."""
    if isinstance(rubric, str) and rubric.strip():
        return [rubric.strip()]
    if (
        isinstance(rubric, list)
        and rubric
        and all(isinstance(c, str) and c.strip() for c in rubric)
    ):
        return [c.strip() for c in rubric]
    raise ValueError("a rubric is a non-empty string or a list of non-empty strings")


# -- the judge base: one set-up, one retry loop -----------------------------------------

V = TypeVar("V")


@dataclass
class Reading(Generic[V]):
    """What a judge's tries came to.

    ``verdict`` is the parsed verdict (None when no try gave a readable one, ``error``
    then says why); ``raw`` is the last answer, ``raws`` every answer; ``attempts`` the
    tries made; ``call_failed`` whether the last try failed to get an answer at all (not
    to read it); ``usage`` the tokens of every try together; ``latency_s`` their time."""

    verdict: V | None = None
    raw: str | None = None
    raws: list[str] = field(default_factory=list)
    attempts: int = 0
    error: str | None = None
    call_failed: bool = False
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0}
    )
    latency_s: float = 0.0


class LLMJudge:
    """What every LLM judge shares (the rubric judge here, the safety judge, the bench
    judge): ask a conversation, read the verdict, and on an unreadable one ask again, up to
    ``attempts`` tries, in one loop (:meth:`read`). A subclass says how one try asks
    (:meth:`ask`) and may set how failures read and whether they are tried again."""

    attempts: int = 2
    # appended (after the unreadable answer) before asking again; None asks the same
    # conversation again
    retry_prompt: str | None = None
    # what a failed call raises; other exceptions are defects and propagate
    call_errors: tuple[type[BaseException], ...] = (SimgymError,)
    # a failed call is tried again (up to ``attempts``) rather than ending the reading
    retry_failed_calls: bool = False

    async def ask(self, messages: list[dict[str, str]]) -> tuple[str, dict[str, int], float]:
        """One try: ``(answer text, token usage, seconds)``."""
        raise NotImplementedError

    def call_error(self, exc: BaseException) -> str:
        """How a failed call reads in a verdict's ``error``."""
        return str(exc)

    def unreadable(self, exc: ValueError) -> str:
        """How an unreadable answer reads in a verdict's ``error``."""
        return f"unreadable verdict: {exc}"

    async def read(self, messages: list[dict[str, str]], parse: Callable[[str], V]) -> Reading[V]:
        """Ask until ``parse`` reads an answer (it raises ValueError when it cannot).

        Args:
            messages: the judge's conversation.
            parse: reads one answer into a verdict.

        Returns:
            The reading: the verdict, or the error when no try gave one.
        """
        reading: Reading[V] = Reading()
        for attempt in range(1, max(1, self.attempts) + 1):
            reading.attempts = attempt
            try:
                raw, usage, seconds = await self.ask(messages)
            except self.call_errors as exc:
                reading.error, reading.call_failed = self.call_error(exc), True
                if self.retry_failed_calls:
                    continue
                break
            reading.call_failed = False
            reading.raw = raw
            reading.raws.append(raw)
            reading.latency_s += seconds
            for key in reading.usage:
                reading.usage[key] += int(usage.get(key, 0))
            try:
                reading.verdict = parse(raw)
            except ValueError as exc:
                reading.error = self.unreadable(exc)
                if self.retry_prompt is not None:
                    messages = [
                        *messages,
                        {"role": "assistant", "content": raw},
                        {"role": "user", "content": self.retry_prompt},
                    ]
                continue
            reading.error = None
            break
        return reading


class ChatJudge(LLMJudge):
    """An LLM judge over an OpenAI-compatible server: the one ``ChatClient`` set-up
    (``SIMGYM_JUDGE_BASE_URL``, ``SIMGYM_JUDGE_MODEL``, ``SIMGYM_JUDGE_API_KEY``) and the
    one request of every chat judge."""

    def __init__(
        self,
        base_url: str | None,
        model: str | None,
        api_key: str | None,
        *,
        missing: str,
        label: str,
        error: type[SimgymError],
        temperature: float,
        max_tokens: int,
        attempts: int,
        json_mode: bool,
        timeout: float,
        max_retries: int,
        max_concurrency: int,
    ) -> None:
        """Args:
        base_url, model, api_key: the server (else the ``SIMGYM_JUDGE_`` variables).
        missing: the error when no server is named.
        label: the judge's name in the client's errors.
        error: the error a failed call raises.
        temperature, max_tokens, json_mode: the request's settings.
        attempts: tries per verdict (at least 1).
        timeout, max_retries, max_concurrency: the client's transport settings.
        """
        if attempts < 1:
            raise SimgymError("judge attempts must be at least 1")
        self.chat = ChatClient.from_env(
            "SIMGYM_JUDGE_",
            base_url,
            model,
            api_key,
            missing=missing,
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            error=error,
            label=label,
        )
        self.call_errors = (error,)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.attempts = attempts
        self.json_mode = json_mode

    async def ask(self, messages: list[dict[str, str]]) -> tuple[str, dict[str, int], float]:
        params: dict[str, Any] = {
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.json_mode:
            params["response_format"] = {"type": "json_object"}
        started = time.perf_counter()
        response, _ = await self.chat.complete(params)
        usage = usage_of(response)
        text = response.choices[0].message.content or ""
        tokens = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
        }
        return text, tokens, time.perf_counter() - started

    async def aclose(self) -> None:
        await self.chat.aclose()


# -- the judge --------------------------------------------------------------------------


class RubricJudge(ChatJudge):
    """Scores episodes with an LLM against ``rubric=`` or ``task.metadata["rubric"]``.

    With no rubric anywhere the judge asks whether the task was accomplished (and, when
    ``metadata["answer"]`` exists, whether the final answer agrees with it), and says so
    in the details. ``attempts`` counts verdict reads (2: one retry); transport retries
    are the chat client's (``max_retries``)."""

    name = "judge"
    retry_prompt = RETRY_PROMPT

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        rubric: str | Sequence[str] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        max_chars: int = 12000,
        observation_chars: int = 2000,
        attempts: int = 2,
        json_mode: bool = False,
        system_prompt: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        max_concurrency: int = 16,
        name: str | None = None,
    ) -> None:
        super().__init__(
            base_url,
            model,
            api_key,
            missing="the judge reward needs a model server: pass base_url= or set "
            "SIMGYM_JUDGE_BASE_URL",
            label="judge",
            error=JudgeError,
            temperature=temperature,
            max_tokens=max_tokens,
            attempts=attempts,
            json_mode=json_mode,
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
        )
        self.rubric = None if rubric is None else _rubric_or_error(rubric)
        self.max_chars = max_chars
        self.observation_chars = observation_chars
        self.system_prompt = system_prompt or SYSTEM_PROMPT
        if name is not None:
            self.name = name

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base_url": self.chat.base_url,
            "model": self.chat.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    def criteria_for(self, trajectory: Trajectory) -> tuple[list[str], str]:
        """The criteria to grade by and where they came from (option, task, default)."""
        if self.rubric is not None:
            return self.rubric, "option"
        meta = trajectory.task.metadata
        if meta.get("rubric") is not None:
            return rubric_criteria(meta["rubric"]), "task"
        criteria = list(DEFAULT_CRITERIA)
        if meta.get("answer") is not None:
            answer = meta["answer"]
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            criteria.append(f"The final answer agrees with the reference answer: {text}")
        return criteria, "default"

    def messages(self, trajectory: Trajectory, criteria: list[str]) -> list[dict[str, str]]:
        rubric = "\n".join(f"{i}. {c}" for i, c in enumerate(criteria, 1))
        answer = trajectory.answer if trajectory.answer is not None else "(no final answer)"
        user = (
            f"## Task\n{trajectory.task.instruction or '(no instruction)'}\n\n"
            f"## Rubric\n{rubric}\n\n"
            f"## Episode ({trajectory.domain})\n"
            f"{render_episode(trajectory, self.max_chars, self.observation_chars)}\n\n"
            f"## Final answer\n{_clip(answer, self.observation_chars)}\n\n"
            "Grade the episode now. Reply with the JSON object only."
        )
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": user},
        ]

    async def score(self, trajectory: Trajectory) -> RewardResult:
        try:
            criteria, source = self.criteria_for(trajectory)
        except ValueError as exc:
            return self._failed(f"bad metadata 'rubric': {exc}", {})
        messages = self.messages(trajectory, criteria)
        details: dict[str, Any] = {"rubric": criteria, "rubric_source": source, "raw": None}
        reading = await self.read(messages, lambda raw: parse_verdict(raw, len(criteria)))
        details["attempts"] = reading.attempts
        if reading.raws:
            details.update(raw=reading.raw, model=self.chat.model, usage=reading.usage)
        if reading.verdict is None:
            error = reading.error or "no verdict"
            if not reading.call_failed:
                error = f"{error} after {reading.attempts} attempt(s)"
            return self._failed(error, {**details, "raws": reading.raws})
        details.update(reading.verdict)
        if len(reading.raws) > 1:
            details["raws"] = reading.raws
        value = reading.verdict["value"]
        return RewardResult(value=value, parts={self.name: value}, details=details)

    def _failed(self, error: str, details: dict[str, Any]) -> RewardResult:
        return RewardResult(value=0.0, parts={self.name: 0.0}, details={**details, "error": error})


def _rubric_or_error(rubric: Any) -> list[str]:
    try:
        return rubric_criteria(list(rubric) if isinstance(rubric, tuple) else rubric)
    except ValueError as exc:
        raise SimgymError(f"judge rubric: {exc}") from None
