"""Fast CPU inference of GGUF models through llama-cpp-python (the ``llamacpp`` extra).

One ``Llama`` instance per (file, context, threads, GPU layers) per process; calls run in a
worker thread, one at a time per instance (llama.cpp contexts are not thread-safe).
``"llamacpp"`` without a path runs the default embedded model's file (Qwen2.5-Coder-1.5B-Instruct,
:func:`._model_store.embedded_model_path`).

First-token scoring (:meth:`LlamaCppBackend.afirst_token`) reads the logits directly: the
conversation is formatted by the GGUF's own chat template, evaluated in one pass (no
sampling, no ``logits_all``), and the last position's logits are softmaxed over the whole
vocabulary; a label's probability sums the tokens whose text, stripped of whitespace, is
the label (``"A"`` and ``" A"``), exactly, with no top-list floor.

Example:
    >>> from permsc_integrations.backends.local._llamacpp import LlamaCppBackend
    >>> backend = LlamaCppBackend("/models/qwen2.5-1.5b-instruct-q4_k_m.gguf")  # doctest: +SKIP
    >>> backend.name  # doctest: +SKIP
    'llamacpp:qwen2.5-1.5b-instruct-q4_k_m.gguf'
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
import numpy as np
import numpy.typing as npt

from permsc_integrations.backends._logprobs import check_labels, label_probabilities_from_logits
from permsc_integrations.backends.base import (
    Completion,
    GenerationSettings,
    LabelProbabilities,
    Message,
)
from permsc_integrations.backends.local._model_store import embedded_model_path
from permsc_integrations.errors import (
    BackendError,
    ConfigurationError,
    ContextLengthError,
    MissingDependencyError,
)
from permsc_integrations.results import Usage

if TYPE_CHECKING:  # optional dependency (the llamacpp extra), imported where used
    from llama_cpp import Llama
    from llama_cpp.llama_types import CreateChatCompletionResponse

__all__ = ["LlamaCppBackend"]


def _require() -> ModuleType:
    try:
        # lazy: optional dependency (the llamacpp extra)
        import llama_cpp
    except ImportError as exc:
        raise MissingDependencyError(
            "llama-cpp-python", "llamacpp", purpose="llama.cpp models"
        ) from exc
    return llama_cpp


@dataclass(frozen=True, slots=True)
class _Key:
    path: str
    n_ctx: int
    n_threads: int | None
    n_gpu_layers: int


_MODELS: dict[_Key, tuple[Llama, threading.Lock]] = {}
_LOAD_LOCK = threading.Lock()


def _load(key: _Key) -> tuple[Llama, threading.Lock]:
    with _LOAD_LOCK:
        if key not in _MODELS:
            llama_cpp = _require()
            model = llama_cpp.Llama(
                model_path=key.path,
                n_ctx=key.n_ctx,
                n_threads=key.n_threads,
                n_gpu_layers=key.n_gpu_layers,
                verbose=False,
            )
            _MODELS[key] = (model, threading.Lock())
        return _MODELS[key]


def _resolve_path(model_path: str | os.PathLike[str] | None) -> Path:
    if model_path is None:
        return embedded_model_path()
    path = Path(model_path).expanduser()
    if not path.is_file():
        raise ConfigurationError(f"GGUF file not found: {str(path)!r}; give a local .gguf path")
    return path.resolve()


class LlamaCppBackend:
    """A GGUF model run by llama.cpp, behind the backend protocol.

    ``n_ctx`` is the context window in tokens (a window of 20 passages of 100 words needs
    about 3,500); ``n_threads`` defaults to llama.cpp's choice.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        max_new_tokens: int = 256,
        name: str | None = None,
    ) -> None:
        _require()
        path = _resolve_path(model_path)
        self._key = _Key(str(path), n_ctx, n_threads, n_gpu_layers)
        self.max_new_tokens = max_new_tokens
        self.name = name or f"llamacpp:{path}"

    @property
    def fingerprint(self) -> str:
        """The model file and what changes its answers (cache keys)."""
        k = self._key
        return f"llamacpp:{k.path}|n_ctx={k.n_ctx}|max_new_tokens={self.max_new_tokens}"

    def load(self) -> None:
        """Load the model now (otherwise the first call does, in a worker thread)."""
        _load(self._key)

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        return await anyio.to_thread.run_sync(self._complete, [dict(m) for m in messages], settings)

    async def afirst_token(
        self, messages: Sequence[Message], labels: Sequence[str], settings: GenerationSettings
    ) -> LabelProbabilities:
        """The first answer token's probabilities over ``labels``, from the model's logits;
        each label must be one token of this model's vocabulary (else ConfigurationError)."""
        check_labels(labels)
        chat = [dict(m) for m in messages]
        return await anyio.to_thread.run_sync(self._first_token, chat, list(labels))

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the process."""

    def _first_token(self, messages: list[dict[str, str]], labels: list[str]) -> LabelProbabilities:
        model, lock = _load(self._key)
        started = time.perf_counter()
        with lock:
            reader = _reader(self._key, model)
            ids = [reader.label_ids(model, label, self.name) for label in labels]
            tokens = model.tokenize(reader.prompt(messages).encode(), add_bos=False, special=True)
            if len(tokens) >= self._key.n_ctx:
                raise ContextLengthError(
                    f"the prompt has {len(tokens)} tokens, n_ctx is {self._key.n_ctx}; raise "
                    "n_ctx, or lower window_size or max_words"
                )
            logits = _last_logits(model, tokens)
        probabilities, mass = label_probabilities_from_logits(logits, ids)
        latency = time.perf_counter() - started
        usage = Usage(prompt_tokens=len(tokens), completion_tokens=1, calls=1, latency_s=latency)
        return LabelProbabilities(probabilities, mass, usage, self.name)

    def _complete(self, messages: list[dict[str, str]], settings: GenerationSettings) -> Completion:
        model, lock = _load(self._key)
        with lock:
            try:
                response = model.create_chat_completion(
                    messages=messages,
                    temperature=settings.temperature,
                    max_tokens=settings.max_tokens or self.max_new_tokens,
                    seed=settings.seed,
                    stop=list(settings.stop) or None,
                )
            except ValueError as exc:
                if "context" in str(exc).lower() or "tokens" in str(exc).lower():
                    raise ContextLengthError(
                        f"{exc}; raise n_ctx (now {self._key.n_ctx}), "
                        "or lower window_size or max_words"
                    ) from exc
                raise BackendError(f"llama.cpp failed: {exc}", retryable=False) from exc
        return _completion(response, self.name)


def _completion(response: CreateChatCompletionResponse, name: str) -> Completion:
    choice = response["choices"][0]
    usage = response.get("usage") or {}
    return Completion(
        text=(choice["message"].get("content") or "").strip(),
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            calls=1,
        ),
        model=name,
        finish_reason=choice.get("finish_reason"),
    )


def _last_logits(model: Llama, tokens: list[int]) -> npt.NDArray[np.float64]:
    """Evaluate ``tokens`` from a clean state; the last position's logits (one output row,
    so no ``logits_all``). A later generation reuses the evaluated prefix as usual."""
    llama_cpp = _require()
    try:
        model.reset()
        model.eval(tokens)
    except RuntimeError as exc:
        raise BackendError(f"llama.cpp failed to evaluate the prompt: {exc}") from exc
    pointer = llama_cpp.llama_get_logits_ith(model.ctx, -1)
    if not pointer:
        raise BackendError("llama.cpp returned no logits for the prompt's last token")
    return np.array(np.ctypeslib.as_array(pointer, shape=(model.n_vocab(),)), dtype=np.float64)


class _Reader:
    """A model's chat template (compiled) and its vocabulary by stripped token text, built once."""

    def __init__(self, model: Llama) -> None:
        template = model.metadata.get("tokenizer.chat_template")
        if not template:
            raise ConfigurationError(
                "this GGUF file has no chat template (tokenizer.chat_template), which "
                'first-token scoring formats the prompt with; use scoring="generate"'
            )
        # lazy: optional dependency (the llamacpp extra)
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def text(token: int) -> str:
            if token < 0:
                return ""
            return model.detokenize([token], special=True).decode("utf-8", errors="replace")

        self._format = Jinja2ChatFormatter(
            template=template, eos_token=text(model.token_eos()), bos_token=text(model.token_bos())
        )
        self._vocab: dict[str, list[int]] = {}
        for token in range(model.n_vocab()):
            piece = model.detokenize([token]).decode("utf-8", errors="replace").strip()
            if piece:
                self._vocab.setdefault(piece, []).append(token)

    def prompt(self, messages: list[dict[str, str]]) -> str:
        return str(self._format(messages=messages).prompt)

    def label_ids(self, model: Llama, label: str, name: str) -> list[int]:
        """The ids of every token that reads as ``label``; ``label`` must be one token."""
        own = model.tokenize(label.strip().encode(), add_bos=False, special=False)
        if len(own) != 1:
            raise ConfigurationError(
                f"label {label!r} is {len(own)} tokens for {name}, not one; first-token "
                "scoring needs single-token labels (such as A-Z)"
            )
        return sorted(set(self._vocab.get(label.strip(), [])) | set(own))


_READERS: dict[_Key, _Reader] = {}


def _reader(key: _Key, model: Llama) -> _Reader:
    """The model's reader (called under the model's lock)."""
    if key not in _READERS:
        _READERS[key] = _Reader(model)
    return _READERS[key]
