"""A core backend over any LlamaIndex ``LLM``: each permuted prompt is one ``achat`` call.

Decoding settings (temperature, max tokens, retries) are those configured on the LLM object;
the engine's per-call timeout applies. First-token scoring asks for one token with logprobs
and reads ``ChatResponse.logprobs`` (LlamaIndex's OpenAI LLMs fill it). Usage is read from
what the LLM reports (the raw response's ``usage``, or ``prompt_tokens``/``completion_tokens``
in ``additional_kwargs``).
Errors become the core's typed :class:`~permsc_integrations.errors.BackendError` tree so the
engine retries only what is retryable; turn the LLM's own retries off (``max_retries=0``).
The LLM's async client belongs to the first event loop that ranks with it; calls from any
other loop (the sync bridge, ``asyncio.run`` again) use ``chat`` in a worker thread instead
(:class:`~permsc_integrations.backends._home_loop.HomeLoop`), so no request is sent twice.

Example:
    >>> from llama_index.core.llms import MockLLM
    >>> backend = LlamaIndexLLMBackend(MockLLM())
    >>> backend.name
    'llama_index:unknown'
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.llms import LLM

from permsc_integrations.backends.base import (
    Completion,
    GenerationSettings,
    LabelProbabilities,
    Message,
)
from permsc_integrations.errors import BackendError
from permsc_integrations.integration import (
    Done,
    HomeLoop,
    Trace,
    check_labels,
    label_probabilities,
    mapped_errors,
    positive_int,
    public_settings,
    refused_logprobs,
    top_list,
)
from permsc_integrations.results import Usage

__all__ = ["LlamaIndexLLMBackend", "llm_event"]


class LlamaIndexLLMBackend:
    """Complete the engine's chat messages with ``llm.achat`` (see the module docstring)."""

    def __init__(self, llm: LLM, *, name: str | None = None, top_logprobs: int = 20) -> None:
        self.llm, self.top_logprobs = llm, positive_int("top_logprobs", top_logprobs)
        self.name = name or f"llama_index:{llm.metadata.model_name}"
        self._home = HomeLoop()

    @property
    def fingerprint(self) -> str:
        """The LLM's class and plain settings (model, api_base, temperature, ...), secrets
        left out: two LLMs that can answer differently never share cache entries."""
        settings = public_settings(self.llm)
        return json.dumps(
            {"backend": "llama_index", "class": type(self.llm).__qualname__, "settings": settings},
            sort_keys=True,
        )

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        started = time.perf_counter()
        response = await self._achat(messages, settings.timeout)
        usage = _usage(response)
        latency = time.perf_counter() - started
        return Completion(
            text=response.message.content or "",
            usage=Usage(usage.prompt_tokens, usage.completion_tokens, 1, latency_s=latency),
            model=self.llm.metadata.model_name,
            finish_reason=_finish_reason(response),
        )

    async def afirst_token(
        self, messages: Sequence[Message], labels: Sequence[str], settings: GenerationSettings
    ) -> LabelProbabilities:
        """First-token scoring through the LLM's logprobs (``ChatResponse.logprobs``, which
        LlamaIndex's OpenAI LLMs fill): one token at temperature 0 with the ``top_logprobs``
        most likely, read as the core's openai backend reads them. An LLM that returns none
        raises ``LogprobsUnavailableError``."""
        check_labels(labels)
        started = time.perf_counter()
        asked = {"logprobs": True, "top_logprobs": self.top_logprobs, "max_tokens": 1}
        try:
            response = await self._achat(messages, settings.timeout, temperature=0.0, **asked)
        except BackendError as exc:
            refused = refused_logprobs(exc, self.top_logprobs)
            if refused is None:
                raise
            raise refused from exc
        first = response.logprobs[0] if response.logprobs else None  # the first token's top list
        entries = [{"token": p.token, "logprob": p.logprob} for p in first or ()]
        logprobs = None if first is None else {"content": [{"top_logprobs": entries}]}
        top = top_list({"logprobs": logprobs}, self.name)
        probabilities, mass = label_probabilities(top, labels)
        counted, latency = _usage(response), time.perf_counter() - started
        usage = Usage(counted.prompt_tokens, counted.completion_tokens, 1, latency_s=latency)
        return LabelProbabilities(probabilities, mass, usage, self.llm.metadata.model_name)

    async def _achat(self, messages: Sequence[Message], timeout: float | None, **kw: Any) -> Any:
        """One ``achat``, its failures as the core's typed errors."""
        chat = _chat(messages)
        with mapped_errors(self.name, timeout), anyio.fail_after(timeout):
            return await self._home.call(
                lambda: self.llm.achat(chat, **kw), lambda: self.llm.chat(chat, **kw)
            )

    async def aclose(self) -> None:
        """Nothing to release: the LLM object belongs to the caller."""


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _usage(response: ChatResponse) -> Usage:
    for source in (_field(response.raw, "usage"), response.additional_kwargs):
        prompt, completion = _field(source, "prompt_tokens"), _field(source, "completion_tokens")
        if isinstance(prompt, int) or isinstance(completion, int):
            return Usage(prompt_tokens=prompt or 0, completion_tokens=completion or 0)
    return Usage()


def _finish_reason(response: ChatResponse) -> str | None:
    choices = _field(response.raw, "choices")
    if choices:
        reason = _field(choices[0], "finish_reason")
        return str(reason) if reason is not None else None
    return None


def llm_event(callback_manager: Callable[[], Any]) -> Trace:
    """Each call as an LLM event of ``callback_manager()`` with its token usage (a
    :data:`~permsc_integrations.integration._base.Trace` for the shared ``TracedBackend``):
    LlamaIndex's ``TokenCountingHandler`` and tracers count them like any LLM call."""

    @asynccontextmanager
    async def trace(name: str, messages: Sequence[Message]) -> AsyncIterator[Done]:
        chat = _chat(messages)
        with callback_manager().event(CBEventType.LLM, payload=_sent(chat)) as event:

            async def done(
                text: str, u: Usage, model: str | None, extra: Mapping[str, Any] | None
            ) -> None:
                _end(event, chat, text, u, model, extra)

            yield done

    return trace


def _chat(messages: Sequence[Message]) -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]


def _sent(chat: list[ChatMessage]) -> dict[str, Any]:
    return {EventPayload.MESSAGES: chat}


def _end(
    event: Any,
    chat: list[ChatMessage],
    text: str,
    u: Usage,
    model: str | None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    usage = {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
    }
    response = ChatResponse(
        message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
        raw={"usage": usage, "model": model, **(extra or {})},
    )
    event.on_end(payload={EventPayload.MESSAGES: chat, EventPayload.RESPONSE: response})
