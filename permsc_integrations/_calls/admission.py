"""Admission under a ranker's spending cap: a request starts only when the cap can pay for it.

Before a request starts, :meth:`Admitting.admit` holds what its strategy plans to spend (its
calls; under a token or cost cap, their tokens too, estimated as ``permsc estimate`` does)
against the meter's cap. A request that does not fit waits while others are under way (what
they did not use goes back when they finish: cache hits, adaptive m stopping early), and is
refused with :class:`~.errors.SpendingCapError` (``needed`` set, nothing spent) once it can
never fit. So a cap that pays for about five of ten queries ranks about five of them, however
many are sent at once, instead of starting all ten and finishing none. A request's calls are
paid from its :class:`Hold` while it lasts; calls beyond its plan (re-asks, retries) from what
no request holds. :class:`~.spending.Meter` is the one implementation.

Example:
    >>> Amount(3, 100, 0.5) - Amount(5, 40, 0.0)
    Amount(calls=-2, tokens=60, cost=0.5)
    >>> (Amount(3, 100) - Amount(5, 40)).at_least_zero()
    Amount(calls=0, tokens=60, cost=0.0)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from permsc_integrations.errors import SpendingCapError
from permsc_integrations.results import Usage

__all__ = ["Amount", "Hold", "Admitting", "Waiter"]

Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


@dataclass(frozen=True, slots=True)
class Amount:
    """Calls, tokens and cost together: what a scope spent, holds, or a request needs."""

    calls: int = 0
    tokens: int = 0
    cost: float = 0.0

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.calls + other.calls, self.tokens + other.tokens, self.cost + other.cost)

    def __sub__(self, other: Amount) -> Amount:
        return Amount(self.calls - other.calls, self.tokens - other.tokens, self.cost - other.cost)

    def at_least_zero(self) -> Amount:
        return Amount(max(self.calls, 0), max(self.tokens, 0), max(self.cost, 0.0))


@dataclass(eq=False)
class Hold:
    """What one admitted request may spend: ``need`` is held against the cap until
    :meth:`close`; ``used`` is what its calls have spent or have in flight."""

    meter: Admitting
    need: Amount
    used: Amount = field(default_factory=Amount)

    @property
    def left(self) -> Amount:
        """What is still held for this request."""
        return (self.need - self.used).at_least_zero()

    def reserve(self, prompt_chars: int) -> Any:
        """One of this request's calls, paid from the hold while it lasts."""
        return self.meter.reserve(prompt_chars, self)

    def release(self, ticket: Any) -> None:
        self.meter.release(ticket)

    def settle(self, ticket: Any, usage: Usage) -> None:
        self.meter.settle(ticket, usage)

    def close(self) -> None:
        """The request is over: what it did not use goes back to the cap."""
        self.meter.close_hold(self)


class _Cap(Protocol):
    """The limits a cap sets (:class:`~permsc_integrations._calls.spending.SpendingCap`)."""

    @property
    def calls(self) -> int | None: ...

    @property
    def tokens(self) -> int | None: ...

    @property
    def cost(self) -> float | None: ...


class Admitting:
    """The admission half of a meter (see the module docstring); the meter provides its
    lock, cap, what it has committed (:meth:`committed`) and the cap test (:meth:`over`)."""

    cap: _Cap
    scope: str
    _lock: threading.Lock
    _holds: list[Hold]
    _waiters: list[Waiter]

    def committed(self, holds: bool = True) -> Amount:
        raise NotImplementedError

    def over(self, amount: Amount) -> tuple[str, float] | None:
        raise NotImplementedError

    def cost_of(self, usage: Usage) -> float:
        raise NotImplementedError

    def spent_usage(self) -> Usage:
        raise NotImplementedError

    def reserve(self, prompt_chars: int, hold: Hold | None = None) -> Any:
        raise NotImplementedError

    def release(self, ticket: Any) -> None:
        raise NotImplementedError

    def settle(self, ticket: Any, usage: Usage) -> None:
        raise NotImplementedError

    async def admit(self, calls: tuple[int, int], tokens: Callable[[], tuple[int, int]]) -> Hold:
        """Hold what a request plans to spend before it starts: ``calls`` is its plan's
        ``(low, high)`` (equal unless adaptive m may stop early), ``tokens()`` its prompt
        and completion tokens at ``high`` (asked only under a token or cost cap).

        Waits while requests under way hold what it needs; raises :class:`SpendingCapError`
        (``needed`` set, nothing spent) once it can never fit. Under adaptive m a request
        that fits only at its fewest calls is admitted when nothing else is held."""
        need, least = self._needs(calls, tokens)
        while True:
            loop = asyncio.get_running_loop()
            with self._lock:
                hold = self._try_admit(need, least)
                if hold is not None:
                    return hold
                wake: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, wake))
            try:
                await wake
            finally:
                with self._lock, contextlib.suppress(ValueError):
                    self._waiters.remove((loop, wake))

    def _needs(
        self, calls: tuple[int, int], tokens: Callable[[], tuple[int, int]]
    ) -> tuple[Amount, Amount]:
        low, high = calls
        prompt, completion = tokens() if self.cap.tokens or self.cap.cost else (0, 0)
        cost = self.cost_of(Usage(prompt_tokens=prompt, completion_tokens=completion))
        need = Amount(high, prompt + completion, cost)
        share = low / high if high else 1.0
        return need, Amount(low, int(need.tokens * share), need.cost * share)

    def _try_admit(self, need: Amount, least: Amount) -> Hold | None:
        """Under the lock: a hold for ``need`` if it fits now, else for ``least`` if nothing
        else is held and it fits; None to wait for the requests under way; or raise."""
        committed = self.committed()
        if self.over(committed + need) is None:
            return self._hold(need)
        if self._holds and self.over(self.committed(holds=False) + least) is None:
            return None  # fits once the requests under way give back what they hold
        over = self.over(committed + least)
        if over is None:
            return self._hold(least)
        limit, cap = over
        needed = float(getattr(least, limit))
        raise SpendingCapError(self.scope, limit, cap, self.spent_usage(), needed=needed)

    def _hold(self, need: Amount) -> Hold:
        hold = Hold(self, need)
        self._holds.append(hold)
        return hold

    def close_hold(self, hold: Hold) -> None:
        """Give back what ``hold`` did not use, and let every waiting request try again."""
        with self._lock:
            with contextlib.suppress(ValueError):
                self._holds.remove(hold)
            waiters, self._waiters = self._waiters, []
        for loop, wake in waiters:
            with contextlib.suppress(RuntimeError):  # that waiter's loop is closed
                loop.call_soon_threadsafe(_wake, wake)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
