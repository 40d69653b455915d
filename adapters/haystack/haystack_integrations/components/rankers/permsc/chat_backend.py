"""A core backend over any Haystack chat generator: each permuted prompt is one ``run_async``
(or ``run``) call with ``ChatMessage``s, as Haystack's ``ChatGenerator`` protocol defines.

Decoding (temperature, max tokens) is what the generator is configured with
(``generation_kwargs``), so set ``temperature`` to 0 there; turn the generator's own retries
off (``max_retries=0`` on ``OpenAIChatGenerator``): the engine retries what is retryable
and nothing else. The engine's per-call timeout applies. Token usage is read from the reply's
``meta["usage"]`` (``prompt_tokens``/``completion_tokens``, or ``input_tokens``/
``output_tokens``). The generator's errors (the openai SDK's, HTTP statuses, timeouts,
dropped connections) become the core's typed
:class:`~permsc_integrations.errors.BackendError` tree, retryable or not.

A generator's async client belongs to the first event loop that ranks with it; calls from
any other loop (the sync bridge of ``run``, a later ``asyncio.run``) use its sync ``run`` in a
worker thread instead (:class:`~permsc_integrations.backends._home_loop.HomeLoop`), so no
request is sent twice. A generator without ``run_async`` is called with ``run`` in a thread.

Example:
    >>> from haystack.dataclasses import ChatMessage
    >>> class Echo:  # any object with run(messages=[ChatMessage, ...]) -> {"replies": [...]}
    ...     def run(self, messages):
    ...         return {"replies": [ChatMessage.from_assistant("[2] > [1]")]}
    >>> HaystackChatBackend(Echo()).name
    'haystack:Echo'
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
from haystack.dataclasses import ChatMessage

from permsc_integrations.backends.base import Completion, GenerationSettings, Message
from permsc_integrations.errors import BackendError, ConfigurationError
from permsc_integrations.integration import HomeLoop, mapped_errors, public_settings
from permsc_integrations.results import Usage

__all__ = ["HaystackChatBackend", "generator_name"]

_MESSAGE = {
    "system": ChatMessage.from_system,
    "user": ChatMessage.from_user,
    "assistant": ChatMessage.from_assistant,
}
_USAGE_KEYS = (("prompt_tokens", "completion_tokens"), ("input_tokens", "output_tokens"))


@functools.lru_cache(maxsize=4096)
def _message(role: str, content: str) -> ChatMessage:
    """One ``ChatMessage``, shared by the prompts that repeat it: a PSC ranking sends the same
    system turn, instructions and acknowledgements in every shuffle, and Haystack's
    ``ChatMessage`` costs about 10 us to build (``benchmarks/haystack_overhead.py``). They
    are never mutated (Haystack warns on any write to one)."""
    return _MESSAGE[role](content)


def generator_name(generator: Any) -> str:
    """``haystack:<model>`` (the generator's ``model``), or ``haystack:<class>``."""
    model = getattr(generator, "model", None)
    return (
        f"haystack:{model}"
        if isinstance(model, str) and model
        else (f"haystack:{type(generator).__name__}")
    )


class HaystackChatBackend:
    """Complete the engine's chat messages with a Haystack chat generator (module docstring)."""

    def __init__(self, generator: Any, *, name: str | None = None) -> None:
        if not callable(getattr(generator, "run", None)):
            raise ConfigurationError(
                "chat_generator must be a Haystack chat generator (an object with "
                f"run(messages=[ChatMessage, ...])), got {type(generator).__name__}"
            )
        self.generator = generator
        self.name = name or generator_name(generator)
        self._home = HomeLoop()

    @property
    def fingerprint(self) -> str:
        """The generator's class and plain settings (model, api_base_url, generation_kwargs),
        secrets left out: two generators that can answer differently never share a cache
        entry."""
        settings = public_settings(self.generator)
        return json.dumps(
            {"backend": "haystack", "class": type(self.generator).__qualname__, **settings},
            sort_keys=True,
            default=repr,
        )

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        started = time.perf_counter()
        chat = [_message(m["role"], m["content"]) for m in messages]
        with mapped_errors(self.name, settings.timeout), anyio.fail_after(settings.timeout):
            output = await self._home.call(lambda: self._arun(chat), lambda: self._run(chat))
        reply = _first_reply(output, self.name)
        prompt, completion = _usage(reply.meta)
        latency = time.perf_counter() - started
        return Completion(
            text=reply.text or "",
            usage=Usage(prompt, completion, 1, latency_s=latency),
            model=str(reply.meta.get("model") or self.name),
            finish_reason=_finish_reason(reply.meta),
        )

    async def _arun(self, chat: list[ChatMessage]) -> Any:
        native = getattr(self.generator, "run_async", None)
        if native is None:  # a sync-only generator: its run in a worker thread
            return await anyio.to_thread.run_sync(self._run, chat, abandon_on_cancel=True)
        return await native(messages=chat)

    def _run(self, chat: list[ChatMessage]) -> Any:
        return self.generator.run(messages=chat)

    async def aclose(self) -> None:
        """Nothing to release: the generator belongs to the caller."""


def _first_reply(output: Any, name: str) -> ChatMessage:
    replies = output.get("replies") if isinstance(output, Mapping) else None
    if not replies or not isinstance(replies[0], ChatMessage):
        raise BackendError(
            f"{name} returned no reply ({type(output).__name__} without 'replies' of "
            "ChatMessage); not retried, check the generator",
            retryable=False,
        )
    return replies[0]


def _usage(meta: Mapping[str, Any]) -> tuple[int, int]:
    usage = meta.get("usage")
    if not isinstance(usage, Mapping):
        return 0, 0
    for prompt_key, completion_key in _USAGE_KEYS:
        prompt, completion = usage.get(prompt_key), usage.get(completion_key)
        if isinstance(prompt, int) or isinstance(completion, int):
            return (
                prompt if isinstance(prompt, int) else 0,
                completion if isinstance(completion, int) else 0,
            )
    return 0, 0


def _finish_reason(meta: Mapping[str, Any]) -> str | None:
    reason = meta.get("finish_reason")
    return None if reason is None else str(reason)
