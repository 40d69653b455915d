"""Retries for backend calls: one tenacity layer, anyio sleeps, ``Retry-After`` honoured.

Only :class:`BackendError` with ``retryable=True`` is retried (429, 5xx, timeouts, dropped
connections). Waits grow exponentially with jitter, or follow the server's ``Retry-After``;
attempts and total time are both bounded, and each attempt is cut at the per-call timeout
(raising the retryable :class:`BackendTimeoutError`).

The one retry loop is :class:`Attempts`, run by :meth:`~.calls.Calls.send` (the way every
call goes out): tests/test_retry.py drives that path.

Example:
    >>> import anyio
    >>> from permsc_integrations.errors import RateLimitError
    >>> calls = []
    >>> async def flaky():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise RateLimitError("slow down", retry_after=0.01)
    ...     return "ok"
    >>> async def retried():
    ...     attempts = Attempts(RetryPolicy(max_attempts=4), 1.0)
    ...     async for attempt in attempts:
    ...         with attempt:
    ...             async with attempts:
    ...                 result = await flaky()
    ...     return result, attempts.retries
    >>> anyio.run(retried)
    ('ok', 2)
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType

import anyio
from tenacity import (
    AsyncRetrying,
    AttemptManager,
    RetryCallState,
    retry_if_exception,
)

from permsc_integrations._checks import positive_int
from permsc_integrations._registry import publish
from permsc_integrations.errors import BackendError, BackendTimeoutError, ConfigurationError

__all__ = ["RetryPolicy", "Budget", "Attempts", "is_retryable"]


def is_retryable(exc: BaseException) -> bool:
    """True for a :class:`BackendError` flagged ``retryable``."""
    return isinstance(exc, BackendError) and exc.retryable


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How retryable failures are retried.

    ``max_attempts`` counts the first try; backoff starts at ``initial_backoff`` seconds and
    doubles up to ``max_backoff``, plus up to ``jitter`` random seconds; a ``Retry-After``
    from the server replaces the backoff. A ``Retry-After`` longer than ``max_retry_after``
    is not waited for at all: the error is raised at once, carrying the server's
    ``retry_after`` (retrying sooner than asked would only be refused again). No attempt
    starts once ``max_total_time`` seconds would be exceeded, and the last one is cut at that
    bound.
    """

    max_attempts: int = 4
    initial_backoff: float = 0.5
    max_backoff: float = 20.0
    jitter: float = 0.5
    max_total_time: float | None = 120.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        positive_int("RetryPolicy.max_attempts", self.max_attempts)
        for name in ("initial_backoff", "max_backoff", "jitter", "max_retry_after"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"RetryPolicy.{name} must be >= 0")
        if self.max_total_time is not None and self.max_total_time <= 0:
            raise ConfigurationError("RetryPolicy.max_total_time must be > 0 or None")

    @staticmethod
    def _hint(state: RetryCallState) -> float | None:
        """The failed attempt's ``Retry-After`` (0 or negative: no real hint)."""
        exc = state.outcome.exception() if state.outcome is not None else None
        hint = getattr(exc, "retry_after", None)
        return float(hint) if hint is not None and hint > 0 else None

    def _asks_too_long(self, state: RetryCallState) -> bool:
        hint = self._hint(state)
        return hint is not None and hint > self.max_retry_after

    def _wait(self, state: RetryCallState) -> float:
        hint = self._hint(state)
        if hint is not None:
            return hint
        backoff = self.initial_backoff * 2.0 ** min(state.attempt_number - 1, 60)
        return min(backoff, self.max_backoff) + random.uniform(0.0, self.jitter)

    def retrying(self, budget: Budget | None = None) -> AsyncRetrying:
        """A fresh tenacity ``AsyncRetrying`` for one call; ``budget`` (when given) measures
        ``max_total_time`` on the call's own attempts and backoff, not its queueing."""
        clock = budget or Budget()

        def stop(state: RetryCallState) -> bool:
            """After ``max_attempts``; at once for a Retry-After past the cap; before a wait
            that would pass ``max_total_time``."""
            if state.attempt_number >= self.max_attempts or self._asks_too_long(state):
                return True
            limit = self.max_total_time
            return limit is not None and clock.spent() + (state.upcoming_sleep or 0.0) >= limit

        return AsyncRetrying(
            stop=stop,
            wait=self._wait,
            retry=retry_if_exception(is_retryable),
            sleep=anyio.sleep,
            reraise=True,
        )


class Budget:
    """Seconds a call has spent on its own attempts and backoff: time spent waiting for a
    slot (:meth:`skip`) is left out."""

    __slots__ = ("_started", "_waited")

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._waited = 0.0

    def spent(self) -> float:
        return time.monotonic() - self._started - self._waited

    def skip(self, seconds: float) -> None:
        """Leave ``seconds`` (a wait for a slot) out of what the call has spent."""
        self._waited += seconds


class Attempts:
    """The attempts of one call under ``policy``, made in the caller's own frame::

        attempts = Attempts(policy, timeout, guard=slot)
        async for attempt in attempts:
            with attempt:  # tenacity: a retryable failure is retried after the backoff
                async with attempts:  # this attempt's guard and time limit
                    result = await call()

    Each attempt holds ``guard()`` (a capacity-limiter slot, say) but not during backoff, and
    is cut at the per-call ``timeout`` (raising the retryable :class:`BackendTimeoutError`);
    waiting for the guard counts against neither the timeout nor the policy's
    ``max_total_time``: the budget covers the call's own attempts and backoff, never queueing.
    The final failure is raised by the loop, as is; ``retries`` counts the attempts after the
    first.
    """

    __slots__ = ("_budget", "_inner", "_total", "_timeout", "_guard", "_held", "_cut", "retries")

    def __init__(
        self,
        policy: RetryPolicy,
        timeout: float | None,
        *,
        guard: Callable[[], AbstractAsyncContextManager[object]] | None = None,
    ) -> None:
        self._budget = Budget()
        self._inner = policy.retrying(self._budget).__aiter__()
        self._total = math.inf if policy.max_total_time is None else policy.max_total_time
        self._timeout, self._guard = timeout, guard
        self._held: AbstractAsyncContextManager[object] | None = None
        self._cut: _Cut | None = None
        self.retries = -1

    def __aiter__(self) -> Attempts:
        return self

    async def __anext__(self) -> AttemptManager:
        attempt = await self._inner.__anext__()  # tenacity's: enter it with ``with``
        self.retries += 1
        return attempt

    async def __aenter__(self) -> None:
        """Hold the guard (the wait left out of the budget), then start the time limit."""
        began = time.monotonic()
        self._held = self._guard() if self._guard is not None else None
        if self._held is not None:
            await self._held.__aenter__()
        self._budget.skip(time.monotonic() - began)
        timeout = math.inf if self._timeout is None else self._timeout
        limit = min(timeout, self._total - self._budget.spent())
        self._cut = _Cut(limit, self._timeout) if limit != math.inf else None
        if self._cut is not None:
            self._cut.__enter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            return self._cut.__exit__(kind, exc, tb) if self._cut is not None else None
        finally:
            if self._held is not None:
                await self._held.__aexit__(kind, exc, tb)


class _Cut:
    """An attempt cut at ``limit`` seconds: the per-call ``timeout``, or what is left of the
    retry time budget (a :class:`BackendTimeoutError` then)."""

    __slots__ = ("limit", "timeout", "_scope")

    def __init__(self, limit: float, timeout: float | None) -> None:
        self.limit, self.timeout = limit, timeout
        self._scope = anyio.fail_after(max(limit, 0.0))

    def __enter__(self) -> None:
        self._scope.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            return self._scope.__exit__(kind, exc, tb)
        except TimeoutError:
            what = (
                f"the per-call timeout of {self.timeout:g} s"
                if self.limit == self.timeout
                else "the retry time budget"
            )
            raise BackendTimeoutError(
                f"the backend call exceeded {what}; raise timeout= (or "
                "RetryPolicy.max_total_time) or check that the server is answering"
            ) from None


publish("permsc_integrations", RetryPolicy)
