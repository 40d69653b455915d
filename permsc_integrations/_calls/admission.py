"""Admission under a ranker's spending cap: a request starts only when the cap can pay for it.

Before a request starts, :meth:`Admission.admit` holds what its strategy plans to spend (its
calls; under a token or cost cap, their tokens too, estimated as ``permsc estimate`` does)
against the meter's cap. A request that does not fit waits while others are under way (what
they did not use goes back when they finish: cache hits, adaptive m stopping early), and is
refused with :class:`~.errors.SpendingCapError` (``needed`` set, nothing spent) once it can
never fit. So a cap that pays for about five of ten queries ranks about five of them, however
many are sent at once, instead of starting all ten and finishing none. A request's calls are
paid from its :class:`Hold` while it lasts; calls beyond its plan (re-asks, retries) from what
no request holds.

An :class:`Admission` belongs to one :class:`~.spending.Meter` (its :class:`Ledger`: the
lock, the cap and what is committed); a waiting request waits for a :class:`~.turn.Turn`.

Example:
    >>> Amount(3, 100, 0.5) - Amount(5, 40, 0.0)
    Amount(calls=-2, tokens=60, cost=0.5)
    >>> (Amount(3, 100) - Amount(5, 40)).at_least_zero()
    Amount(calls=0, tokens=60, cost=0.0)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from permsc_integrations._calls.turn import Turn
from permsc_integrations.errors import SpendingCapError
from permsc_integrations.results import Usage

__all__ = ["Amount", "Hold", "Ticket", "Ledger", "Admission"]


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
class Ticket:
    """One call's reservation: its estimate until it finishes (and the hold it draws on)."""

    tokens: int
    cost: float
    hold: Hold | None = None


class _Cap(Protocol):
    """The limits a cap sets (:class:`~permsc_integrations._calls.caps.SpendingCap`)."""

    @property
    def calls(self) -> int | None: ...

    @property
    def tokens(self) -> int | None: ...

    @property
    def cost(self) -> float | None: ...


class Ledger(Protocol):
    """What admission asks of its meter (:class:`~.spending.Meter`)."""

    scope: str

    @property
    def lock(self) -> threading.Lock: ...

    @property
    def cap(self) -> _Cap | None: ...

    def committed(self, holds: bool = True) -> Amount:
        """Spent, in flight and (``holds``) still held; the lock held."""
        ...

    def over(self, amount: Amount) -> tuple[str, float] | None:
        """The limit ``amount`` passes, with its value, or None."""
        ...

    def cost_of(self, usage: Usage) -> float: ...

    def spent_usage(self) -> Usage:
        """What was spent, priced; the lock held."""
        ...

    def reserve(self, prompt_chars: int, hold: Hold | None = None) -> Ticket: ...

    def release(self, ticket: Ticket) -> None: ...

    def settle(self, ticket: Ticket, usage: Usage) -> None: ...


@dataclass(eq=False)
class Hold:
    """What one admitted request may spend: ``need`` is held against the cap until
    :meth:`close`; ``used`` is what its calls have spent or have in flight."""

    admission: Admission
    need: Amount
    used: Amount = field(default_factory=Amount)

    @property
    def left(self) -> Amount:
        """What is still held for this request."""
        return (self.need - self.used).at_least_zero()

    def reserve(self, prompt_chars: int) -> Ticket:
        """One of this request's calls, paid from the hold while it lasts."""
        return self.admission.ledger.reserve(prompt_chars, self)

    def release(self, ticket: Ticket) -> None:
        self.admission.ledger.release(ticket)

    def settle(self, ticket: Ticket, usage: Usage) -> None:
        self.admission.ledger.settle(ticket, usage)

    def close(self) -> None:
        """The request is over: what it did not use goes back to the cap."""
        self.admission.close(self)


class Admission:
    """The holds of the requests a meter admitted and the turns of those waiting for room
    (see the module docstring); every change under the ``ledger``'s lock."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._holds: list[Hold] = []
        self._turns: list[Turn] = []

    @property
    def waiting(self) -> int:
        """Requests waiting for room right now."""
        return len(self._turns)

    def held(self) -> Amount:
        """What admitted requests still hold (the lock held)."""
        return sum((h.left for h in self._holds), Amount())

    async def admit(self, calls: tuple[int, int], tokens: Callable[[], tuple[int, int]]) -> Hold:
        """Hold what a request plans to spend before it starts: ``calls`` is its plan's
        ``(low, high)`` (equal unless adaptive m may stop early), ``tokens()`` its prompt
        and completion tokens at ``high`` (asked only under a token or cost cap).

        Waits while requests under way hold what it needs; raises :class:`SpendingCapError`
        (``needed`` set, nothing spent) once it can never fit. Under adaptive m a request
        that fits only at its fewest calls is admitted when nothing else is held."""
        need, least = self._needs(calls, tokens)
        lock = self.ledger.lock
        while True:
            with lock:
                hold = self._try_admit(need, least)
                if hold is not None:
                    return hold
                turn = Turn()
                self._turns.append(turn)
            try:
                await turn
            finally:
                with lock, contextlib.suppress(ValueError):
                    self._turns.remove(turn)

    def _needs(
        self, calls: tuple[int, int], tokens: Callable[[], tuple[int, int]]
    ) -> tuple[Amount, Amount]:
        low, high = calls
        cap = self.ledger.cap
        priced = cap is not None and bool(cap.tokens or cap.cost)
        prompt, completion = tokens() if priced else (0, 0)
        cost = self.ledger.cost_of(Usage(prompt_tokens=prompt, completion_tokens=completion))
        need = Amount(high, prompt + completion, cost)
        share = low / high if high else 1.0
        return need, Amount(low, int(need.tokens * share), need.cost * share)

    def _try_admit(self, need: Amount, least: Amount) -> Hold | None:
        """Under the lock: a hold for ``need`` if it fits now, else for ``least`` if nothing
        else is held and it fits; None to wait for the requests under way; or raise."""
        ledger = self.ledger
        committed = ledger.committed()
        if ledger.over(committed + need) is None:
            return self._hold(need)
        if self._holds and ledger.over(ledger.committed(holds=False) + least) is None:
            return None  # fits once the requests under way give back what they hold
        over = ledger.over(committed + least)
        if over is None:
            return self._hold(least)
        limit, cap = over
        needed = float(getattr(least, limit))
        raise SpendingCapError(ledger.scope, limit, cap, ledger.spent_usage(), needed=needed)

    def _hold(self, need: Amount) -> Hold:
        hold = Hold(self, need)
        self._holds.append(hold)
        return hold

    def close(self, hold: Hold) -> None:
        """Give back what ``hold`` did not use, and let every waiting request try again."""
        with self.ledger.lock:
            with contextlib.suppress(ValueError):
                self._holds.remove(hold)
            turns, self._turns = self._turns, []
        for turn in turns:
            turn.wake()  # (a closed loop's waiter: no one to wake)
