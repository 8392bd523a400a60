"""The world-model loop end to end at reduced size (real factory, real TRL training, real
GGUF export, real llama.cpp evaluation), the evaluation report, and the local backend's
adapter selection."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgym.core.errors import WorldModelError
from simgym.train.evaluate import compare, report_markdown, report_rows, summarize
from simgym.worldmodels import local as local_module
from simgym.worldmodels.local import LocalWorldModel, adapter_prompt_style, resolve_adapter

DEVSET_ROWS = Path(__file__).resolve().parents[1] / "devset" / "rows.jsonl"


def result(domain, status="ok", **metrics):
    base = {"exact_match": 0.0, "edit_similarity": 0.5, "format_ok": 1.0, "line_f1": 0.25}
    return {
        "key": f"{domain}-{id(metrics)}",
        "domain": domain,
        "status": status,
        "metrics": {**base, **metrics} if status == "ok" else None,
        "usage": {"completion_tokens": 20} if status == "ok" else None,
        "latency_s": 2.0 if status == "ok" else None,
    }


def test_a_failed_prediction_counts_as_zero_not_as_missing():
    summary = summarize([result("terminal", edit_similarity=1.0), result("terminal", "failed")])
    assert summary["rows"] == 2 and summary["failed"] == 1
    assert summary["edit_similarity"] == 0.5 and summary["format_ok"] == 0.5
    assert summary["generated_tokens_per_second"] == 10.0


def test_a_metric_that_does_not_apply_is_left_out():
    summary = summarize([result("web", format_ok=None), result("web", format_ok=0.0)])
    assert summary["format_ok"] == 0.0 and summary["format_ok_n"] == 1


def test_the_report_compares_candidates_per_domain():
    report = compare(
        {
            "base": [result("terminal", edit_similarity=0.2), result("mcp", line_f1=0.0)],
            "trained": [result("terminal", edit_similarity=0.9), result("mcp", line_f1=1.0)],
        }
    )
    assert report["domains"]["terminal"]["trained"]["edit_similarity"] == 0.9
    assert report["overall"]["base"]["line_f1"] == 0.125
    lines = report_rows(report)
    assert lines[0][:3] == ["domain", "model", "rows"]
    assert [line[:2] for line in lines[1:]] == [
        ["mcp", "base"],
        ["mcp", "trained"],
        ["terminal", "base"],
        ["terminal", "trained"],
        ["all", "base"],
        ["all", "trained"],
    ]
    assert "| terminal | trained | 1 | 0.000 | 0.900 |" in report_markdown(report)


def test_adapter_selection(tmp_path, monkeypatch):
    monkeypatch.delenv("SIMGYM_ADAPTER", raising=False)
    shipped = tmp_path / "shipped.gguf"
    monkeypatch.setattr(local_module, "SHIPPED_ADAPTER", shipped)
    assert resolve_adapter("auto", model_given=False) is None  # nothing shipped
    shipped.write_bytes(b"GGUF")
    assert resolve_adapter("auto", model_given=False) == str(shipped)
    assert resolve_adapter("auto", model_given=True) is None  # another model was named
    for plain in (None, "none", "base", ""):
        assert resolve_adapter(plain, model_given=False) is None
    monkeypatch.setenv("SIMGYM_ADAPTER", "none")
    assert resolve_adapter("auto", model_given=False) is None
    with pytest.raises(WorldModelError, match="adapter file not found"):
        resolve_adapter(str(tmp_path / "missing.gguf"), model_given=False)


def test_an_adapter_says_which_prompts_it_was_trained_on(tmp_path):
    adapter = tmp_path / "wm.gguf"
    adapter.write_bytes(b"GGUF")
    assert adapter_prompt_style(str(adapter)) == "full"  # no sidecar: an older adapter
    adapter.with_suffix(".json").write_text('{"prompt_style": "compact", "sha256": "x"}')
    assert adapter_prompt_style(str(adapter)) == "compact"
    for broken in ('{"prompt_style": "huge"}', "not json", "[1, 2]"):
        adapter.with_suffix(".json").write_text(broken)
        assert adapter_prompt_style(str(adapter)) == "full"
    assert adapter_prompt_style(None) == "full"


def test_the_base_model_stays_selectable(model_path):
    model = LocalWorldModel(adapter="none")
    assert model.adapter is None and model.describe()["adapter"] is None
    assert model.prompt_style == "full"  # no adapter says otherwise
    assert LocalWorldModel(adapter="none", prompt_style="compact").prompt_style == "compact"
    with pytest.raises(WorldModelError, match="prompt_style"):
        LocalWorldModel(adapter="none", prompt_style="tiny")
    assert model.name == f"local:{Path(model_path).name}"


@pytest.mark.timeout(1500)  # minutes on two idle cores; a loaded machine is much slower
def test_small_pipeline_end_to_end_and_resume(tmp_path):
    """factory -> SFT rows -> LoRA steps -> GGUF adapter -> base vs trained report."""
    from simgym.cli.train import train_app

    out = tmp_path / "pipeline"
    devset = tmp_path / "dev.jsonl"  # one recorded dev-set row keeps the run short
    devset.write_text(DEVSET_ROWS.read_text(encoding="utf-8").splitlines()[0] + "\n")
    args = ["pipeline", "--out", str(out), "--size", "small", "--threads", "2"]
    args += ["--devset", str(devset)]
    ran = CliRunner().invoke(train_app, args)
    assert ran.exit_code == 0, ran.output

    stages = json.loads((out / "pipeline.json").read_text())
    assert stages["factory"]["transitions"]["train"] > 0
    assert stages["train"]["steps"] == 3 and stages["train"]["tokens"] > 0
    assert stages["train"]["eval_loss"] is not None
    assert stages["export"]["same_prompt_tokenization"] is True
    assert (out / "run" / "final" / "adapter_config.json").is_file()
    assert (out / "adapter.gguf").read_bytes()[:4] == b"GGUF"
    # rows, evaluation and the adapter's sidecar all use the compact prompts
    assert json.loads((out / "adapter.json").read_text()) == {"prompt_style": "compact"}
    assert LocalWorldModel(adapter=out / "adapter.gguf").prompt_style == "compact"
    row = json.loads((out / "sft" / "train.jsonl").read_text().splitlines()[0])
    assert row["messages"][0]["content"].startswith("You simulate ")
    assert json.loads((out / "sft" / "manifest.json").read_text())["prompt_style"] == "compact"
    test_rows = (out / "eval" / "test-data.jsonl").read_text().splitlines()
    assert all(json.loads(t)["system_prompt"].startswith("You simulate ") for t in test_rows)

    report = json.loads((out / "report.json").read_text())
    assert set(report["sets"]) == {"test", "dev"}
    for label, evaluated in report["sets"].items():
        assert evaluated["domains"], label
        assert set(evaluated["domains"]) <= {"terminal", "swe", "mcp", "search", "web"}
        for by_name in evaluated["domains"].values():
            assert set(by_name) == {"base", "trained"}
            for summary in by_name.values():
                assert summary["rows"] == 1
                assert 0.0 <= summary["edit_similarity"] <= 1.0
        assert evaluated["candidates"]["trained"]["adapter"].endswith("adapter.gguf")
        assert evaluated["candidates"]["base"]["adapter"] is None
    assert "| all | trained |" in (out / "report.md").read_text()

    again = CliRunner().invoke(train_app, args)
    assert again.exit_code == 0, again.output
    assert "train: already done" in again.stderr

    # a larger budget continues the finished run; export and evaluation follow the weights
    before = (out / "adapter.gguf").read_bytes()
    base_rows = (out / "eval" / "dev" / "base.jsonl").read_text()
    longer = CliRunner().invoke(train_app, [*args, "--max-steps", "4"])
    assert longer.exit_code == 0, longer.output
    assert "extending the finished run (max_steps 3 -> 4" in longer.stderr
    stages = json.loads((out / "pipeline.json").read_text())
    assert stages["train"]["steps"] == 4 and stages["train"]["resumed_from"] == "checkpoint-3"
    logged = [json.loads(line) for line in (out / "run" / "loss.jsonl").open()]
    step4 = [r for r in logged if r["step"] == 4 and "learning_rate" in r]
    assert step4 and step4[0]["learning_rate"] > 0  # the new schedule's rate, not the old end's
    assert (out / "adapter.gguf").read_bytes() != before
    assert (out / "eval" / "dev" / "base.jsonl").read_text() == base_rows  # not redone
    trained = [json.loads(line) for line in (out / "eval" / "dev" / "trained.jsonl").open()]
    assert len(trained) == 1  # predicted again with the new adapter, once


def test_ship_copies_the_adapter_with_its_provenance(tmp_path):
    from simgym.cli.train import train_app
    from simgym.train.ship import file_sha256, provenance_path

    run = tmp_path / "run"
    (run / "eval" / "test").mkdir(parents=True)
    (run / "adapter.gguf").write_bytes(b"GGUF adapter bytes")
    stages = {
        "config": {"max_tokens": 300000, "prompt_style": "compact"},
        "train": {"steps": 31, "eval_loss": 0.9},
    }
    (run / "pipeline.json").write_text(json.dumps(stages))
    base = [result("terminal", edit_similarity=0.2) | {"key": "t/1"}]
    trained = [result("terminal", edit_similarity=0.6) | {"key": "t/1"}]
    for name, rows in (("base", base), ("trained", trained)):
        lines = "".join(json.dumps(r) + "\n" for r in rows)
        (run / "eval" / "test" / f"{name}.jsonl").write_text(lines)
    dest = tmp_path / "weights" / "wm.gguf"
    done = CliRunner().invoke(train_app, ["ship", str(run), "--dest", str(dest)])
    assert done.exit_code == 0, done.output
    assert dest.read_bytes() == b"GGUF adapter bytes"
    provenance = json.loads(provenance_path(dest).read_text())
    assert provenance["sha256"] == file_sha256(dest)
    assert provenance["prompt_style"] == "compact"
    assert LocalWorldModel(adapter=dest).prompt_style == "compact"  # read from the provenance
    assert (
        provenance["training"]["steps"] == 31 and provenance["training"]["validation_loss"] == 0.9
    )
    test = provenance["evaluation"]["test"]
    assert test["overall"]["trained"]["edit_similarity"] == 0.6
    assert test["domains"]["terminal"]["base"]["edit_similarity"] == 0.2
    assert "dev" not in provenance["evaluation"]  # not evaluated, not claimed

    (run / "eval" / "test" / "trained.jsonl").unlink()
    refused = CliRunner().invoke(train_app, ["ship", str(run), "--dest", str(dest)])
    assert refused.exit_code != 0 and "evaluate before shipping" in refused.output


def test_the_shipped_adapter_is_the_default_and_matches_its_provenance(monkeypatch):
    import asyncio

    from simgym.train.ship import file_sha256, provenance_path

    monkeypatch.delenv("SIMGYM_ADAPTER", raising=False)
    shipped = local_module.SHIPPED_ADAPTER
    assert shipped.is_file(), "the trained world-model adapter is missing from the package"
    provenance = json.loads(provenance_path(shipped).read_text())
    assert provenance["sha256"] == file_sha256(shipped)
    overall = provenance["evaluation"]["test"]["overall"]
    assert overall["trained"]["edit_similarity"] > overall["base"]["edit_similarity"]
    model = LocalWorldModel(max_tokens=24)
    assert model.adapter == str(shipped) and model.name.endswith("+" + shipped.name)
    messages = [
        {"role": "system", "content": "You are the world model of a Linux terminal."},
        {"role": "user", "content": '### Turn 1\n\n**Action:**\n[{"keystrokes": "pwd\\n"}]'},
    ]
    prediction = asyncio.run(model.predict(messages, temperature=0.0, seed=0))
    assert prediction.model == model.name and prediction.usage.completion_tokens > 0
