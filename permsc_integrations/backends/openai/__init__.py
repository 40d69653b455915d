"""The OpenAI-compatible backend: the client (:mod:`._backend`), one HTTP client per event loop
(:mod:`._client_per_loop`) and the chat-completion JSON reader (:mod:`._chat_json`).

``permsc_integrations.backends.openai`` stays the public import path of :class:`OpenAIBackend`
(it was one module before the backends were split into folders).
"""

from permsc_integrations._registry import publish
from permsc_integrations.backends.openai._backend import OpenAIBackend

__all__ = ["OpenAIBackend"]

publish(__name__, OpenAIBackend)
