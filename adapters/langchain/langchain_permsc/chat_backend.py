"""A core backend over any LangChain chat model: each permuted prompt is one ``ainvoke`` call.

Decoding settings (temperature, max tokens) are those configured on the chat model; the
engine's per-call timeout applies. Usage comes from the answer's ``usage_metadata``. Errors
become the core's typed :class:`~permsc_integrations.errors.BackendError` tree so that the
engine retries only what is retryable: turn the model's own retries off (``max_retries=0``).

Calls run inside the LangChain run that started the ranking (see :func:`run_config`), so
callback handlers and tracers see every LLM call as a child run.

Example:
    >>> from langchain_core.language_models import FakeListChatModel
    >>> backend = ChatModelBackend(FakeListChatModel(responses=["[2] > [1]"]))
    >>> backend.name
    'langchain:FakeListChatModel'
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from permsc_integrations.backends.base import Completion, GenerationSettings, Message
from permsc_integrations.backends.http_errors import map_model_error
from permsc_integrations.errors import BackendError, BackendTimeoutError, ConfigurationError
from permsc_integrations.redaction import public_settings
from permsc_integrations.results import Usage

__all__ = ["ChatModelBackend", "run_config"]

_RUN_CONFIG: ContextVar[RunnableConfig | None] = ContextVar(
    "langchain_permsc_run_config", default=None
)
_ROLES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


@contextmanager
def run_config(config: RunnableConfig | None) -> Iterator[None]:
    """Make ``config`` the parent of every chat-model call started inside the block."""
    token = _RUN_CONFIG.set(config)
    try:
        yield
    finally:
        _RUN_CONFIG.reset(token)


def _model_name(model: BaseChatModel) -> str:
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


class ChatModelBackend:
    """Complete the engine's chat messages with ``model.ainvoke`` (see the module docstring)."""

    def __init__(self, model: BaseChatModel, *, name: str | None = None) -> None:
        if not isinstance(model, BaseChatModel):
            raise ConfigurationError(
                f"ChatModelBackend needs a LangChain BaseChatModel, got {type(model).__name__}"
            )
        self.model = model
        self.name = name or f"langchain:{_model_name(model)}"

    @property
    def fingerprint(self) -> str:
        """The chat model's class and plain settings (model, endpoint, temperature, ...),
        secrets left out: two models that can answer differently never share cache entries."""
        settings = public_settings(self.model)
        return json.dumps(
            {"backend": "langchain", "class": type(self.model).__qualname__, "settings": settings},
            sort_keys=True,
        )

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        chat: list[BaseMessage] = [_ROLES[m["role"]](content=m["content"]) for m in messages]
        started = time.perf_counter()
        try:
            with anyio.fail_after(settings.timeout):
                answer = await self.model.ainvoke(chat, config=_RUN_CONFIG.get())
        except BackendError:
            raise
        except TimeoutError as exc:
            raise BackendTimeoutError(
                f"{self.name} gave no answer within {settings.timeout} s (raise timeout=)"
            ) from exc
        except Exception as exc:
            raise map_model_error(exc, "the LangChain chat model", settings.timeout) from exc
        prompt, completion = _usage(answer)
        return Completion(
            text=answer.text if isinstance(answer, BaseMessage) else str(answer),
            usage=Usage(prompt, completion, 1, latency_s=time.perf_counter() - started),
            model=_model_name(self.model),
            finish_reason=(getattr(answer, "response_metadata", None) or {}).get("finish_reason"),
        )

    async def aclose(self) -> None:
        """Nothing to release: the chat model belongs to the caller."""


def _usage(answer: Any) -> tuple[int, int]:
    meta = getattr(answer, "usage_metadata", None) or {}
    return int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))
