"""A LoRA adapter as a GGUF adapter file, applied by llama.cpp on top of its base
(``simgym train export-gguf --adapter``; llama-cpp-python: ``Llama(model_path=BASE,
lora_path=ADAPTER)``).

A rank-16 adapter of the 135M model is about 10 MB in f16, small enough to ship in the
repository next to a base that users install anyway. llama.cpp reads, per adapted matrix
``W`` (GGUF name ``blk.N.attn_q.weight`` etc.), the tensors ``<name>.lora_a`` (rank x in)
and ``<name>.lora_b`` (out x rank), and scales their product by ``alpha / rank`` as peft
does; the file says ``general.type = adapter``, ``adapter.type = lora`` and the alpha. The
query and key matrices' rows are in llama.cpp's rotary order in the base file, so their
``lora_b`` rows are reordered the same way (``W = B A`` permuted by rows is ``(P B) A``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from simgym.train.base import base_folder
from simgym.train.errors import TrainError
from simgym.train.gguf_export import adapter_base, finish_file, rotary_heads, rotary_permute

ADAPTER_TYPES = ("f32", "f16")
_PREFIX = "base_model.model."


def export_adapter_gguf(
    adapter: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    out_type: str = "f16",
    base: str | os.PathLike[str] | None = None,
) -> Path:
    """Write the peft LoRA adapter in folder ``adapter`` as a GGUF adapter file. ``base``
    is the model it was trained on (default: the run's base, from its manifest)."""
    import gguf
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig

    adapter = Path(adapter)
    if out_type not in ADAPTER_TYPES:
        raise TrainError(f"an adapter is written as {' or '.join(ADAPTER_TYPES)}, not {out_type!r}")
    settings = _adapter_settings(adapter)
    config = AutoConfig.from_pretrained(
        base_folder(base if base is not None else adapter_base(adapter))
    )
    if config.model_type != "llama":
        raise TrainError(f"only llama-architecture adapters can be exported ({config.model_type})")
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_name(out.name + ".part")
    writer = gguf.GGUFWriter(scratch, "llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(settings["lora_alpha"]))
    writer.add_name(f"simgym LoRA adapter ({adapter.name})")
    with torch.no_grad():
        for key in sorted(weights):
            module, part = _split(key)
            gguf_name = names.get_name(f"{module}.weight", try_suffixes=(".weight",))
            if gguf_name is None:
                raise TrainError(f"no GGUF name for adapted module {module!r}")
            data = weights[key].to(torch.float32).numpy()
            heads = rotary_heads(module, config) if part == "lora_b" else None
            if heads is not None:
                data = rotary_permute(data, heads)
            data = data.astype("float16" if out_type == "f16" else "float32")
            writer.add_tensor(f"{gguf_name}.{part}", data)
    return finish_file(writer, scratch, out)


def _adapter_settings(adapter: Path) -> dict[str, Any]:
    path = adapter / "adapter_config.json"
    if not path.is_file() or not (adapter / "adapter_model.safetensors").is_file():
        raise TrainError(
            f"{adapter} is not a LoRA adapter folder (adapter_config.json and "
            "adapter_model.safetensors)"
        )
    settings = json.loads(path.read_text(encoding="utf-8"))
    unsupported = {
        "peft_type": settings.get("peft_type") not in (None, "LORA"),
        "use_rslora": bool(settings.get("use_rslora")),
        "use_dora": bool(settings.get("use_dora")),
        "modules_to_save": bool(settings.get("modules_to_save")),
        "rank_pattern": bool(settings.get("rank_pattern")),
        "alpha_pattern": bool(settings.get("alpha_pattern")),
        "bias": settings.get("bias", "none") != "none",
    }
    found = [name for name, bad in unsupported.items() if bad]
    if found:
        raise TrainError(
            f"llama.cpp adapters support plain LoRA only; {adapter} uses {', '.join(found)}"
        )
    return settings


def _split(key: str) -> tuple[str, str]:
    """``base_model.model.X.lora_A.weight`` -> (``X``, ``lora_a``)."""
    name = key.removeprefix(_PREFIX)
    for marker, part in ((".lora_A.weight", "lora_a"), (".lora_B.weight", "lora_b")):
        if name.endswith(marker):
            return name[: -len(marker)], part
    raise TrainError(f"unexpected tensor {key!r} in the adapter (only LoRA A/B are supported)")
