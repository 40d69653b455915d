"""The OpenAI-compatible backend: the client (:mod:`.backend`), one HTTP client per event loop
(:mod:`.client_per_loop`) and the chat-completion JSON reader (:mod:`.chat_json`).

``permsc_integrations.backends.openai`` stays the public import path of :class:`OpenAIBackend`
(it was one module before the backends were split into folders).
"""

from .._http_errors import map_openai_error
from ._backend import OpenAIBackend
from ._chat_json import completion_from_json

__all__ = ["OpenAIBackend", "map_openai_error", "completion_from_json"]
