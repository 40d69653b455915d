"""LangChain models as core backends, and core backends as LangChain runs.

:class:`ChatModelBackend` completes each permuted prompt with one ``ainvoke`` of a chat model,
or of any Runnable around one (``bind``, ``with_config``, ``with_retry``, ``with_fallbacks``,
a configurable ``init_chat_model``). Ranking calls never stream (``stream=False``: a chain's
``astream_events`` shows no ranking tokens, and a server that cannot stream still answers)
and carry the tag ``permsc`` so that tracers can tell them apart. Errors become the core's
typed :class:`~permsc_integrations.errors.BackendError` tree so that the engine retries only
what is retryable: turn the model's own retries off (``max_retries=0``). First-token scoring
asks for one token with logprobs and reads ``response_metadata["logprobs"]`` (``ChatOpenAI``).
The model's async client belongs to the first event loop that ranks with it; calls from any
other loop (the sync bridge, ``asyncio.run`` again) use ``invoke`` in a worker thread instead
(:class:`~permsc_integrations.backends._home_loop.HomeLoop`), so no request is sent twice.

:func:`chat_model_run` traces a core backend (a spec string such as ``"openai:gpt-4o-mini"``)
so that each of its calls is a chat-model run of the LangChain run that started the ranking,
with its token usage: LangChain's usage callbacks and tracers see them like any model call
(a first-token call's answer is its most likely label).

Calls run inside the run that started the ranking (see :func:`run_config`).

Example:
    >>> from langchain_core.language_models import FakeListChatModel
    >>> backend = ChatModelBackend(FakeListChatModel(responses=["[2] > [1]"]))
    >>> backend.name
    'langchain:FakeListChatModel'
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

import anyio
from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import Runnable, RunnableConfig

from permsc_integrations.backends.base import (
    Completion,
    GenerationSettings,
    LabelProbabilities,
    Message,
)
from permsc_integrations.errors import BackendError, ConfigurationError
from permsc_integrations.integration import (
    Done,
    HomeLoop,
    check_labels,
    label_probabilities,
    mapped_errors,
    positive_int,
    public_settings,
    refused_logprobs,
    top_list,
)
from permsc_integrations.results import Usage

__all__ = [
    "ChatModelBackend",
    "chat_model_run",
    "run_config",
    "TAG",
]

TAG = "permsc"
"""The tag on every ranking call, for tracers and callback handlers."""

_RUN_CONFIG: ContextVar[RunnableConfig | None] = ContextVar(
    "langchain_permsc_run_config", default=None
)
_ROLES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
_WRAPPED = ("bound", "runnable", "default")  # RunnableBinding, fallbacks/retry, configurable


@contextmanager
def run_config(config: RunnableConfig | None) -> Iterator[None]:
    """Make ``config`` the parent of every model call started inside the block."""
    token = _RUN_CONFIG.set(config)
    try:
        yield
    finally:
        _RUN_CONFIG.reset(token)


def _config() -> RunnableConfig:
    """The parent run's config, with the ranking tag added."""
    parent = dict(_RUN_CONFIG.get() or {})
    return {**parent, "tags": [*(parent.get("tags") or []), TAG]}  # type: ignore[typeddict-item]


def chat_model(model: Any) -> BaseChatModel | None:
    """The chat model inside ``model`` (itself, or unwrapped from bindings and wrappers)."""
    for _ in range(8):
        if isinstance(model, BaseChatModel):
            return model
        model = next((getattr(model, a) for a in _WRAPPED if hasattr(model, a)), None)
    return None


def _model_name(model: Any) -> str:
    inner = chat_model(model)
    for attr in ("model_name", "model"):
        value = getattr(inner, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(inner or model).__name__


def _messages(messages: Sequence[Message]) -> list[BaseMessage]:
    return [_ROLES[m["role"]](content=m["content"]) for m in messages]


class ChatModelBackend:
    """Complete the engine's chat messages with ``model.ainvoke`` (see the module docstring);
    first-token scoring reads the model's logprobs (``top_logprobs`` of them)."""

    def __init__(
        self, model: Runnable[Any, Any], *, name: str | None = None, top_logprobs: int = 20
    ) -> None:
        if not isinstance(model, Runnable) or chat_model(model) is None:
            raise ConfigurationError(
                "ChatModelBackend needs a LangChain BaseChatModel (or a Runnable around one: "
                f"bind, with_config, with_retry, with_fallbacks), got {type(model).__name__}"
            )
        self.model, self.top_logprobs = model, positive_int("top_logprobs", top_logprobs)
        self.name = name or f"langchain:{_model_name(model)}"
        self._home = HomeLoop()

    @property
    def fingerprint(self) -> str:
        """The model's class and plain settings (and a binding's arguments), secrets left
        out: two models that can answer differently never share cache entries."""
        inner = chat_model(self.model)
        bound = getattr(self.model, "kwargs", None)
        described = {
            "backend": "langchain",
            "class": type(inner).__qualname__,
            "settings": public_settings(inner),
            "bound": public_settings(type("Bound", (), dict(bound))()) if bound else {},
        }
        return json.dumps(described, sort_keys=True, default=repr)

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        started = time.perf_counter()
        answer = await self._ainvoke(messages, settings.timeout)
        prompt, completion = _usage(answer)
        return Completion(
            text=answer.text if isinstance(answer, BaseMessage) else str(answer),
            usage=Usage(prompt, completion, 1, latency_s=time.perf_counter() - started),
            model=_model_name(self.model),
            finish_reason=(getattr(answer, "response_metadata", None) or {}).get("finish_reason"),
        )

    async def afirst_token(
        self, messages: Sequence[Message], labels: Sequence[str], settings: GenerationSettings
    ) -> LabelProbabilities:
        """First-token scoring through the chat model's logprobs (``ChatOpenAI`` and other
        OpenAI-compatible models put them in ``response_metadata["logprobs"]``): one token at
        temperature 0 with the ``top_logprobs`` most likely, read as the core's openai
        backend reads them. A model that returns none raises ``LogprobsUnavailableError``."""
        check_labels(labels)
        started = time.perf_counter()
        asked = {"logprobs": True, "top_logprobs": self.top_logprobs, "max_tokens": 1}
        try:
            answer = await self._ainvoke(messages, settings.timeout, temperature=0.0, **asked)
        except BackendError as exc:
            refused = refused_logprobs(exc, self.top_logprobs)
            if refused is None:
                raise
            raise refused from exc
        meta = getattr(answer, "response_metadata", None) or {}
        top = top_list({"logprobs": meta.get("logprobs")}, self.name)
        probabilities, mass = label_probabilities(top, labels)
        prompt, completion = _usage(answer)
        usage = Usage(prompt, completion, 1, latency_s=time.perf_counter() - started)
        return LabelProbabilities(probabilities, mass, usage, _model_name(self.model))

    async def _ainvoke(self, messages: Sequence[Message], timeout: float | None, **kw: Any) -> Any:
        """One ``ainvoke`` (never streamed), its failures as the core's typed errors."""
        chat, config = _messages(messages), _config()
        with mapped_errors(self.name, timeout), anyio.fail_after(timeout):
            return await self._home.call(
                lambda: self.model.ainvoke(chat, config, stream=False, **kw),
                lambda: self.model.invoke(chat, config, stream=False, **kw),
            )

    async def aclose(self) -> None:
        """Nothing to release: the chat model belongs to the caller."""


@asynccontextmanager
async def chat_model_run(name: str, messages: Sequence[Message]) -> AsyncIterator[Done]:
    """One call as a chat-model run of the current LangChain run (a
    :data:`~permsc_integrations.integration._base.Trace` for the shared ``TracedBackend``)."""
    config = _config()
    manager = AsyncCallbackManager.configure(
        inheritable_callbacks=config.get("callbacks"), inheritable_tags=config.get("tags")
    )
    [run] = await manager.on_chat_model_start(
        {"name": name}, [_messages(messages)], invocation_params={"model": name}
    )

    async def done(text: str, u: Usage, model: str | None, extra: Mapping[str, Any] | None) -> None:
        await _end(run, text, u, model or name, dict(extra or {}))

    try:
        yield done
    except BaseException as exc:
        await run.on_llm_error(exc)
        raise


async def _end(
    run: Any, text: str, u: Usage, model: str, extra: dict[str, Any] | None = None
) -> None:
    message = AIMessage(
        text,
        usage_metadata={
            "input_tokens": u.prompt_tokens,
            "output_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens,
        },
        response_metadata={"model_name": model, **(extra or {})},
    )
    await run.on_llm_end(LLMResult(generations=[[ChatGeneration(message=message)]]))


def _usage(answer: Any) -> tuple[int, int]:
    meta = getattr(answer, "usage_metadata", None) or {}
    return int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))
