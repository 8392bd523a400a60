"""Does a GGUF export behave like the model it came from? Greedy decoding in transformers
and in llama.cpp (llama-cpp-python) from the same prompt tokens, compared token by token.

Both sides start from identical token ids (the chat template applied by the transformers
tokenizer), so a difference is the weights' or the runtime's, not the tokenizer's; that
llama.cpp tokenizes the prompt text to the same ids is checked separately.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgym.train.errors import TrainError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Messages = list[dict[str, str]]

# Three short world-model prompts in the message contract, one per kind of observation.
CHECK_PROMPTS: list[Messages] = [
    [
        {"role": "system", "content": "You simulate a Linux terminal. Show the screen."},
        {"role": "user", "content": "### Turn 1\n**Action:**\n```\nls -la /home/user\n```"},
    ],
    [
        {"role": "system", "content": "You simulate an MCP server's tools. Answer with JSON."},
        {
            "role": "user",
            "content": '### Turn 1\n**Action:**\n{"name": "list_files", "arguments": {}}',
        },
    ],
    [
        {"role": "system", "content": "You simulate a web search engine."},
        {
            "role": "user",
            "content": '### Turn 1\n**Action:**\nweb_search {"queries": ["python asyncio"]}',
        },
    ],
]


@dataclass(frozen=True)
class GreedyMatch:
    """One prompt's greedy continuation on both runtimes."""

    prompt_tokens: int
    hf_tokens: list[int]
    llama_tokens: list[int]
    same_prompt_tokenization: bool
    hf_text: str
    llama_text: str

    @property
    def same(self) -> bool:
        return self.hf_tokens == self.llama_tokens

    @property
    def first_difference(self) -> int | None:
        pairs = zip(self.hf_tokens, self.llama_tokens, strict=False)
        index = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
        if index is None and len(self.hf_tokens) != len(self.llama_tokens):
            return min(len(self.hf_tokens), len(self.llama_tokens))
        return index


def prompt_ids(tokenizer: PreTrainedTokenizerBase, messages: Messages) -> list[int]:
    """The token ids of a chat prompt, ready for the assistant's answer."""
    encoded = tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, return_dict=True
    )
    return list(encoded["input_ids"])


def greedy_hf(
    model: PreTrainedModel, ids: list[int], max_new_tokens: int, eos: int | None
) -> list[int]:
    """Greedy continuation by transformers (up to and including the end token)."""
    import torch

    model.eval()
    with torch.no_grad():
        output = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos,
        )
    new = output[0, len(ids) :].tolist()
    return new[: new.index(eos) + 1] if eos in new else new


def greedy_llama(llm: Any, ids: list[int], max_new_tokens: int, eos: int | None) -> list[int]:
    """Greedy continuation by llama.cpp (up to and including the end token)."""
    llm.reset()
    new: list[int] = []
    for token in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
        new.append(int(token))
        if token == eos or len(new) >= max_new_tokens:
            break
    return new


def compare_greedy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    gguf_path: str | os.PathLike[str],
    prompts: list[Messages] | None = None,
    *,
    max_new_tokens: int = 24,
    n_threads: int | None = None,
    lora_path: str | os.PathLike[str] | None = None,
) -> list[GreedyMatch]:
    """Greedy-decode each prompt with ``model`` and with the GGUF file (with the GGUF
    adapter ``lora_path`` applied, if given), and compare."""
    try:
        from llama_cpp import Llama
    except ImportError:
        hint = "pip install 'simgym[local]'"
        raise TrainError(f"llama-cpp-python is not installed ({hint})") from None

    eos = tokenizer.eos_token_id
    llm = Llama(
        model_path=str(Path(gguf_path)),
        n_ctx=2048,
        n_threads=n_threads or min(os.cpu_count() or 2, 4),
        lora_path=str(lora_path) if lora_path else None,
        verbose=False,
    )
    try:
        results = []
        for messages in prompts or CHECK_PROMPTS:
            ids = prompt_ids(tokenizer, messages)
            text = tokenizer.decode(ids)
            own = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
            hf = greedy_hf(model, ids, max_new_tokens, eos)
            cpp = greedy_llama(llm, ids, max_new_tokens, eos)
            results.append(
                GreedyMatch(
                    prompt_tokens=len(ids),
                    hf_tokens=hf,
                    llama_tokens=cpp,
                    same_prompt_tokenization=list(own) == ids,
                    hf_text=tokenizer.decode(hf),
                    llama_text=tokenizer.decode(cpp),
                )
            )
        return results
    finally:
        llm.close()
