"""The embedded models, by name: run offline from files inside installed PyPI packages.

- ``embedded:qwen2.5-coder-1.5b`` (the default, plain ``embedded``): Qwen2.5-Coder-1.5B-Instruct,
  a model small enough for two CPU cores that does rank (docs/reproduction.md);
- ``embedded:smollm2-135m``: SmolLM2-135M-Instruct, fast but unable to rank (tests, smoke runs).

Files come from :mod:`._model_store` (assembled and hash-checked once into the per-user cache;
never downloaded) and run through transformers (the weights read straight from the GGUF,
no float copy kept: :mod:`._gguf_cache`), or through llama.cpp with ``engine="llamacpp"`` (the
``llamacpp`` extra). ``"embedded:<engine>"`` (``transformers`` or ``llamacpp``) still names an
engine for the default model.

Example:
    >>> from permsc_integrations.backends.local._embedded import embedded_names
    >>> embedded_names()
    ['qwen2.5-coder-1.5b', 'smollm2-135m']
"""

from __future__ import annotations

from typing import Any

from permsc_integrations.backends.local._llamacpp import LlamaCppBackend
from permsc_integrations.backends.local._model_store import (
    EMBEDDED_MODELS,
    default_model,
    embedded_model_path,
    gguf_path,
)
from permsc_integrations.backends.local.transformers import TransformersBackend
from permsc_integrations.errors import ConfigurationError

__all__ = ["embedded_backend", "embedded_model_path", "embedded_names"]

_ENGINES = ("transformers", "llamacpp")


def embedded_names() -> list[str]:
    """The embedded model names, sorted."""
    return sorted(EMBEDDED_MODELS)


def model_and_engine(model: str | None, engine: str | None) -> tuple[str, str]:
    name = (model or "").strip().lower()
    if name in _ENGINES and engine is None:  # "embedded:llamacpp": an engine, default model
        name, engine = "", name
    engine = (engine or "transformers").lower()
    if engine not in _ENGINES:
        raise ConfigurationError(
            f"unknown engine {engine!r} for the embedded models; available: {', '.join(_ENGINES)}"
        )
    return name or default_model(), engine


def embedded_backend(
    model: str | None = None, *, engine: str | None = None, **options: Any
) -> TransformersBackend | LlamaCppBackend:
    """A backend on embedded model ``model`` (see the module docstring).

    ``options`` go to the backend (``device=``, ``dtype=``, ``max_new_tokens=``, ...).
    """
    name, engine = model_and_engine(model, engine)
    if name not in EMBEDDED_MODELS:
        raise ConfigurationError(
            f"unknown embedded model {name!r}; available: {', '.join(embedded_names())}"
        )
    if engine == "llamacpp":
        return LlamaCppBackend(gguf_path(name), name=f"embedded:{name}:llamacpp", **options)
    return TransformersBackend(gguf_path(name), name=f"embedded:{name}", **options)


# what the options may name (those of TransformersBackend and LlamaCppBackend), so that a typo
# in backend_options is refused when the ranker is built (backends.check_backend_options)
embedded_backend.accepted_options = (  # type: ignore[attr-defined]
    "engine",
    "device",
    "dtype",
    "max_new_tokens",
    "batch_size",
    "n_ctx",
    "n_threads",
    "n_gpu_layers",
)
