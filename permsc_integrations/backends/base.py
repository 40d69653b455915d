"""The one small async protocol every model backend implements.

A backend turns chat messages into text and usage. It knows nothing of PSC: the engine
shuffles, retries, validates and aggregates. Backends raise :class:`BackendError`
subclasses with ``retryable`` set; they never retry themselves.

Example:
    >>> import anyio
    >>> class Echo:
    ...     name = "echo"
    ...     async def acomplete(self, messages, settings):
    ...         return Completion(text=messages[-1]["content"])
    ...     async def aclose(self):
    ...         pass
    >>> messages = [{"role": "user", "content": "[1] > [2]"}]
    >>> anyio.run(Echo().acomplete, messages, GenerationSettings()).text
    '[1] > [2]'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..results import Usage

__all__ = ["Message", "GenerationSettings", "Completion", "Backend", "BatchBackend"]

Message = Mapping[str, str]
"""A chat message, ``{"role": "system" | "user" | "assistant", "content": str}``."""


@dataclass(frozen=True, slots=True)
class GenerationSettings:
    """Decoding settings passed with every call (part of the cache key)."""

    temperature: float = 0.0
    max_tokens: int | None = None
    timeout: float | None = 60.0
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer: its text, its token usage and the model that gave it."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None


@runtime_checkable
class Backend(Protocol):
    """Complete one conversation. ``name`` identifies backend and model (used in cache keys)."""

    name: str

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class BatchBackend(Backend, Protocol):
    """A backend that answers many conversations in one batched pass (local models).

    The engine sends a window's m permuted prompts as one batch when a backend has this.
    """

    async def acomplete_batch(
        self, batch: Sequence[Sequence[Message]], settings: GenerationSettings
    ) -> list[Completion]: ...
