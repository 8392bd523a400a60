"""World-model training: SFT data fitting, loss masking, training with checkpoints and
resume, LoRA, and the export back to GGUF checked against llama.cpp.

Fast tests train a tiny random llama (2 layers, width 64) that uses the real SmolLM2
tokenizer, converted from the embedded GGUF file; the slow ones use the 135M model itself.
"""

import asyncio
import json
import math

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor
from typer.testing import CliRunner

from simgym import LocalWorldModel
from simgym.cli.train import train_app
from simgym.train.adapter_gguf import export_adapter_gguf
from simgym.train.base import load_model
from simgym.train.errors import TrainError
from simgym.train.gguf_export import export_gguf, load_trained, rotary_permute
from simgym.train.sft import LOSS_LOG, MANIFEST, SftOptions, prepare_sft, train_sft
from simgym.train.sft_data import build_dataset, fit_history, parse_row, sequence_length
from simgym.train.verify import CHECK_PROMPTS, compare_greedy

SYSTEM = "You simulate a Linux terminal. Answer with the screen after the command."


def observation(text: str) -> str:
    return (
        f"**Environment Observation:**\n<predicted_observation>\n{text}\n</predicted_observation>"
    )


def make_row(history: int = 0, action: str = "ls", screen: str = "notes.txt  todo.md") -> dict:
    messages = [{"role": "system", "content": SYSTEM}]
    for turn in range(1, history + 1):
        messages.append({"role": "user", "content": f"### Turn {turn}\n**Action:**\necho {turn}"})
        messages.append({"role": "assistant", "content": observation(f"output {turn} " * 5)})
    messages.append({"role": "user", "content": f"### Turn {history + 1}\n**Action:**\n{action}"})
    return {"messages": messages, "completion": observation(screen)}


def write_rows(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- data ------------------------------------------------------------------------------


def test_the_gguf_tokenizer_ends_turns_where_llama_cpp_does(tokenizer):
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.bos_token == "<|im_start|>"
    assert tokenizer.pad_token_id == tokenizer.eos_token_id == 2


def test_rows_are_read_in_every_accepted_form():
    row = make_row(history=1)
    prompt, completion = parse_row(row)
    assert prompt == row["messages"] and completion == row["completion"]
    answered = {"messages": [*row["messages"], {"role": "assistant", "content": "seen"}]}
    assert parse_row(answered) == (row["messages"], "seen")
    trl_form = {"prompt": row["messages"], "completion": [{"role": "assistant", "content": "x"}]}
    assert parse_row(trl_form) == (row["messages"], "x")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"messages": [{"role": "user", "content": "ls"}]}, "last message must be the assistant"),
        ({"messages": [{"role": "robot", "content": "ls"}], "completion": "x"}, "role 'robot'"),
        ({"messages": [{"role": "user", "content": "ls"}], "completion": "  "}, "non-empty"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]},
            "may only come first",
        ),
        ({"text": "hello"}, "needs 'messages'"),
    ],
)
def test_bad_rows_are_rejected_with_the_reason(row, message):
    with pytest.raises(ValueError, match=message):
        parse_row(row)


def test_a_bad_line_is_reported_with_its_number(tmp_path, tokenizer):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(make_row()) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(TrainError, match=r"bad\.jsonl:2: not valid JSON"):
        build_dataset(path, tokenizer, 512)


def test_long_rows_lose_their_oldest_turns_first(tokenizer):
    row = make_row(history=6, action="cat todo.md")
    prompt, completion = parse_row(row)
    answer = {"role": "assistant", "content": completion}
    full = sequence_length(tokenizer, [*prompt, answer])
    without_four = [prompt[0], *prompt[9:]]  # two turns of history left
    budget = sequence_length(tokenizer, [*without_four, answer])

    kept, length = fit_history(tokenizer, prompt, completion, budget)

    assert full > budget and length == budget
    assert kept == without_four  # the system prompt, the newest two turns and the action
    # and no more was dropped than needed: one pair more would not fit
    assert sequence_length(tokenizer, [prompt[0], *prompt[7:], answer]) > budget


def test_rows_too_long_even_alone_are_dropped_and_counted(tmp_path, tokenizer):
    huge = make_row(screen="word " * 400)
    path = write_rows(tmp_path / "rows.jsonl", [make_row(history=3), huge, make_row()])
    dataset, stats = build_dataset(path, tokenizer, 128)
    assert (stats.rows, stats.kept, stats.dropped, stats.dropped_lines) == (3, 2, 1, [2])
    assert stats.trimmed == 1 and stats.messages_dropped > 0
    assert len(dataset) == 2
    with pytest.raises(TrainError, match="no row .* fits max_length=128"):
        build_dataset(write_rows(tmp_path / "huge.jsonl", [huge]), tokenizer, 128)


# -- training --------------------------------------------------------------------------


def options(tmp_path, data, base, **extra) -> SftOptions:
    settings = dict(
        data=data,
        out=tmp_path / "run",
        base=str(base),
        mode="full",
        batch_size=2,
        max_length=160,
        lr=1e-2,
        bf16=False,
        logging_steps=1,
        save_steps=2,
        threads=1,  # two threads crawl when other jobs share the cores
    )
    settings.update(extra)
    return SftOptions(**settings)


def test_only_observation_tokens_carry_the_loss(tmp_path, tiny_base, tokenizer):
    row = make_row(history=1)
    data = write_rows(tmp_path / "train.jsonl", [row])
    run = prepare_sft(options(tmp_path, data, tiny_base, layout="turn"))
    example = run.trainer.train_dataset[0]
    ids, labels = example["input_ids"], example["labels"]
    masked = sum(1 for label in labels if label == -100)
    assert 0 < masked < len(ids)
    assert all(label == -100 for label in labels[:masked])
    assert labels[masked:] == ids[masked:]
    prompt = tokenizer.apply_chat_template(
        row["messages"], tokenize=False, add_generation_prompt=True
    )
    assert tokenizer.decode(ids[:masked]) == prompt
    assert tokenizer.decode(ids[masked:]) == row["completion"] + "<|im_end|>\n"


def test_the_episode_layout_also_teaches_the_history_observations(tmp_path, tiny_base, tokenizer):
    row = make_row(history=2)
    data = write_rows(tmp_path / "train.jsonl", [row])
    run = prepare_sft(options(tmp_path, data, tiny_base, max_length=400))
    assert run.options.layout == "episode" and run.train_stats.observations == 3
    example = run.trainer.train_dataset[0]
    learned = [
        i for i, label in zip(example["input_ids"], example["labels"], strict=True) if label != -100
    ]
    text = tokenizer.decode(learned)
    assert text.count("output 1") == 5 and text.count("output 2") == 5
    assert "notes.txt  todo.md" in text and "Action" not in text and SYSTEM not in text


def test_training_lowers_the_loss_and_resumes_from_the_last_checkpoint(tmp_path, tiny_base):
    data = write_rows(tmp_path / "train.jsonl", [make_row(history=1)] * 8)
    first = train_sft(options(tmp_path, data, tiny_base, max_steps=4))
    out = first.out
    assert first.steps == 4 and first.resumed_from is None
    assert (out / "checkpoint-4").is_dir() and (out / "final" / "model.safetensors").is_file()

    with pytest.raises(TrainError, match="already holds checkpoints"):
        train_sft(options(tmp_path, data, tiny_base, max_steps=8))
    changed = write_rows(tmp_path / "other.jsonl", [make_row(action="pwd")] * 8)
    with pytest.raises(TrainError, match="different data or settings"):
        train_sft(options(tmp_path, changed, tiny_base, max_steps=8, resume=True))

    second = train_sft(options(tmp_path, data, tiny_base, max_steps=8, resume=True))
    assert second.resumed_from == "checkpoint-4" and second.steps == 8
    records = [json.loads(line) for line in (out / LOSS_LOG).read_text().splitlines()]
    losses = [(r["step"], r["loss"]) for r in records if "loss" in r]
    assert [step for step, _ in losses] == list(range(1, 9))  # one point per step
    assert losses[-1][1] < losses[0][1] / 2
    assert losses[4][1] < losses[0][1] / 2  # step 5 went on from the trained weights
    # step 5 is taken at the 8-step schedule's rate (half way down its cosine), not at the
    # rate the 4-step run ended with (0)
    rates = {r["step"]: r["learning_rate"] for r in records if "learning_rate" in r}
    assert rates[5] == pytest.approx(0.5 * rates[1])
    assert all(r["tokens"] > 0 for r in records if "loss" in r)
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["result"]["steps"] == 8 and manifest["train_data"]["kept"] == 8

    # resumed at its last step: nothing to train, and the loss reported is the run's own
    done = train_sft(options(tmp_path, data, tiny_base, max_steps=8, resume=True))
    assert done.steps == 8 and done.tokens_per_second == 0.0
    assert done.train_loss == pytest.approx(sum(loss for _, loss in losses) / len(losses))


def test_a_run_resumed_at_its_step_limit_mid_epoch_takes_no_step_more(tmp_path, tiny_base):
    """A run stopped right after its last checkpoint (before its final weights) must not
    train a step past the limit when resumed (TRL's GRPOTrainer does; see
    simgym.train.resume)."""
    import shutil

    data = write_rows(tmp_path / "train.jsonl", [make_row(history=1)] * 12)  # 6 steps/epoch
    first = train_sft(options(tmp_path, data, tiny_base, max_steps=2))
    assert first.steps == 2
    weights = (first.out / "final" / "model.safetensors").read_bytes()
    shutil.rmtree(first.out / "final")
    again = train_sft(options(tmp_path, data, tiny_base, max_steps=2, resume=True))
    assert again.steps == 2 and again.resumed_from == "checkpoint-2"
    assert again.tokens_per_second == 0.0 and again.train_loss is not None
    assert (again.out / "final" / "model.safetensors").read_bytes() == weights


def test_a_token_budget_stops_training(tmp_path, tiny_base, tokenizer):
    data = write_rows(tmp_path / "train.jsonl", [make_row()] * 20)
    per_row = sequence_length(
        tokenizer,
        [*make_row()["messages"], {"role": "assistant", "content": make_row()["completion"]}],
    )
    result = train_sft(options(tmp_path, data, tiny_base, max_tokens=per_row * 2 * 3))
    assert result.steps == 3 and result.tokens == per_row * 2 * 3


def test_validation_loss_is_logged(tmp_path, tiny_base):
    data = write_rows(tmp_path / "train.jsonl", [make_row()] * 4)
    val = write_rows(tmp_path / "val.jsonl", [make_row(action="pwd", screen="/home/dev")])
    result = train_sft(options(tmp_path, data, tiny_base, val=val, max_steps=2))
    records = [json.loads(line) for line in (result.out / LOSS_LOG).read_text().splitlines()]
    assert result.eval_loss is not None and math.isfinite(result.eval_loss)
    assert [r["eval_loss"] for r in records if "eval_loss" in r][-1] == result.eval_loss


# -- back to GGUF ----------------------------------------------------------------------


def test_rotary_permutation_is_undone_by_the_gguf_reader():
    weight = np.arange(576 * 8, dtype=np.float32).reshape(576, 8)
    reader = LlamaTensorProcessor()
    for heads in (9, 3):
        rows = weight[: 64 * heads]
        permuted = rotary_permute(rows, heads)
        assert not np.array_equal(permuted, rows)
        assert np.array_equal(reader._reverse_permute_weights(permuted, heads, heads), rows)


def test_exported_tiny_model_decodes_like_transformers(tmp_path, tiny_base, tokenizer, model_path):
    done = export_gguf(tiny_base, tmp_path / "tiny.gguf", out_type="f32", template=model_path)
    results = compare_greedy(done.model, tokenizer, done.path, max_new_tokens=12)
    assert len(results) == len(CHECK_PROMPTS)
    for match in results:
        assert match.same_prompt_tokenization
        assert match.same, (match.hf_tokens, match.llama_tokens)
        assert len(match.hf_tokens) > 0
    # and the embedded runtime takes the file as its model
    model = LocalWorldModel(model_path=done.path, n_ctx=512, max_tokens=8, temperature=0.0)
    prediction = asyncio.run(model.predict(CHECK_PROMPTS[0]))
    assert prediction.raw.startswith("**Environment Observation:**")
    assert prediction.usage.completion_tokens > 0


def test_lora_run_is_merged_into_the_export(tmp_path, tiny_base, tokenizer, model_path):
    data = write_rows(tmp_path / "train.jsonl", [make_row()] * 4)
    result = train_sft(options(tmp_path, data, tiny_base, mode="lora", max_steps=2))
    assert (result.final / "adapter_config.json").is_file()
    merged = load_trained(result.final)
    base = load_model(tiny_base)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(merged.state_dict()[name], base.state_dict()[name])
    assert not any("lora" in key for key in merged.state_dict())

    done = export_gguf(result.final, tmp_path / "lora.gguf", out_type="f32", template=model_path)
    results = compare_greedy(done.model, done.tokenizer, done.path, max_new_tokens=8)
    assert all(m.same for m in results)


def test_lora_adapter_exports_as_a_llama_cpp_adapter(tmp_path, tiny_base, tokenizer, model_path):
    row = make_row()
    data = write_rows(tmp_path / "train.jsonl", [row] * 8)
    result = train_sft(options(tmp_path, data, tiny_base, mode="lora", lr=5e-2, max_steps=4))
    base_gguf = export_gguf(tiny_base, tmp_path / "base.gguf", out_type="f32", template=model_path)
    adapter = export_adapter_gguf(result.final, tmp_path / "adapter.gguf", out_type="f32")
    assert adapter.stat().st_size < base_gguf.path.stat().st_size / 4

    merged = load_trained(result.final)
    prompts = [row["messages"], *CHECK_PROMPTS[:2]]
    applied = compare_greedy(
        merged, tokenizer, base_gguf.path, prompts, max_new_tokens=8, lora_path=adapter
    )
    assert all(m.same for m in applied), [(m.hf_tokens, m.llama_tokens) for m in applied]
    # the adapter is what makes the difference: the base alone answers the trained prompt
    # otherwise
    alone = compare_greedy(merged, tokenizer, base_gguf.path, prompts[:1], max_new_tokens=8)
    assert not alone[0].same
    with pytest.raises(TrainError, match="not a LoRA adapter folder"):
        export_adapter_gguf(tiny_base, tmp_path / "nope.gguf")


def test_a_vocabulary_mismatch_is_refused(tmp_path, model_path):
    config = LlamaConfig(
        vocab_size=1000,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    with pytest.raises(TrainError, match="1000"):
        export_gguf(LlamaForCausalLM(config), tmp_path / "x.gguf", template=model_path)
    with pytest.raises(TrainError, match="unknown GGUF type"):
        export_gguf(LlamaForCausalLM(config), tmp_path / "x.gguf", out_type="q2")


# -- the command -----------------------------------------------------------------------


def test_train_commands_end_to_end(tmp_path, tiny_base, model_path):
    runner = CliRunner()
    data = write_rows(tmp_path / "train.jsonl", [make_row()] * 4)
    out = tmp_path / "run"
    args = ["sft", "--data", data, "--out", out, "--base", tiny_base, "--full", "--fp32"]
    args += ["--threads", "1"]
    args += ["--max-steps", "2", "--max-length", "160", "--logging-steps", "1", "--lr", "0.01"]
    trained = runner.invoke(train_app, [str(a) for a in args])
    assert trained.exit_code == 0, trained.output
    assert "2 steps" in trained.stderr and "train loss" in trained.stderr

    again = runner.invoke(train_app, [str(a) for a in args])
    assert again.exit_code == 2 and "--resume" in again.stderr

    curve = runner.invoke(train_app, ["curve", str(out)])
    assert curve.exit_code == 0 and "train loss" in curve.stdout

    gguf = tmp_path / "run.gguf"
    exported = runner.invoke(
        train_app,
        [
            "export-gguf",
            "--model",
            str(out / "final"),
            "--out",
            str(gguf),
            "--type",
            "f32",
            "--template",
            model_path,
            "--max-new-tokens",
            "6",
        ],
    )
    assert exported.exit_code == 0, exported.output
    assert gguf.is_file() and "on 3 of 3" in exported.stderr


def test_speed_command_measures_each_setting(tiny_base):
    runner = CliRunner()
    args = ["speed", "--base", str(tiny_base), "--mode", "lora", "--precision", "both"]
    args += ["--batch-size", "1", "--seq-len", "16", "--steps", "1", "--threads", "1", "--json"]
    measured = runner.invoke(train_app, args)
    assert measured.exit_code == 0, measured.output
    lines = [json.loads(line) for line in measured.stdout.splitlines()]
    assert [(r["mode"], r["precision"]) for r in lines] == [("lora", "fp32"), ("lora", "bf16")]
    assert all(r["tokens_per_second"] > 0 and r["trainable_parameters"] > 0 for r in lines)
    wrong = runner.invoke(train_app, ["speed", "--mode", "half"])
    assert wrong.exit_code == 2 and "got 'half'" in wrong.stderr


# -- the real 135M model (slow) --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("out_type", ["f32", "f16"])
def test_embedded_model_round_trips_through_gguf(tmp_path, model_path, out_type):
    """GGUF (Q4_1) -> transformers -> GGUF: llama.cpp decodes the f32 export greedily
    exactly as transformers decodes the dequantized model; f16 rounds the weights, so it
    may part ways late (measured: token 29 of 64 on one prompt)."""
    done = export_gguf(model_path, tmp_path / f"smollm2-{out_type}.gguf", out_type=out_type)
    results = compare_greedy(done.model, done.tokenizer, done.path, max_new_tokens=24)
    assert all(m.same_prompt_tokenization for m in results)
    if out_type == "f32":
        assert all(m.same for m in results), [(m.hf_text, m.llama_text) for m in results]
    else:
        assert all(m.first_difference is None or m.first_difference >= 12 for m in results)


@pytest.mark.slow
def test_lora_on_the_embedded_model_exports_for_the_local_backend(tmp_path, model_path):
    data = write_rows(tmp_path / "train.jsonl", [make_row(history=1)] * 8)
    result = train_sft(
        SftOptions(
            data=data, out=tmp_path / "run", max_steps=4, max_length=256, logging_steps=1, threads=1
        )
    )
    done = export_gguf(result.final, tmp_path / "trained.gguf", out_type="f16")
    model = LocalWorldModel(model_path=done.path, n_ctx=1024, max_tokens=24, temperature=0.0)
    prediction = asyncio.run(model.predict(make_row(history=1)["messages"]))
    assert prediction.observation.strip()

    # the adapter alone, applied by llama.cpp to an unquantized copy of the base, decodes
    # like the merged model in transformers
    base = export_gguf(model_path, tmp_path / "base-f32.gguf", out_type="f32")
    adapter = export_adapter_gguf(result.final, tmp_path / "adapter.gguf", out_type="f32")
    results = compare_greedy(done.model, done.tokenizer, base.path, lora_path=adapter)
    assert all(m.same for m in results), [(m.hf_text, m.llama_text) for m in results]


def test_a_budgeted_run_reads_a_seeded_sample_of_the_rows(tmp_path, tokenizer):
    rows = [
        {
            "messages": [
                {"role": "system", "content": "You simulate a shell."},
                {"role": "user", "content": f"### Turn 1\n\n**Action:**\necho {i}"},
            ],
            "completion": f"<predicted_observation>\n{i}\n</predicted_observation>",
        }
        for i in range(40)
    ]
    path = write_rows(tmp_path / "rows.jsonl", rows)
    whole, stats = build_dataset(path, tokenizer, 256)
    assert stats.kept == 40 and stats.unread == 0
    few, stats = build_dataset(path, tokenizer, 256, max_rows=6, seed=1)
    assert len(few) == 6 and stats.rows == 6 and stats.unread == 34
    again, _ = build_dataset(path, tokenizer, 256, max_rows=6, seed=1)
    other, _ = build_dataset(path, tokenizer, 256, max_rows=6, seed=2)
    assert few["completion"] == again["completion"] != other["completion"]
    assert few["completion"] != whole["completion"][:6]  # shuffled, not the file's head
    per_row = stats.tokens / stats.kept
    capped, stats = build_dataset(path, tokenizer, 256, max_tokens=int(per_row * 10), seed=1)
    assert 10 <= stats.kept <= 11 and stats.tokens >= per_row * 10
