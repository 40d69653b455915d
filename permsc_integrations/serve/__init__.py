"""``permsc serve``: PSC behind a Cohere-compatible rerank API (``POST /v2/rerank``).

Any client of Cohere's rerank API (the ``cohere`` SDK's ``ClientV2``, LangChain's and
LlamaIndex's ``CohereRerank``, Haystack's ``CohereRanker``, LiteLLM's proxy) gets permutation
self-consistency by pointing its base URL here. Needs the ``serve`` extra (starlette,
uvicorn, pydantic, prometheus-client); this package imports them only when an app is built.
See ``docs/serve.md``.

Example:
    >>> from permsc_integrations.serve import ModelConfig, ServeConfig
    >>> config = ServeConfig(models=(ModelConfig("psc", "openai:gpt-4o-mini"),))
    >>> config.model_names
    ('psc',)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from permsc_integrations.serve._config import Limits, ModelConfig, ServeConfig, load_models
from permsc_integrations.serve._scoring import relevance_scores

if TYPE_CHECKING:
    from permsc_integrations.serve._app import create_app
    from permsc_integrations.serve._run import serve

__all__ = [
    "ModelConfig",
    "ServeConfig",
    "Limits",
    "load_models",
    "create_app",
    "serve",
    "relevance_scores",
]


def __getattr__(name: str) -> object:
    if name == "create_app":
        # lazy: starlette, pydantic and prometheus-client (the serve extra) load with the app
        from permsc_integrations.serve._run import load_app

        return load_app()
    if name == "serve":
        # lazy: uvicorn and the app load when a server starts
        from permsc_integrations.serve._run import serve

        return serve
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
