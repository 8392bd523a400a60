"""Train a policy with TRL's GRPO against simulated environments.

By default everything runs offline on a CPU: the world model is simgym's embedded default
(SmolLM2-135M in llama.cpp), and the policy is a tiny randomly initialised Qwen2-style model
that reuses SmolLM2's tokenizer (read from the same GGUF file). Such a policy knows nothing,
so it is first taught the tool-call format on a few demonstrations played in the simulated
world (``--warm-start-steps``); GRPO then runs for ``--steps`` steps. It checks the plumbing,
not the learning. See README.md for the same script at scale (vLLM, Qwen-AgentWorld, a real
policy).

    python examples/grpo_trl/train.py --steps 3
    python examples/grpo_trl/train.py --model Qwen/Qwen3-0.6B --world-model openai \\
        --base-url http://127.0.0.1:8000/v1 --wm-model agentworld --steps 200
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is "experimental"

# Customer-records tasks on the mcp domain's default scenario, each with a demonstration
# (tool calls, then the final answer) for the warm start. Rewards: exact match on "answer".
TASKS: list[tuple[dict[str, Any], list[Any]]] = [
    (
        {
            "id": "tier-c1001",
            "instruction": "Which tier is customer C-1001 in? Answer with the tier only.",
            "metadata": {"answer": "gold"},
        },
        [{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}, "gold"],
    ),
    (
        {
            "id": "tier-c1002",
            "instruction": "Which tier is customer C-1002 in? Answer with the tier only.",
            "metadata": {"answer": "basic"},
        },
        [{"name": "get_customer", "arguments": {"customer_id": "C-1002"}}, "basic"],
    ),
    (
        {
            "id": "email-c1002",
            "instruction": "What is the email address of customer C-1002?",
            "metadata": {"answer": "ben@example.org"},
        },
        [{"name": "get_customer", "arguments": {"customer_id": "C-1002"}}, "ben@example.org"],
    ),
    (
        {
            "id": "id-ana-lima",
            "instruction": "What is Ana Lima's customer id?",
            "metadata": {"answer": "C-1001"},
        },
        [{"name": "search_customers", "arguments": {"query": "Ana Lima"}}, "C-1001"],
    ),
]


# -- the offline tokenizer and the tiny policy ------------------------------------------

_GGUF_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    """The key/value header of a GGUF file (the format's documented layout: magic,
    version, tensor count, key/value count, then typed key/value pairs). Tensors are not
    read. Enough to rebuild the tokenizer without the ``gguf`` package."""

    def take(f: BinaryIO, fmt: str) -> Any:
        size = struct.calcsize("<" + fmt)
        data = f.read(size)
        if len(data) != size:
            raise ValueError(f"{path}: truncated GGUF header")
        return struct.unpack("<" + fmt, data)[0]

    def text(f: BinaryIO) -> str:
        return f.read(take(f, "Q")).decode("utf-8", errors="replace")

    def value(f: BinaryIO, kind: int) -> Any:
        if kind == 8:
            return text(f)
        if kind == 9:
            item_kind, count = take(f, "I"), take(f, "Q")
            return [value(f, item_kind) for _ in range(count)]
        if kind not in _GGUF_SCALARS:
            raise ValueError(f"{path}: unknown GGUF value type {kind}")
        return take(f, _GGUF_SCALARS[kind])

    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version = take(f, "I")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        take(f, "Q")  # tensor count
        pairs = take(f, "Q")
        meta = {}
        for _ in range(pairs):
            key = text(f)
            meta[key] = value(f, take(f, "I"))
        return meta


def embedded_tokenizer(gguf_path: str | Path | None = None) -> Any:
    """SmolLM2's byte-level BPE tokenizer, rebuilt from the embedded GGUF's vocabulary and
    merges, with TRL's Qwen2.5 chat template: it renders tool calls, TRL knows how to parse
    them, and SmolLM2's vocabulary has its ``<|im_start|>``/``<|im_end|>`` tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    if gguf_path is None:
        from simgym.worldmodels.local import INSTALL_HINT, embedded_model_path

        gguf_path = embedded_model_path()
        if gguf_path is None:
            raise SystemExit(f"the embedded model is not installed; {INSTALL_HINT}")
    meta = read_gguf_metadata(gguf_path)
    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise SystemExit(f"{gguf_path}: only byte-level BPE (gpt2-style) tokenizers are rebuilt")
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    bpe = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    control = [
        t for t, kind in zip(tokens, meta["tokenizer.ggml.token_type"], strict=True) if kind == 3
    ]
    bpe.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        chat_template=qwen2_5_chat_template,
        padding_side="left",
    )


def tiny_policy(tokenizer: Any, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Any:
    """A randomly initialised Qwen2-style causal LM over the tokenizer's vocabulary."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen2ForCausalLM(config)


# -- the warm start -----------------------------------------------------------------------


def encode_conversation(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[Any]
) -> tuple[list[int], list[int]]:
    """Token ids of a chat rendered as the trainer renders it, and a mask marking the
    assistant's tokens (the ones the policy writes)."""
    ids: list[int] = []
    mask: list[int] = []
    rendered = ""
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = tokenizer.apply_chat_template(
            messages[:i], tools=tools, add_generation_prompt=True, tokenize=False
        )
        after = tokenizer.apply_chat_template(messages[: i + 1], tools=tools, tokenize=False)
        if not before.startswith(rendered) or not after.startswith(before):
            raise ValueError("the chat template does not render conversations prefix by prefix")
        context = tokenizer(before[len(rendered) :], add_special_tokens=False)["input_ids"]
        reply = tokenizer(after[len(before) :], add_special_tokens=False)["input_ids"]
        ids += context + reply
        mask += [0] * len(context) + [1] * len(reply)
        rendered = after
    return ids, mask


def warm_start(
    model: Any,
    tokenizer: Any,
    conversations: list[tuple[list[dict[str, Any]], list[Any]]],
    *,
    steps: int,
    learning_rate: float = 1e-2,
    negatives: int = 1024,
) -> float:
    """Supervised steps on demonstration conversations (``(messages, tools)`` pairs),
    loss on the assistant's tokens only; returns the last mean loss.

    The softmax runs over the tokens the demonstrations use plus ``negatives`` random
    others drawn afresh each step (a sampled softmax): the full 49k-token projection is
    most of the cost on a CPU, and the random draws still push unused tokens down.
    """
    import torch
    import torch.nn.functional as F

    encoded = []
    for messages, tools in conversations:
        ids, mask = encode_conversation(tokenizer, messages, tools)
        # predict token t from position t-1; only the assistant's tokens are targets
        positions = torch.tensor([t - 1 for t in range(1, len(ids)) if mask[t]])
        encoded.append((torch.tensor([ids]), positions))
    used = torch.unique(torch.cat([ids[0] for ids, _ in encoded]))
    vocab = model.lm_head.weight.shape[0]
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, fused=True)
    model.train()
    loss_value = float("nan")
    for _ in range(steps):
        candidates = torch.unique(torch.cat([used, torch.randint(0, vocab, (negatives,))]))
        weight = model.lm_head.weight[candidates]
        losses = []
        for ids, positions in encoded:
            hidden = model.model(input_ids=ids).last_hidden_state[0]
            logits = hidden[positions] @ weight.T
            targets = torch.searchsorted(candidates, ids[0, positions + 1])
            losses.append(F.cross_entropy(logits, targets))
        loss = torch.stack(losses).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss_value = loss.item()
    return loss_value


def demonstrations(
    spec: Any, demos: dict[str, list[Any]]
) -> list[tuple[list[dict[str, Any]], list[Any]]]:
    """Play each task's demonstration in its simulated world; pair the conversation with
    the tools the trainer will show for that task."""
    from simgym.integrations.trl import tool_functions

    out = []
    for task in spec.tasks:
        actions = demos.get(task.id)
        if not actions:
            continue
        messages, _ = spec.demonstrate(task, actions)
        instance = spec.environment_class(task)()
        tools = [getattr(instance, name) for name in tool_functions(type(instance))]
        out.append((messages, tools))
    return out


# -- training -----------------------------------------------------------------------------


def load_tasks(paths: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    """Tasks (and their scripted actions, used as demonstrations) from simgym task files;
    the built-in customer-records tasks when no file is given."""
    if not paths:
        return [task for task, _ in TASKS], {task["id"]: actions for task, actions in TASKS}
    from simgym.rollout.scripted import load_specs

    specs = load_specs([Path(p) for p in paths])
    tasks = [spec.task.model_dump() for spec in specs]
    return tasks, {spec.task.id: list(spec.actions) for spec in specs if spec.actions}


def world_model_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.world_model == "openai":
        options["base_url"] = args.base_url
        if args.wm_model:
            options["model"] = args.wm_model
        options["max_concurrency"] = args.wm_max_concurrency
    elif args.world_model == "local" and args.model_path:
        options["model_path"] = args.model_path
    elif args.world_model == "replay":
        if not args.replay:
            raise SystemExit("--world-model replay needs --replay FILE")
        options["trajectories"] = args.replay
    if args.wm_temperature is not None:
        options["temperature"] = args.wm_temperature
    if args.wm_max_tokens is not None:
        options["max_tokens"] = args.wm_max_tokens
    return options


def grpo_config(args: argparse.Namespace, output_dir: str, *, tiny: bool) -> Any:
    import torch
    from trl import GRPOConfig

    on_gpu = torch.cuda.is_available()
    options: dict[str, Any] = {
        "output_dir": output_dir,
        "max_steps": args.steps,
        "per_device_train_batch_size": args.batch_size,
        "num_generations": args.num_generations,
        "max_completion_length": args.max_completion_length,
        "max_tool_calling_iterations": args.max_turns,
        "learning_rate": args.learning_rate,
        "temperature": args.temperature if args.temperature is not None else (0.3 if tiny else 1.0),
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "seed": args.seed,
        "use_cpu": not on_gpu,
        "bf16": on_gpu,
    }
    if args.use_vllm:
        options.update(use_vllm=True, vllm_mode=args.vllm_mode)
        if args.vllm_server_base_url:
            options["vllm_server_base_url"] = args.vllm_server_base_url
    return GRPOConfig(**options)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    policy = parser.add_argument_group("policy")
    policy.add_argument(
        "--model", default="tiny", help="'tiny' (offline, random) or a HF model id/path"
    )
    policy.add_argument("--steps", type=int, default=3, help="GRPO steps")
    policy.add_argument(
        "--num-generations", type=int, default=2, help="rollouts per task (GRPO group)"
    )
    policy.add_argument("--batch-size", type=int, default=4, help="rollouts per device and step")
    policy.add_argument("--max-completion-length", type=int, default=192)
    policy.add_argument("--learning-rate", type=float, default=5e-5)
    policy.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="policy sampling temperature (default: 0.3 for 'tiny', whose warm start leaves "
        "a little probability on every token, else 1.0)",
    )
    policy.add_argument(
        "--warm-start-steps",
        type=int,
        default=None,
        help="supervised steps on the demonstrations first (default: 100 for 'tiny', else 0)",
    )
    policy.add_argument(
        "--use-vllm", action="store_true", help="generate the policy's rollouts with vLLM"
    )
    policy.add_argument("--vllm-mode", default="server", choices=["server", "colocate"])
    policy.add_argument(
        "--vllm-server-base-url", default=None, help="the policy's vLLM server (server mode)"
    )
    world = parser.add_argument_group("world model")
    world.add_argument(
        "--world-model", "-w", default="local", choices=["local", "openai", "replay"]
    )
    world.add_argument(
        "--base-url", default=None, help="OpenAI-compatible world-model server (or SIMGYM_BASE_URL)"
    )
    world.add_argument("--wm-model", default=None, help="served world-model name")
    world.add_argument("--model-path", default=None, help="GGUF file for the local world model")
    world.add_argument(
        "--replay", action="append", default=None, help="trajectory JSONL for replay"
    )
    world.add_argument("--wm-temperature", type=float, default=None)
    world.add_argument("--wm-max-tokens", type=int, default=None)
    world.add_argument("--wm-max-concurrency", type=int, default=64)
    run = parser.add_argument_group("episodes")
    run.add_argument(
        "--tasks", nargs="*", default=[], help="simgym task files (JSONL/YAML); default: built-in"
    )
    run.add_argument("--tasks-limit", type=int, default=None, help="use only the first N tasks")
    run.add_argument("--domain", default="mcp", help="domain of tasks that name none")
    run.add_argument("--reward", default=None, help="reward spec name (default: each task's own)")
    run.add_argument("--max-turns", type=int, default=4, help="tool calls per episode")
    run.add_argument("--trajectories", default=None, help="append every episode to this JSONL")
    run.add_argument("--output-dir", default=None, help="trainer output (default: a temp dir)")
    run.add_argument("--save", action="store_true", help="save the trained policy to --output-dir")
    run.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, world_model: Any = None) -> dict[str, Any]:
    """Run the example; return a summary (also printed). ``world_model`` overrides the
    command line's with a built backend (tests pass a function world model)."""
    args = parse_args(argv)
    from trl import GRPOTrainer

    from simgym.integrations.trl import SimgymTRL

    clock = time.perf_counter()
    seconds: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[name] = round(now - clock, 2)
        clock = now

    tasks, demos = load_tasks(args.tasks)
    if args.tasks_limit is not None:
        tasks = tasks[: args.tasks_limit]
    spec = SimgymTRL(
        args.domain,
        tasks,
        world_model=world_model if world_model is not None else args.world_model,
        world_model_options=None if world_model is not None else world_model_options(args),
        reward=args.reward,
        max_turns=args.max_turns,
        seed=args.seed,
        trajectories=args.trajectories,
    )
    tiny = args.model == "tiny"
    if tiny:
        tokenizer = embedded_tokenizer()
        policy: Any = tiny_policy(tokenizer, seed=args.seed)
    else:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
        policy = args.model
    warm_steps = (
        args.warm_start_steps if args.warm_start_steps is not None else (100 if tiny else 0)
    )
    if warm_steps and not tiny:
        raise SystemExit("--warm-start-steps is for the tiny policy; fine-tune real ones first")
    summary: dict[str, Any] = {
        "tasks": len(spec.tasks),
        "environments": list(spec.environment_classes),
    }
    lap("setup")
    with spec:
        if warm_steps:
            conversations = demonstrations(spec, demos)
            if not conversations:
                raise SystemExit("no demonstrations for the warm start: give tasks with actions")
            loss = warm_start(policy, tokenizer, conversations, steps=warm_steps)
            summary["warm_start_loss"] = round(loss, 4)
            lap("warm_start")
        output_dir = args.output_dir or tempfile.mkdtemp(prefix="simgym-grpo-")
        trainer = GRPOTrainer(
            model=policy,
            args=grpo_config(args, output_dir, tiny=tiny),
            processing_class=tokenizer,
            train_dataset=spec.train_dataset,
            environment_factory=spec.environment_factory,
            reward_funcs=spec.reward_funcs,
        )
        trainer.train()
        if args.save:
            trainer.save_model(output_dir)
        lap("train")
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    summary.update(
        steps=trainer.state.global_step,
        reward_per_step=[round(entry["reward"], 4) for entry in logs],
        tool_calls_per_rollout=[round(entry.get("tools/call_frequency", 0.0), 3) for entry in logs],
        seconds=seconds,
        output_dir=output_dir,
        trajectories=args.trajectories,
    )
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
