"""Load a GGUF file through transformers, keeping no float copy of its weights on disk.

transformers reads a GGUF's tokenizer and config by parsing every metadata field (about 25 s
for the 1.5B model on two cores) and its weights by dequantising them in small row groups.
The first load keeps the tokenizer and config (a few MB) under
``<cache>/gguf/<name>-<key>/``, the key covering the file's path, size and modification
time; every load then reads the weights straight from the GGUF (:mod:`._gguf_weights`: the
same values transformers would load, bit for bit, in about 10 s for the 1.5B model). So the
cache holds the quantised file and a few MB, not a float copy (7.1 GB in float32 for the
1.5B model, which earlier versions kept under ``<cache>/converted/``: delete that folder).
A folder is complete only once its ``manifest.json`` is written, under a file lock, so
concurrent processes never see half of one. When the cache is not writable the model still
loads, with a warning. Progress goes to this module's logger at INFO (the command line shows
it on stderr). The cache folder is that of :func:`._model_store.cache_dir`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from permsc_integrations.backends.local._gguf_weights import state_dict
from permsc_integrations.backends.local._model_store import cache_dir, locked

if TYPE_CHECKING:  # optional dependency (the local extra), imported where used
    from transformers import PretrainedConfig
    from transformers import PreTrainedTokenizerBase as Tokenizer

    from permsc_integrations.backends.local._logits import CausalLM

__all__ = ["load_gguf", "prepared_folder"]

log = logging.getLogger(__name__)


def prepared_folder(gguf: Path) -> Path:
    """Where the tokenizer and config of ``gguf`` are kept."""
    stat = gguf.stat()
    ident = f"{gguf.resolve()}\x00{stat.st_size}\x00{stat.st_mtime_ns}"
    key = hashlib.sha256(ident.encode()).hexdigest()[:20]
    return cache_dir() / "gguf" / f"{gguf.stem}-{key}"


def load_gguf(
    gguf: Path, dtype: str, torch: ModuleType, transformers: ModuleType
) -> tuple[Tokenizer, CausalLM]:
    """``(tokenizer, model)`` of ``gguf`` in ``dtype``: the tokenizer and config from the
    kept folder (kept on the first load), the weights from the file itself."""
    tokenizer, config = _tokenizer_and_config(gguf, transformers)
    size = gguf.stat().st_size / 1e9
    log.info("loading the weights of %s (%.1f GB, GGUF) in %s ...", gguf.name, size, dtype)
    began = time.perf_counter()
    weights = state_dict(gguf, config, getattr(torch, dtype), torch, transformers)
    model_class = transformers.models.auto.modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    model = model_class.from_pretrained(
        None, config=config, state_dict=weights, dtype=getattr(torch, dtype)
    )
    log.info("loaded %s in %.0f s", gguf.name, time.perf_counter() - began)
    return tokenizer, model


def _tokenizer_and_config(
    gguf: Path, transformers: ModuleType
) -> tuple[Tokenizer, PretrainedConfig]:
    folder = prepared_folder(gguf)
    if (folder / "manifest.json").is_file():
        return _from_folder(folder, transformers)
    try:
        lock = locked(folder.parent)
        lock.__enter__()
    except OSError as exc:  # a read-only cache: read them from the GGUF every time
        log.warning("cannot keep the tokenizer of %s (%s); reading it from the GGUF", gguf, exc)
        return _read(gguf, transformers)
    try:
        if (folder / "manifest.json").is_file():  # another process prepared it meanwhile
            return _from_folder(folder, transformers)
        return _prepare(gguf, folder, transformers)
    finally:
        lock.__exit__(None, None, None)


def _from_folder(folder: Path, transformers: ModuleType) -> tuple[Tokenizer, PretrainedConfig]:
    options = {"local_files_only": True}
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **options)
    return tokenizer, transformers.AutoConfig.from_pretrained(folder, **options)


def _read(gguf: Path, transformers: ModuleType) -> tuple[Tokenizer, PretrainedConfig]:
    options = {"gguf_file": gguf.name, "local_files_only": True}
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, **options)
    return tokenizer, transformers.AutoConfig.from_pretrained(gguf.parent, **options)


def _prepare(
    gguf: Path, folder: Path, transformers: ModuleType
) -> tuple[Tokenizer, PretrainedConfig]:
    log.info("reading the tokenizer and config of %s once (kept in %s) ...", gguf.name, folder)
    began = time.perf_counter()
    tokenizer, config = _read(gguf, transformers)
    try:
        _save(folder, gguf, tokenizer, config, transformers)
    except OSError as exc:  # a full disk, say: the model is loaded all the same
        log.warning("cannot keep the tokenizer of %s (%s)", gguf, exc)
    log.info("read the tokenizer and config in %.0f s", time.perf_counter() - began)
    return tokenizer, config


def _save(
    folder: Path,
    gguf: Path,
    tokenizer: Tokenizer,
    config: PretrainedConfig,
    transformers: ModuleType,
) -> None:
    work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".partial-"))
    try:
        tokenizer.save_pretrained(work)
        config.save_pretrained(work)
        manifest = {"source": str(gguf.resolve()), "transformers": transformers.__version__}
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(work, folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
