"""Trained weights back to a GGUF file that llama.cpp (the ``local`` backend) runs
(``simgym train export-gguf``).

The model is a training output (``final/`` or a ``checkpoint-N/`` folder; a LoRA adapter
is merged into its base first), any llama-architecture Hugging Face folder, or a GGUF file
itself (which makes a round trip: GGUF -> transformers -> GGUF). The file is written with
the ``gguf`` package:

- metadata from a template GGUF file (the run's base when it was one, else the embedded
  model): the tokenizer (vocabulary, merges, special ids, chat template) and the general
  fields, copied as they are; the architecture's hyperparameters are written from the
  model's config instead, so a resized model stays consistent;
- tensors named as llama.cpp expects (``gguf``'s own name map), the query and key
  projections reordered into the rotary layout llama.cpp uses (transformers undoes the same
  permutation when it reads a GGUF file), norms in float32 and the matrices in ``f32``,
  ``f16``, ``bf16`` or ``q8_0``.

The template's vocabulary must be the model's: the exporter compares them token by token.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgym.train.base import is_gguf, load_model, resolve_base
from simgym.train.errors import TrainError

if TYPE_CHECKING:
    import numpy as np
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

OUT_TYPES = ("f32", "f16", "bf16", "q8_0")
# Keys the writer produces itself, or that describe the template's own tensors.
_SKIPPED_KEYS = ("GGUF.", "general.architecture", "general.file_type", "general.alignment")
_SKIPPED_KEYS += ("general.quantization_version",)


def load_trained(path: str | os.PathLike[str]) -> PreTrainedModel:
    """A trained model in float32: a full model folder, a GGUF file, or a LoRA adapter
    folder (merged into its base, which is found from the run's manifest)."""
    from simgym.train.sft import read_manifest

    path = Path(path)
    if not path.exists():
        raise TrainError(f"model not found: {path}")
    if (path / "adapter_config.json").is_file():
        from peft import PeftModel

        base = adapter_base(path)
        model = PeftModel.from_pretrained(load_model(base), str(path))
        return model.merge_and_unload()
    if path.is_dir() and not (path / "config.json").is_file() and read_manifest(path):
        raise TrainError(f"{path} is a training run folder; name its final/ or a checkpoint-N/")
    return load_model(path)


def adapter_base(adapter: Path) -> str | None:
    """The base an adapter was trained on: the run's ``base`` setting (None: the embedded
    model), else the local folder its config names."""
    from simgym.train.sft import read_manifest

    manifest = read_manifest(adapter)
    if manifest is not None:
        return manifest["options"].get("base")
    config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    base = config.get("base_model_name_or_path")
    if not base or not Path(base).exists():
        raise TrainError(
            f"the base model of adapter {adapter} ({base!r}) is not a local folder; "
            "export from the training run's final/ folder"
        )
    return base


def template_for(path: str | os.PathLike[str]) -> Path:
    """The GGUF file whose metadata an export of ``path`` copies: the file itself, the
    run's base if it was a GGUF file, else the embedded model."""
    from simgym.train.sft import read_manifest

    path = Path(path)
    if is_gguf(path):
        return path
    manifest = read_manifest(path)
    if manifest is not None:
        base = resolve_base(manifest["options"].get("base"))
        if is_gguf(base):
            return base
    return resolve_base(None)


@dataclass
class Exported:
    """A written GGUF file and what it was made from (for checking it)."""

    path: Path
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    template: Path


def export_gguf(
    model: str | os.PathLike[str] | PreTrainedModel,
    out: str | os.PathLike[str],
    *,
    out_type: str = "f16",
    template: str | os.PathLike[str] | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    name: str | None = None,
) -> Exported:
    """Write ``model`` (a path for :func:`load_trained`, or a loaded model) to ``out``.
    ``template`` is the GGUF file to take metadata from (default: :func:`template_for`, or
    the embedded model for a loaded model); ``tokenizer`` (default: the one saved with the
    model, else the template's) must match the template's vocabulary."""
    from simgym.train.base import load_tokenizer

    if out_type not in OUT_TYPES:
        raise TrainError(f"unknown GGUF type {out_type!r}; choose one of {', '.join(OUT_TYPES)}")
    if isinstance(model, str | os.PathLike):
        source = Path(model)
        template_path = Path(template) if template else template_for(source)
        tokenizer = tokenizer or saved_tokenizer(source)
        model = load_trained(source)
    else:
        template_path = Path(template) if template else resolve_base(None)
    if not is_gguf(template_path):
        raise TrainError(f"template is not a GGUF file: {template_path}")
    tokenizer = tokenizer or load_tokenizer(template_path)
    path = write_gguf(model, Path(out), template_path, out_type, tokenizer=tokenizer, name=name)
    return Exported(path=path, model=model, tokenizer=tokenizer, template=template_path)


def saved_tokenizer(source: Path) -> PreTrainedTokenizerBase | None:
    """The tokenizer saved in a model folder, if there is one."""
    if not source.is_dir() or not (source / "tokenizer_config.json").is_file():
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source)


def write_gguf(
    model: PreTrainedModel,
    out: Path,
    template: Path,
    out_type: str = "f16",
    *,
    tokenizer: PreTrainedTokenizerBase | None = None,
    name: str | None = None,
) -> Path:
    """Write a llama-architecture model to ``out`` with ``template``'s metadata."""
    import gguf
    import torch

    config = model.config
    if getattr(config, "model_type", None) != "llama":
        raise TrainError(
            f"only llama-architecture models can be exported (this one is {config.model_type!r})"
        )
    rope = getattr(config, "rope_parameters", None) or {}
    if rope.get("rope_type", "default") != "default":
        raise TrainError(f"rope scaling {rope.get('rope_type')!r} is not supported by the exporter")
    reader = read_template(template)
    arch = str(reader.get_field("general.architecture").contents())
    if arch != "llama":
        raise TrainError(f"template {template} is a {arch!r} model, not llama")
    _check_vocabulary(reader, config.vocab_size, tokenizer, template)

    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_name(out.name + ".part")
    writer = gguf.GGUFWriter(scratch, arch)
    _copy_metadata(writer, reader, arch)
    _write_hyperparameters(writer, config, rope)
    if name:
        writer.add_name(name)
    qtype, file_type = _types(out_type)
    writer.add_file_type(file_type)
    if qtype == gguf.GGMLQuantizationType.Q8_0:
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    with torch.no_grad():
        for hf_name, tensor in model.state_dict().items():
            if tied and hf_name == "lm_head.weight":
                continue  # llama.cpp reuses token_embd when there is no output tensor
            gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if gguf_name is None:
                raise TrainError(f"no GGUF name for tensor {hf_name!r}")
            data = tensor.detach().to(torch.float32).cpu().numpy()
            heads = rotary_heads(hf_name.removesuffix(".weight"), config)
            if heads is not None:
                data = rotary_permute(data, heads)
            _add_tensor(writer, gguf_name, data, qtype)
    return finish_file(writer, scratch, out)


def rotary_heads(module: str, config: Any) -> int | None:
    """The head count to reorder a module's output rows by: query and key projections
    only (their rows are in rotary order), None for every other module."""
    if module.endswith("self_attn.q_proj"):
        return config.num_attention_heads
    if module.endswith("self_attn.k_proj"):
        return config.num_key_value_heads
    return None


def finish_file(writer: Any, scratch: Path, out: Path) -> Path:
    """Write a GGUF writer's file to ``scratch``, then move it to ``out`` (so a reader
    never sees half a file)."""
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    scratch.replace(out)
    return out


def read_template(path: Path) -> Any:
    """A template file's reader. Parsing a vocabulary of 49k tokens takes seconds, so a
    reader is kept per file version for the next export in the same process."""
    stat = path.stat()
    return _reader(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=2)
def _reader(path: str, mtime_ns: int, size: int) -> Any:
    import gguf

    return gguf.GGUFReader(path)


def rotary_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Reorder a query or key projection's output rows from Hugging Face's rotary layout
    (each head's first half of dimensions, then its second half) to llama.cpp's
    (the halves interleaved in pairs)."""
    rows = weight.shape[0]
    half = rows // heads // 2
    return weight.reshape(heads, 2, half, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _types(out_type: str) -> tuple[Any, int]:
    import gguf

    q, f = gguf.GGMLQuantizationType, gguf.LlamaFileType
    return {
        "f32": (q.F32, f.ALL_F32),
        "f16": (q.F16, f.MOSTLY_F16),
        "bf16": (q.BF16, f.MOSTLY_BF16),
        "q8_0": (q.Q8_0, f.MOSTLY_Q8_0),
    }[out_type]


def _add_tensor(writer: Any, name: str, data: np.ndarray, qtype: Any) -> None:
    import gguf
    import numpy as np

    q = gguf.GGMLQuantizationType
    if data.ndim < 2 or qtype == q.F32:
        # llama.cpp wants norms (1-D) in float32 whatever the file's type
        writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
    elif qtype == q.F16:
        writer.add_tensor(name, data.astype(np.float16))
    else:
        block = gguf.GGML_QUANT_SIZES[qtype][0]
        if data.shape[-1] % block:  # rows that do not split into blocks stay half precision
            writer.add_tensor(name, data.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)


def _copy_metadata(writer: Any, reader: Any, arch: str) -> None:
    import gguf

    for key, field in reader.fields.items():
        if key.startswith(_SKIPPED_KEYS) or key.startswith(f"{arch}."):
            continue
        kind = field.types[0]
        value = field.contents()
        if kind == gguf.GGUFValueType.ARRAY:
            if len(field.types) != 2:
                raise TrainError(f"cannot copy nested array metadata {key!r}")
            writer.add_key_value(key, value, kind, sub_type=field.types[1])
        else:
            writer.add_key_value(key, value, kind)


def _write_hyperparameters(writer: Any, config: Any, rope: dict[str, Any]) -> None:
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    writer.add_vocab_size(config.vocab_size)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_head_count(heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(theta))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_rope_dimension_count(head_dim)
    if head_dim != config.hidden_size // heads:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)


def _check_vocabulary(
    reader: Any, vocab_size: int, tokenizer: PreTrainedTokenizerBase | None, template: Path
) -> None:
    field = reader.get_field("tokenizer.ggml.tokens")
    if field is None:
        raise TrainError(f"template {template} has no tokenizer")
    tokens = field.contents()
    if len(tokens) != vocab_size:
        raise TrainError(
            f"template {template} has {len(tokens)} tokens but the model's vocabulary is "
            f"{vocab_size}; pass the GGUF file the model was trained from as the template"
        )
    if tokenizer is not None:
        mine = tokenizer.convert_ids_to_tokens(list(range(len(tokens))))
        pairs = enumerate(zip(mine, tokens, strict=True))
        differ = next((i for i, (a, b) in pairs if a != b), None)
        if differ is not None:
            raise TrainError(
                f"the model's tokenizer differs from template {template}'s at id {differ} "
                f"({mine[differ]!r} vs {tokens[differ]!r})"
            )
