"""The embedded default model, in-process."""

import pytest

import simgym
from simgym import LocalWorldModel, WorldModelError


async def test_embedded_model_simulates_a_terminal_turn():
    env = simgym.make("terminal", world_model="local", max_tokens=64, seed=3)
    first = await env.reset("list the files")
    res = await env.step("curl -sI https://example.com")  # another machine: the model renders
    assert first.text == "dev@devbox:~$"
    turn = env.trajectory.turns[-1]
    assert res.observation.kind == "observation" and res.observation.text.strip()
    assert turn.usage.prompt_tokens > 100 and turn.usage.completion_tokens > 0
    assert env.trajectory.world_model["backend"] == "local"


async def test_embedded_model_leaves_what_the_state_determines_to_simgym():
    env = simgym.make("terminal", world_model="local", max_tokens=64, seed=3)
    await env.reset("list the files")
    res = await env.step("ls -la")
    turn = env.trajectory.turns[-1]
    assert turn.grounding["strict"]["action"] == "state" and turn.attempts == 0
    assert turn.usage.prompt_tokens == 0  # no model call
    lines = res.observation.text.splitlines()
    assert lines[1] == "total 16" and lines[-2].endswith(" project")
    assert "-rw-r--r-- 1 dev  dev    23 Mar 14 09:26 notes.txt" in lines
    # asked to, the model renders it and strict mode checks it as before
    env = simgym.make("terminal", world_model="local", max_tokens=64, seed=3, render_known=True)
    await env.reset("list the files")
    res2 = await env.step("ls -la")
    turn = env.trajectory.turns[-1]
    assert turn.usage.prompt_tokens > 100 and turn.attempts >= 1
    assert res2.observation.text == res.observation.text


async def test_long_history_is_trimmed_to_fit_the_context():
    wm = LocalWorldModel(n_ctx=1024, max_tokens=16)
    history = [{"role": "system", "content": "You simulate a terminal."}]
    for i in range(40):
        history.append({"role": "user", "content": f"### Turn {i}\n\n**Action:**\necho {'x' * 80}"})
        history.append({"role": "assistant", "content": "x" * 200})
    history.append({"role": "user", "content": "### Turn 41\n\n**Action:**\nls"})
    pred = await wm.predict(history)
    assert pred.usage.prompt_tokens < 1024


def test_missing_model_file_is_explained(tmp_path):
    with pytest.raises(WorldModelError, match="not found"):
        LocalWorldModel(model_path=tmp_path / "nope.gguf")


async def test_prompt_that_cannot_fit_is_an_error():
    wm = LocalWorldModel(n_ctx=256, max_tokens=16)
    with pytest.raises(WorldModelError, match="does not fit"):
        await wm.predict(
            [{"role": "system", "content": "word " * 600}, {"role": "user", "content": "ls"}]
        )


@pytest.mark.parametrize(
    ("generated", "kept"),
    [
        ("total 0\n", "total 0\n"),
        ("  indented first line\n", "  indented first line\n"),
        # a fine-tuned model opening its answer again after the prefill
        ("<predicted_observation>\n.git/\nREADME.md\n", ".git/\nREADME.md\n"),
        ("\n**Environment Observation:**\n<predicted_observation>\nok", "ok"),
        # a second answer started before the first was closed
        ("a\n<predicted_observation>\nb", "a\n"),
        ("", ""),
    ],
)
def test_text_after_the_prefill_drops_an_echoed_tag(generated, kept):
    from simgym.worldmodels.local import _after_prefill

    assert _after_prefill(generated) == kept


def test_llama_options_are_checked_and_named_kv_types_become_codes():
    import llama_cpp

    from simgym.worldmodels.local import llama_kwargs

    got = llama_kwargs({"flash_attn": True, "type_k": "q8_0", "type_v": "F16"})
    assert got == {
        "flash_attn": True,
        "type_k": llama_cpp.GGML_TYPE_Q8_0,
        "type_v": llama_cpp.GGML_TYPE_F16,
    }
    with pytest.raises(WorldModelError, match="unknown llama option 'n_gpu'"):
        LocalWorldModel(llama_options={"n_gpu": 1})
    with pytest.raises(WorldModelError, match="unknown KV cache type 'q9'"):
        LocalWorldModel(llama_options={"type_k": "q9"})


async def test_each_call_records_decoded_tokens_and_time_in_llama():
    wm = LocalWorldModel(max_tokens=24, llama_options={"flash_attn": True})
    env = simgym.make("terminal", world_model=wm, max_tokens=24, seed=5)
    await env.reset("look around")
    await env.step("curl -sI https://example.com")  # the model renders it
    call = wm.calls[-1]  # the last attempt's call
    assert 0 < call["decoded"] <= 24
    assert call["llama_s"] > 0 and call["evaluated"] > 0
    assert env.trajectory.world_model["llama_options"] == {"flash_attn": True}
