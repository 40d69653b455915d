"""A core backend over any LlamaIndex ``LLM``: each permuted prompt is one ``achat`` call.

Decoding settings (temperature, max tokens, retries) are those configured on the LLM object;
the engine's per-call timeout applies. Usage is read from what the LLM reports (the raw
response's ``usage``, or ``prompt_tokens``/``completion_tokens`` in ``additional_kwargs``).
Errors become the core's typed :class:`~permsc_integrations.errors.BackendError` tree so the
engine retries only what is retryable; turn the LLM's own retries off (``max_retries=0``).

Example:
    >>> from llama_index.core.llms import MockLLM
    >>> backend = LlamaIndexLLMBackend(MockLLM())
    >>> backend.name
    'llama_index:unknown'
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.llms import LLM

from permsc_integrations.backends.base import Completion, GenerationSettings, Message
from permsc_integrations.errors import BackendConnectionError, BackendError, BackendTimeoutError
from permsc_integrations.results import Usage

__all__ = ["LlamaIndexLLMBackend"]


class LlamaIndexLLMBackend:
    """Complete the engine's chat messages with ``llm.achat`` (see the module docstring)."""

    def __init__(self, llm: LLM, *, name: str | None = None) -> None:
        self.llm = llm
        self.name = name or f"llama_index:{llm.metadata.model_name}"

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        chat = [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]
        started = time.perf_counter()
        try:
            with anyio.fail_after(settings.timeout):
                response = await self.llm.achat(chat)
        except BackendError:
            raise
        except Exception as exc:
            raise _backend_error(exc, settings.timeout) from exc
        usage = _usage(response)
        latency = time.perf_counter() - started
        return Completion(
            text=response.message.content or "",
            usage=Usage(usage.prompt_tokens, usage.completion_tokens, 1, latency_s=latency),
            model=self.llm.metadata.model_name,
            finish_reason=_finish_reason(response),
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


def _backend_error(exc: Exception, timeout: float | None) -> BackendError:
    """Map what an LLM raised to the core's error tree: ``openai`` SDK errors (the OpenAI
    family of LlamaIndex LLMs) as the core's openai backend does, others by kind."""
    try:
        import openai
    except ImportError:
        openai = None  # type: ignore[assignment]
    if openai is not None and isinstance(exc, openai.APIError):
        from permsc_integrations.backends.openai import map_openai_error

        base_url = getattr(getattr(exc, "request", None), "url", None)
        return map_openai_error(exc, str(base_url) if base_url else None, timeout)
    what = f"{type(exc).__name__} from the LlamaIndex LLM: {exc}"
    if isinstance(exc, TimeoutError):
        return BackendTimeoutError(f"{what}; raise timeout= or lower max_concurrency")
    if isinstance(exc, ConnectionError):
        return BackendConnectionError(f"{what}; check that the model server is reachable")
    return BackendError(f"{what}; not retried, check the LLM's configuration", retryable=False)
