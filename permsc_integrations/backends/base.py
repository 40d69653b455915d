"""The one small async protocol every model backend implements.

A backend turns chat messages into text and usage. It knows nothing of PSC: the engine
shuffles, retries, validates and aggregates. Backends raise :class:`~.errors.BackendError`
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

from permsc_integrations.results import Usage

__all__ = [
    "Message",
    "GenerationSettings",
    "Completion",
    "Backend",
    "BatchBackend",
    "LabelProbabilities",
    "FirstTokenBackend",
    "FirstTokenBatchBackend",
    "ResponseCache",
]

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


@dataclass(frozen=True, slots=True)
class LabelProbabilities:
    """The answer's first token, read as a distribution over a window's item labels.

    ``probabilities[i]`` belongs to ``labels[i]`` of the call; they are renormalised over the
    labels and sum to 1. ``mass`` is the probability the labels held together before
    renormalising (how much of the first token went to labels at all). ``usage`` counts the
    prompt and the one output token.
    """

    probabilities: tuple[float, ...]
    mass: float = 1.0
    usage: Usage = field(default_factory=Usage)
    model: str = ""


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


@runtime_checkable
class FirstTokenBackend(Backend, Protocol):
    """A backend that reads the first output token's probabilities over given labels.

    ``labels`` are single-token strings (e.g. ``"A"``...); one output token is asked for.
    A backend that cannot read probabilities raises a typed :class:`~.errors.BackendError`.
    """

    async def afirst_token(
        self, messages: Sequence[Message], labels: Sequence[str], settings: GenerationSettings
    ) -> LabelProbabilities: ...


@runtime_checkable
class FirstTokenBatchBackend(FirstTokenBackend, Protocol):
    """A first-token backend that scores many conversations in one batched forward pass."""

    async def afirst_token_batch(
        self,
        batch: Sequence[Sequence[Message]],
        labels: Sequence[str],
        settings: GenerationSettings,
    ) -> list[LabelProbabilities]: ...


@runtime_checkable
class ResponseCache(Protocol):
    """What the engine needs from a response cache (:mod:`._calls.cache` has the built-in ones);
    here, below the options, because ``RankingOptions.cache`` holds one."""

    async def aget(self, key: str) -> Completion | None: ...

    async def aset(self, key: str, completion: Completion) -> None: ...
