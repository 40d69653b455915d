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

from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError
from .config import Limits, ModelConfig, ServeConfig, load_models

if TYPE_CHECKING:
    from .app import create_app
    from .run import serve

__all__ = ["Limits", "ModelConfig", "ServeConfig", "load_models", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        try:
            from .app import create_app
        except ImportError as exc:  # starlette, pydantic or prometheus-client
            missing = exc.name or "a dependency"
            raise MissingDependencyError(missing, "serve", purpose="permsc serve") from exc
        return create_app
    if name == "serve":
        from .run import serve

        return serve
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
