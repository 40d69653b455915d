"""Load a GGUF file through transformers once, and a saved copy in seconds ever after.

transformers reads a GGUF by dequantising every tensor in Python: about 45 s for a 1.5B model
on two CPU cores. The first load saves the result (safetensors in the loaded dtype) under
``<cache>/converted/<key>/``, the key covering the file's path, size and modification time and
the dtype; later loads read that folder (about 3 s, the same weights bit for bit). A folder is
complete only once its ``manifest.json`` is written, under a file lock, so concurrent
processes never see half a conversion. When the cache is not writable the model still loads,
with a warning. The cache folder is that of :func:`.model_store.cache_dir`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .model_store import cache_dir, locked

__all__ = ["load_gguf", "converted_folder"]

log = logging.getLogger(__name__)


def converted_folder(gguf: Path, dtype: str) -> Path:
    """Where the conversion of ``gguf`` in ``dtype`` is kept."""
    stat = gguf.stat()
    ident = f"{gguf.resolve()}\x00{stat.st_size}\x00{stat.st_mtime_ns}\x00{dtype}"
    key = hashlib.sha256(ident.encode()).hexdigest()[:20]
    return cache_dir() / "converted" / f"{gguf.stem}-{dtype}-{key}"


def _from_folder(folder: Path, dtype: Any, transformers: Any) -> tuple[Any, Any]:
    options: dict[str, Any] = {"local_files_only": True}
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **options)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **options)
    return tokenizer, model


def _save(folder: Path, gguf: Path, tokenizer: Any, model: Any, transformers: Any) -> None:
    work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".partial-"))
    try:
        model.hf_quantizer = None  # the loaded weights are plain tensors already
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(work)
        tokenizer.save_pretrained(work)
        manifest = {"source": str(gguf.resolve()), "transformers": transformers.__version__}
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(work, folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def load_gguf(gguf: Path, dtype: str, torch: Any, transformers: Any) -> tuple[Any, Any]:
    """``(tokenizer, model)`` of ``gguf`` in ``dtype``, from the saved conversion if any."""
    folder = converted_folder(gguf, dtype)
    if (folder / "manifest.json").is_file():
        return _from_folder(folder, getattr(torch, dtype), transformers)
    try:
        lock = locked(folder.parent)
        lock.__enter__()
    except OSError as exc:  # a read-only cache: load without keeping a copy
        log.warning("cannot keep a converted copy of %s (%s); loading the GGUF as is", gguf, exc)
        return _read(gguf, dtype, torch, transformers)
    try:
        if (folder / "manifest.json").is_file():  # another process converted it meanwhile
            return _from_folder(folder, getattr(torch, dtype), transformers)
        return _convert(gguf, folder, dtype, torch, transformers)
    finally:
        lock.__exit__(None, None, None)


def _read(gguf: Path, dtype: str, torch: Any, transformers: Any) -> tuple[Any, Any]:
    options: dict[str, Any] = {"gguf_file": gguf.name, "local_files_only": True}
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, **options)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        gguf.parent, dtype=getattr(torch, dtype), **options
    )
    return tokenizer, model


def _convert(
    gguf: Path, folder: Path, dtype: str, torch: Any, transformers: Any
) -> tuple[Any, Any]:
    log.info("converting %s once (later loads read %s)", gguf, folder)
    tokenizer, model = _read(gguf, dtype, torch, transformers)
    try:
        _save(folder, gguf, tokenizer, model, transformers)
    except OSError as exc:  # a full disk, say: the model is loaded all the same
        log.warning("cannot keep a converted copy of %s (%s)", gguf, exc)
    return tokenizer, model
