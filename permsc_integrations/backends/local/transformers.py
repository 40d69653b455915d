"""Local generation with Hugging Face transformers: a model directory or a GGUF file.

The m permuted prompts of a window go through one left-padded ``generate`` call (greedy at
temperature 0), so PSC costs about one batched pass instead of m calls. At temperature 0 a row
that falls into a loop is stopped early (:mod:`._repetition`, finish reason ``"loop"``), so one
looping answer no longer holds the whole batch to the token cap. Files are read with
``local_files_only=True``: nothing is ever downloaded. The model loads once per process per
(path, gguf file, device, dtype) and generation runs in a worker thread, one at a time per model.

Example:
    >>> from permsc_integrations.backends.local.transformers import TransformersBackend
    >>> backend = TransformersBackend("/models/Qwen2.5-1.5B-Instruct")  # doctest: +SKIP
    >>> backend.name  # doctest: +SKIP
    'transformers:/models/Qwen2.5-1.5B-Instruct'
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import anyio

from permsc_integrations._checks import at_least
from permsc_integrations._registry import publish
from permsc_integrations.backends.base import (
    Completion,
    GenerationSettings,
    LabelProbabilities,
    Message,
)
from permsc_integrations.backends.local._gguf_cache import load_gguf
from permsc_integrations.backends.local._loading import (
    auto_device,
    quiet_loading,
    require,
    split_path,
)
from permsc_integrations.backends.local._logits import CausalLM, chat_text, score_chunk
from permsc_integrations.backends.local._repetition import LoopStop
from permsc_integrations.errors import (
    BackendError,
    ConfigurationError,
    ContextLengthError,
)
from permsc_integrations.results import Usage

if TYPE_CHECKING:  # optional dependencies (the local extra), imported where used
    from torch import Tensor
    from torch import dtype as DType
    from transformers import GenerationConfig
    from transformers import PreTrainedTokenizerBase as Tokenizer

__all__ = ["TransformersBackend", "auto_device"]

publish(__name__, auto_device)


@dataclass(frozen=True, slots=True)
class _Key:
    path: str
    gguf_file: str | None
    device: str
    dtype: str


@dataclass(frozen=True, slots=True)
class _Loaded:
    model: CausalLM
    tokenizer: Tokenizer
    lock: threading.Lock


_MODELS: dict[_Key, _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def clear_model_cache() -> None:
    """Forget every loaded model (frees its memory once no backend holds it)."""
    with _LOAD_LOCK:
        _MODELS.clear()


def _read(key: _Key, torch: ModuleType, transformers: ModuleType) -> tuple[Tokenizer, CausalLM]:
    """``(tokenizer, model)`` from the directory, or from the GGUF via its saved conversion."""
    with quiet_loading(transformers):
        if key.gguf_file:
            return load_gguf(Path(key.path) / key.gguf_file, key.dtype, torch, transformers)
        options = {"local_files_only": True}
        tokenizer = transformers.AutoTokenizer.from_pretrained(key.path, **options)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            key.path, dtype=getattr(torch, key.dtype), **options
        )
        return tokenizer, model


def _load(key: _Key) -> _Loaded:
    with _LOAD_LOCK:
        if key in _MODELS:
            return _MODELS[key]
        torch, transformers = require()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            tokenizer, model = _read(key, torch, transformers)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot load local model {key.path!r}: {exc}") from exc
        model.to(key.device).eval()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        loaded = _MODELS[key] = _Loaded(model, tokenizer, threading.Lock())
        return loaded


class TransformersBackend:
    """A local causal LM behind the backend protocol, with batched generation.

    ``model`` is a model directory or a ``.gguf`` file (or a directory plus ``gguf_file``).
    ``batch_size`` caps how many prompts share one ``generate`` call (``None``: all of them).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None,
        *,
        gguf_file: str | None = None,
        device: str | None = None,
        dtype: str | DType | None = None,
        max_new_tokens: int = 256,
        batch_size: int | None = None,
        name: str | None = None,
    ) -> None:
        if model is None:
            raise ConfigurationError(
                "the transformers backend needs a model: 'transformers:/path/to/model-dir' "
                "or 'transformers:/path/to/model.gguf' (or use 'embedded')"
            )
        at_least(1, optional=True)("batch_size", batch_size)
        path, gguf = split_path(model, gguf_file)
        device, dtype_name = auto_device(device, dtype)
        self._key = _Key(path, gguf, device, dtype_name)
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.name = name or "transformers:" + (str(Path(path) / gguf) if gguf else path)

    @property
    def fingerprint(self) -> str:
        """The model files and what changes their answers: dtype, device, answer cap."""
        k = self._key
        return (
            f"transformers:{k.path}|gguf={k.gguf_file}|dtype={k.dtype}|device={k.device}"
            f"|max_new_tokens={self.max_new_tokens}"
        )

    @property
    def device(self) -> str:
        return self._key.device

    @property
    def dtype(self) -> str:
        return self._key.dtype

    def load(self) -> None:
        """Load the model now (otherwise the first call does, in a worker thread)."""
        _load(self._key)

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        return (await self.acomplete_batch([messages], settings))[0]

    async def acomplete_batch(
        self, batch: Sequence[Sequence[Message]], settings: GenerationSettings
    ) -> list[Completion]:
        """Answer every conversation of ``batch``; one ``generate`` per ``batch_size`` chunk."""
        if not batch:
            return []
        size = self.batch_size or len(batch)
        out: list[Completion] = []
        for start in range(0, len(batch), size):
            chunk = [list(map(dict, m)) for m in batch[start : start + size]]
            out += await anyio.to_thread.run_sync(self._generate, chunk, settings)
        return out

    async def afirst_token(
        self, messages: Sequence[Message], labels: Sequence[str], settings: GenerationSettings
    ) -> LabelProbabilities:
        return (await self.afirst_token_batch([messages], labels, settings))[0]

    async def afirst_token_batch(
        self,
        batch: Sequence[Sequence[Message]],
        labels: Sequence[str],
        settings: GenerationSettings,
    ) -> list[LabelProbabilities]:
        """The first token's probabilities over ``labels`` for every conversation of
        ``batch``: one left-padded forward pass per ``batch_size`` chunk (:mod:`._logits`)."""
        size = self.batch_size or len(batch) or 1
        out: list[LabelProbabilities] = []
        for start in range(0, len(batch), size):
            chunk = [list(map(dict, m)) for m in batch[start : start + size]]
            out += await anyio.to_thread.run_sync(self._score, chunk, tuple(labels))
        return out

    def _score(
        self, chunk: list[list[dict[str, str]]], labels: tuple[str, ...]
    ) -> list[LabelProbabilities]:
        loaded = _load(self._key)
        try:
            return score_chunk(loaded, chunk, labels, self.device, self.name, _check_context)
        except (RuntimeError, IndexError) as exc:  # OOM, position overflow, ...
            raise _classify(exc, loaded.model) from exc

    async def aclose(self) -> None:
        """Nothing to release: the model stays cached for the process (see clear_model_cache)."""

    def _generate(
        self, chunk: list[list[dict[str, str]]], settings: GenerationSettings
    ) -> list[Completion]:
        loaded = _load(self._key)
        with loaded.lock:
            started = time.perf_counter()
            try:
                rows, prompt_lens, looped = self._run(loaded, chunk, settings)
            except (RuntimeError, IndexError) as exc:  # OOM, position overflow, ...
                raise _classify(exc, loaded.model) from exc
            per_call = (time.perf_counter() - started) / len(chunk)
        return [
            self._completion(loaded, row, n, per_call, settings, i in looped)
            for i, (row, n) in enumerate(zip(rows, prompt_lens, strict=True))
        ]

    def _run(
        self, loaded: _Loaded, chunk: list[list[dict[str, str]]], settings: GenerationSettings
    ) -> tuple[list[Tensor], list[int], set[int]]:
        """The generated ids of each row, its prompt length, and the rows cut in a loop."""
        torch, transformers = require()
        tok = loaded.tokenizer
        texts = [chat_text(tok, m) for m in chunk]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            self.device
        )
        max_new = settings.max_tokens or self.max_new_tokens
        width = enc["input_ids"].shape[1]
        _check_context(loaded.model, width, max_new)
        sample = settings.temperature > 0
        if sample and settings.seed is not None:
            torch.manual_seed(settings.seed)
        loops = LoopStop(torch, width, _eos_ids(loaded))
        with torch.inference_mode():
            out = loaded.model.generate(
                **enc,
                generation_config=_config(transformers, loaded, settings, max_new),
                stopping_criteria=transformers.StoppingCriteriaList([] if sample else [loops]),
            )
        rows = [row[: loops.cut.get(i)] for i, row in enumerate(out[:, width:].cpu())]
        return rows, enc["attention_mask"].sum(dim=1).tolist(), set(loops.cut)

    def _completion(
        self,
        loaded: _Loaded,
        row: Tensor,
        prompt_tokens: int,
        latency: float,
        settings: GenerationSettings,
        looped: bool,
    ) -> Completion:
        """``finish_reason``: "stop" (the model ended), "loop" (cut in a loop, see
        :mod:`._repetition`) or "length" (the token cap)."""
        ids = row.tolist()
        eos = set(_eos_ids(loaded))
        end = next((i for i, t in enumerate(ids) if t in eos), None)
        kept = ids if end is None else ids[:end]
        text = loaded.tokenizer.decode(kept, skip_special_tokens=True)
        assert isinstance(text, str)  # one row's ids: one text (transformers types every form)
        finish = "stop" if end is not None else "loop" if looped else "length"
        for stop in settings.stop:
            if stop and stop in text:
                text, finish = text[: text.index(stop)], "stop"
        usage = Usage(
            prompt_tokens=int(prompt_tokens),
            completion_tokens=len(ids) if end is None else end + 1,
            calls=1,
            latency_s=latency,
        )
        return Completion(text=text.strip(), usage=usage, model=self.name, finish_reason=finish)


def _config(
    transformers: ModuleType, loaded: _Loaded, settings: GenerationSettings, max_new: int
) -> GenerationConfig:
    """Greedy at temperature 0, else sampling at ``settings.temperature``."""
    sample = settings.temperature > 0
    return transformers.GenerationConfig(
        max_new_tokens=max_new,
        do_sample=sample,
        temperature=settings.temperature if sample else None,
        top_p=None,
        top_k=None,
        pad_token_id=loaded.tokenizer.pad_token_id,
        eos_token_id=_eos_ids(loaded),
    )


def _eos_ids(loaded: _Loaded) -> list[int]:
    ids = loaded.model.generation_config.eos_token_id
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    tok_eos = loaded.tokenizer.eos_token_id
    return ids + ([tok_eos] if tok_eos is not None and tok_eos not in ids else [])


def _check_context(model: CausalLM, prompt_len: int, max_new: int) -> None:
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit and prompt_len + max_new > limit:
        raise ContextLengthError(
            f"prompt of {prompt_len} tokens + {max_new} new tokens exceeds the local model's "
            f"context of {limit}; lower window_size or max_words"
        )


def _classify(exc: Exception, model: CausalLM) -> BackendError:
    text = str(exc)
    limit = getattr(model.config, "max_position_embeddings", None)
    if "out of memory" in text.lower():
        return BackendError(
            f"local model ran out of memory: {text}; set batch_size lower", retryable=False
        )
    if isinstance(exc, IndexError) or "position" in text.lower():
        return ContextLengthError(f"prompt too long for the local model (context {limit}): {text}")
    return BackendError(f"local generation failed: {text}", retryable=False)
