"""The model that training starts from: a GGUF file (the embedded SmolLM2 by default) or a
Hugging Face model folder.

transformers reads a GGUF file itself, but it dequantizes every tensor and rebuilds the
tokenizer from the vocabulary in Python, which takes more than a minute on two cores. The
converted tokenizer and model are therefore saved once to a cache folder (one per file,
keyed by its path, size and modification time) and loaded from there afterwards. The
GPT-2-style tokenizer conversion of transformers 5.10 also puts the beginning-of-sequence
token where the end-of-sequence token belongs; the ids the GGUF file records are put back,
or a trained model would never learn to stop where llama.cpp stops.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgym.train.errors import TrainError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read a megabyte at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_TOKENIZER_DONE = ".simgym-tokenizer"
_CACHE_VERSION = 2  # bump when the conversion changes, so old caches are not reused
_MODEL_DONE = ".simgym-model"


def resolve_base(source: str | os.PathLike[str] | None = None) -> Path:
    """The base model's path: ``source``, or the embedded GGUF file when it is None."""
    if source is None:
        from simgym.worldmodels.local import INSTALL_HINT, embedded_model_path

        path = embedded_model_path()
        if path is None:
            raise TrainError(f"the embedded model is not installed; {INSTALL_HINT}")
        return path
    path = Path(source).expanduser()
    if not path.exists():
        raise TrainError(f"base model not found: {path}")
    if path.is_dir() and not (path / "config.json").is_file():
        raise TrainError(f"{path} is not a Hugging Face model folder (no config.json)")
    if path.is_file() and not is_gguf(path):
        raise TrainError(f"{path} is neither a GGUF file nor a model folder")
    return path


def is_gguf(path: Path) -> bool:
    """Whether ``path`` is a GGUF file (by its magic bytes, not its name)."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(4) == b"GGUF"


def cache_dir(gguf_path: Path) -> Path:
    """Where the Hugging Face conversion of one GGUF file is kept."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    stat = gguf_path.stat()
    key = f"{_CACHE_VERSION}|{gguf_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return root / "simgym" / "hf-base" / f"{gguf_path.stem}-{digest}"


def special_token_ids(gguf_path: Path) -> dict[str, int]:
    """The bos/eos/pad token ids a GGUF file declares (those it has)."""
    from gguf import GGUFReader

    reader = GGUFReader(gguf_path)
    ids = {}
    for name in ("bos", "eos", "padding"):
        field = reader.get_field(f"tokenizer.ggml.{name}_token_id")
        if field is not None:
            ids[name] = int(field.contents())
    return ids


def load_tokenizer(source: str | os.PathLike[str] | None = None) -> PreTrainedTokenizerBase:
    """The base model's tokenizer, with a pad token (the end-of-sequence token if none)."""
    from transformers import AutoTokenizer

    path = resolve_base(source)
    folder = _converted_tokenizer(path) if is_gguf(path) else path
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.eos_token is None:
        raise TrainError(f"the tokenizer of {path} has no end-of-sequence token")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def base_folder(source: str | os.PathLike[str] | None = None) -> Path:
    """A Hugging Face folder holding the base model and its tokenizer (converted and cached
    for a GGUF file, the folder itself otherwise)."""
    path = resolve_base(source)
    if not is_gguf(path):
        return path
    folder = _converted_tokenizer(path)
    if not (folder / _MODEL_DONE).exists():
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
        ids = special_token_ids(path)
        # the generation config must stop where the tokenizer (and llama.cpp) stops
        if "eos" in ids:
            model.config.eos_token_id = ids["eos"]
            model.generation_config.eos_token_id = ids["eos"]
        if "padding" in ids:
            model.config.pad_token_id = ids["padding"]
            model.generation_config.pad_token_id = ids["padding"]
        _save_into(folder, model.save_pretrained)
        (folder / _MODEL_DONE).write_text(str(path))
    return folder


def load_model(
    source: str | os.PathLike[str] | None = None, dtype: torch.dtype | None = None
) -> PreTrainedModel:
    """The base model in float32 (or ``dtype``), ready to train."""
    import torch
    from transformers import AutoModelForCausalLM

    folder = base_folder(source)
    try:
        return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32)
    except (OSError, ValueError) as exc:
        raise TrainError(f"cannot load a causal language model from {folder}: {exc}") from None


def _converted_tokenizer(gguf_path: Path) -> Path:
    folder = cache_dir(gguf_path)
    if (folder / _TOKENIZER_DONE).exists():
        return folder
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    except Exception as exc:  # transformers raises several types for unsupported files
        raise TrainError(f"transformers cannot read the tokenizer of {gguf_path}: {exc}") from None
    ids = special_token_ids(gguf_path)
    names: dict[str, Any] = {"bos": "bos_token", "eos": "eos_token", "padding": "pad_token"}
    for key, attribute in names.items():
        if key in ids:
            setattr(tokenizer, attribute, tokenizer.convert_ids_to_tokens(ids[key]))
    # a byte-level BPE decodes exactly; the WordPiece-style clean-up would only warn
    tokenizer.clean_up_tokenization_spaces = False
    _save_into(folder, tokenizer.save_pretrained)
    (folder / _TOKENIZER_DONE).write_text(str(gguf_path))
    return folder


def _save_into(folder: Path, save: Any) -> None:
    """Save into a scratch folder, then move each file into ``folder``, so a process that
    reads the cache while another writes it never sees half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".part-", dir=folder.parent))
    try:
        save(scratch)
        for item in scratch.iterdir():
            os.replace(item, folder / item.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
