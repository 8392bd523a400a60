"""Tokens per second of the embedded world model on this machine, with and without a LoRA
adapter, measured side by side in one run.

    .venv/bin/python benchmarks/local_speed.py [--adapter FILE] [--threads N] [--repeats 3]

For each setting: prompt processing (a ~1,500-token world-model prompt, evaluated from an
empty cache) and greedy decoding (128 new tokens), in tokens per second, median of the
repeats. The adapter defaults to the one the local backend uses by default.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from rich.console import Console
from rich.table import Table

from simgym.worldmodels.local import SHIPPED_ADAPTER, embedded_model_path

PROMPT = (
    "<|im_start|>system\nYou are the world model of a Linux terminal. Show exactly what the "
    "screen displays after each command.\n"
    + "".join(f"- file /home/user/notes/day{i}.txt: meeting at {i % 12 + 1}\n" for i in range(120))
    + "<|im_end|>\n<|im_start|>user\n### Turn 1\n**Action:**\nls -la /home/user/notes\n"
    "<|im_end|>\n<|im_start|>assistant\n**Environment Observation:**\n<predicted_observation>\n"
)


def measure(llm, repeats: int, new_tokens: int) -> tuple[float, float, int]:
    tokens = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
    prompt_rates, decode_rates = [], []
    for _ in range(repeats):
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        prompt_rates.append(len(tokens) / (time.perf_counter() - start))
        start = time.perf_counter()
        made = 0
        for _token in llm.generate([], top_k=1, temp=0.0, reset=False):
            made += 1
            if made >= new_tokens:
                break
        decode_rates.append(made / (time.perf_counter() - start))
    return statistics.median(prompt_rates), statistics.median(decode_rates), len(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=str(SHIPPED_ADAPTER))
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()

    from llama_cpp import Llama

    model = str(embedded_model_path())
    settings = {"base": None}
    if args.adapter and os.path.isfile(args.adapter):
        settings["base + adapter"] = args.adapter
    table = Table(
        "model", "prompt tokens", "prompt tok/s", "decode tok/s", title=f"{args.threads} threads"
    )
    for name, adapter in settings.items():
        llm = Llama(
            model_path=model, n_ctx=4096, n_threads=args.threads, lora_path=adapter, verbose=False
        )
        prompt_rate, decode_rate, count = measure(llm, args.repeats, args.new_tokens)
        table.add_row(name, str(count), f"{prompt_rate:.0f}", f"{decode_rate:.1f}")
        llm.close()
    Console().print(table)


if __name__ == "__main__":
    main()
