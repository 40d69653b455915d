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

from permsc_integrations._registry import lazy_exports, publish
from permsc_integrations.serve._config import Limits, ModelConfig, ServeConfig, load_models
from permsc_integrations.serve._scoring import SCALES as SCALES
from permsc_integrations.serve._scoring import relevance_scores
from permsc_integrations.serve._scoring import score_documents as score_documents

if TYPE_CHECKING:
    from permsc_integrations.serve._app import create_app
    from permsc_integrations.serve._auth import ENV_KEYS as ENV_KEYS
    from permsc_integrations.serve._auth import KeyRing as KeyRing
    from permsc_integrations.serve._auth import Unauthorized as Unauthorized
    from permsc_integrations.serve._auth import load_keys as load_keys
    from permsc_integrations.serve._bodies import read_body as read_body
    from permsc_integrations.serve._browsers import BrowserGuard as BrowserGuard
    from permsc_integrations.serve._errors import HttpError as HttpError
    from permsc_integrations.serve._errors import http_error as http_error
    from permsc_integrations.serve._logs import configure_logging as configure_logging
    from permsc_integrations.serve._run import serve
    from permsc_integrations.serve._schemas import BadRequest as BadRequest
    from permsc_integrations.serve._schemas import explain as explain
    from permsc_integrations.serve._slots import Busy as Busy
    from permsc_integrations.serve._slots import KeySlots as KeySlots

__all__ = [
    "ModelConfig",
    "ServeConfig",
    "Limits",
    "load_models",
    "create_app",
    "serve",
    "relevance_scores",
]

# Besides __all__, the parts ``permsc serve``/``permsc mcp`` (cli, mcp_server) build on: the
# core's internal API of this package, loaded on first use (starlette, pydantic: the extra).
_INTERNAL = {
    "serve": "permsc_integrations.serve._run",
    "ENV_KEYS": "permsc_integrations.serve._auth",
    "KeyRing": "permsc_integrations.serve._auth",
    "Unauthorized": "permsc_integrations.serve._auth",
    "load_keys": "permsc_integrations.serve._auth",
    "read_body": "permsc_integrations.serve._bodies",
    "BrowserGuard": "permsc_integrations.serve._browsers",
    "HttpError": "permsc_integrations.serve._errors",
    "http_error": "permsc_integrations.serve._errors",
    "configure_logging": "permsc_integrations.serve._logs",
    "BadRequest": "permsc_integrations.serve._schemas",
    "explain": "permsc_integrations.serve._schemas",
    "Busy": "permsc_integrations.serve._slots",
    "KeySlots": "permsc_integrations.serve._slots",
}
_load = lazy_exports(__name__, _INTERNAL, public=__all__)
publish(__name__, *(globals()[name] for name in __all__ if name in globals()))


def __getattr__(name: str) -> object:
    if name == "create_app":
        # lazy: starlette, pydantic and prometheus-client (the serve extra) load with the app
        from permsc_integrations.serve._run import load_app

        app = load_app()
        publish(__name__, app)
        return app
    # lazy: uvicorn and the app load when a server starts
    return _load(name)
