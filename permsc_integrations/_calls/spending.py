"""Meters: what a scope spent, checked against its cap before every call is sent.

A :class:`~.caps.SpendingCap` bounds one request (``request_cap``) or everything a ranker runs
(``ranker_cap``: every request, thread and event loop that uses it, together). Before each
attempt goes out, every meter that applies checks that the call keeps its scope within the
cap; if not, the call is not sent and :class:`~.errors.SpendingCapError` says which cap was
hit and carries what was spent so far.

- ``calls`` is exact: a call sent counts, whatever its outcome (retries and re-asks included;
  cache hits are not calls).
- ``tokens`` and ``cost`` count what finished calls reported, plus an estimate for each call
  in flight and for the one about to go: the largest call seen so far in that scope, or the
  prompt's characters / 4 before any call has finished. Tokens are known only once a call
  returns, so a call larger than its estimate can pass the cap by the difference; no call
  is sent once the cap is reached.
- ``cost`` needs :class:`~.caps.Prices` (per million prompt and completion tokens, in the user's
  currency); with prices known every ``usage`` also reports its ``cost``.

A ranker's cap also *admits* requests (:func:`admitted`, :mod:`.admission`): before a
request starts, the calls its strategy plans (and, under a token or cost cap, their tokens,
estimated as ``permsc estimate`` does) are held for it, so a request starts only when the cap
can pay for all of it; one that cannot wait while others are under way (what they did not use
is given back when they finish), and is refused, having spent nothing, once nothing else
holds any. A cap of "about 5 queries" ranks about 5, however many are sent at once; calls
beyond a plan (re-asks, retries) are paid from what no request holds.

Example:
    >>> meter = Meter(SpendingCap(calls=2), "request", budget=5)
    >>> with charged([meter], 40) as reported:
    ...     reported.append(Usage(prompt_tokens=10))
    >>> meter.spent.calls, meter.spent.prompt_tokens, meter.room(9)
    (1, 10, 4)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Protocol

from permsc_integrations._calls.admission import Admission, Amount, Hold, Ticket
from permsc_integrations._calls.caps import Prices, SpendingCap
from permsc_integrations.errors import BudgetSpentError, SpendingCapError
from permsc_integrations.results import Usage

__all__ = [
    "Meter",
    "Charged",
    "admitted",
    "charged",
    "prompt_chars",
    "passed",
    "usage_passes",
    "BUDGET_OPTIONS",
]

CHARS_PER_TOKEN = 4  # as permsc estimate: no tokenizer needed


class Charged(Protocol):
    """What :func:`charged` asks of a scope: a :class:`Meter`, or a request's :class:`Hold`."""

    def reserve(self, prompt_chars: int) -> Ticket: ...

    def release(self, ticket: Ticket) -> None: ...

    def settle(self, ticket: Ticket, usage: Usage) -> None: ...


class Meter:
    """What one scope (a request, a ranker) has spent, has in flight and holds, against its cap
    (``None``: counted, never refused). A request's meter is the one count of its usage: every
    attempt (:meth:`reserve`, then :meth:`settle` with its tokens, latency and whether it was a
    retry), cache hits and the calls adaptive m saved (:meth:`add`); an error raised out of the
    request carries a read of it (:attr:`spent`). A ranker's meter admits requests
    (:attr:`admission`).

    A request's ``budget`` (``max_calls``) is the most calls it may send: past it
    :meth:`reserve` raises :class:`~.errors.BudgetSpentError` (the call is not sent, the
    request goes on with the answers it has), where a cap raises :class:`SpendingCapError`;
    ``spend`` (``max_total_tokens``, ``max_cost``) is the same for tokens and cost, counted as
    a cap counts them (what finished calls reported, an estimate for those in flight);
    ``refused`` counts the times either refused (the request's ``stopped="budget"``).

    Thread-safe: a ranker's meter is shared by every thread and event loop that uses it."""

    def __init__(
        self,
        cap: SpendingCap | None,
        scope: str,
        prices: Prices | None = None,
        *,
        budget: int | None = None,
        spend: SpendingCap | None = None,
    ) -> None:
        self.cap, self.scope, self.prices, self.budget = cap, scope, prices, budget
        self.spend = spend
        self._lock = threading.Lock()
        self._spent = Usage()
        self._flight: list[Ticket] = []
        self._largest = Ticket(0, 0.0)
        self.admission = Admission(self)
        self.refused = 0

    @property
    def lock(self) -> threading.Lock:
        """The lock every count is changed under (:class:`~.admission.Admission`'s too)."""
        return self._lock

    @property
    def spent(self) -> Usage:
        """Calls sent, tokens reported, retries and latency so far (with ``cost`` when prices
        are known); a request's meter also counts cache hits and saved calls."""
        with self._lock:
            return self._priced(self._spent)

    def _priced(self, usage: Usage) -> Usage:
        return self.prices.priced(usage) if self.prices else usage

    def spent_usage(self) -> Usage:
        """:attr:`spent`, for a caller that holds the lock."""
        return self._priced(self._spent)

    def committed(self, holds: bool = True) -> Amount:
        """Spent, in flight and (``holds``) still held by admitted requests."""
        spent = Amount(self._spent.calls, self._spent.total_tokens, self.cost_of(self._spent))
        flight = Amount(0, sum(t.tokens for t in self._flight), sum(t.cost for t in self._flight))
        return spent + flight + (self.admission.held() if holds else Amount())

    def reserve(self, prompt_chars: int, hold: Hold | None = None) -> Ticket:
        """Count a call about to be sent, or raise :class:`SpendingCapError` if it would pass
        the cap (:class:`~.errors.BudgetSpentError` the budget): then nothing is counted and
        the call must not be sent. A call of an admitted request (``hold``) is paid from what
        is held for it while that lasts."""
        if self.cap is None and self.spend is None:  # nothing in flight to track
            with self._lock:
                self._take(1)
            return _NOTHING
        guess = max(prompt_chars // CHARS_PER_TOKEN, 1)
        with self._lock:
            est = Ticket(
                max(self._largest.tokens, guess),
                max(self._largest.cost, self.cost_of(Usage(prompt_tokens=guess))),
                hold,
            )
            self._take(1)
            self._flight.append(est)
            self._use(est, Amount(1, est.tokens, est.cost))
            over = self.over(self.committed())
            if over is not None:
                self._undo(est)
                raise SpendingCapError(self.scope, *over, self._priced(self._spent))
            spent = passed(self.spend, self.committed(holds=False))
            if spent is not None:
                self._undo(est)
                self.refused += 1
                raise BudgetSpentError(spent[1], BUDGET_OPTIONS[spent[0]])
            return est

    def affordable(self, cap: int | None = None) -> int | None:
        """The calls in all that ``spend`` pays for at what a call has cost so far (the calls
        spent, and what is left at their mean tokens and cost), at most ``cap``; the request's
        ``budget`` becomes that. None without a ``spend``, before any call has reported or
        while one is in flight."""
        with self._lock:
            spent, limits = self._spent, self.spend
            if limits is None or spent.calls == 0 or self._flight or not spent.total_tokens:
                return None
            per = [(limits.tokens, spent.total_tokens), (limits.cost, self.cost_of(spent))]
            more = [int((lim - used) * spent.calls // used) for lim, used in per if lim and used]
            calls = spent.calls + max(0, min(more, default=0))
            self.budget = calls if cap is None else min(cap, calls)
            return self.budget

    def take(self, calls: int) -> None:
        """Count ``calls`` more calls at once (the other prompts of a batch, each a call), or
        refuse them all with :class:`~.errors.BudgetSpentError` if the budget cannot pay."""
        with self._lock:
            self._take(calls)

    def room(self, calls: int) -> int:
        """How many of ``calls`` prompts the budget still pays for (all of them without one);
        fewer than all is a refusal, counted in ``refused``."""
        with self._lock:
            left = self._left()
            if left is None or left >= calls:
                return calls
            self.refused += 1
            return max(0, left)

    def _left(self) -> int | None:
        """The calls the budget still pays for (None: no budget); the lock held."""
        return None if self.budget is None else self.budget - self._spent.calls

    def _take(self, calls: int) -> None:
        """Count ``calls`` calls, the lock held, or refuse them all (counted in ``refused``)."""
        left = self._left()
        if left is not None and left < calls:
            self.refused += 1
            raise BudgetSpentError(self.budget or 0, BUDGET_OPTIONS["calls"])
        self._spent += Usage(calls=calls)

    def _use(self, ticket: Ticket, amount: Amount) -> None:
        if ticket.hold is not None:
            ticket.hold.used += amount

    def _undo(self, ticket: Ticket) -> None:
        if ticket is not _NOTHING:
            self._flight.remove(ticket)
            self._use(ticket, Amount(-1, -ticket.tokens, -ticket.cost))
        self._spent += Usage(calls=-1)

    def over(self, amount: Amount) -> tuple[str, float] | None:
        """The limit of the cap ``amount`` passes, with its value, or None."""
        return passed(self.cap, amount)

    def release(self, ticket: Ticket) -> None:
        """Undo :meth:`reserve`: the call was not sent after all."""
        with self._lock:
            self._undo(ticket)

    def settle(self, ticket: Ticket, usage: Usage) -> None:
        """The call of ``ticket`` finished (or failed): ``usage`` holds the tokens it reported,
        its latency and whether it was a retry (its call was counted by :meth:`reserve`)."""
        with self._lock:
            self._spent += usage
            if ticket is _NOTHING:
                return
            with contextlib.suppress(ValueError):
                self._flight.remove(ticket)
            tokens = usage.total_tokens
            actual = Amount(0, tokens, self.cost_of(usage))
            self._use(ticket, actual - Amount(0, ticket.tokens, ticket.cost))
            self._largest = Ticket(
                max(self._largest.tokens, tokens), max(self._largest.cost, self.cost_of(usage))
            )

    def add(self, usage: Usage) -> None:
        """Count what no attempt carries: cache hits, calls adaptive m did not need."""
        with self._lock:
            self._spent += usage

    def cost_of(self, usage: Usage) -> float:
        return self.prices.cost(usage) if self.prices else 0.0


def passed(limits: SpendingCap | None, amount: Amount) -> tuple[str, float] | None:
    """The limit of ``limits`` (a cap, or a request's ``spend``) that ``amount`` passes,
    with its value, or None."""
    if limits is None:
        return None
    if limits.calls is not None and amount.calls > limits.calls:
        return "calls", limits.calls
    if limits.tokens is not None and amount.tokens > limits.tokens:
        return "tokens", limits.tokens
    if limits.cost is not None and amount.cost > limits.cost:
        return "cost", limits.cost
    return None


def usage_passes(limits: SpendingCap | None, usage: Usage, prices: Prices | None) -> bool:
    """Whether ``usage`` (its cost at ``prices``) passes a limit of ``limits``
    (:func:`passed`): an estimate of what a plan spends, against a cap or a budget."""
    cost = prices.cost(usage) if prices is not None else 0.0
    return passed(limits, Amount(usage.calls, usage.total_tokens, cost)) is not None


BUDGET_OPTIONS = {"calls": "max_calls", "tokens": "max_total_tokens", "cost": "max_cost"}
"""The option that sets each limit of a request's budget (the meter's ``budget``, ``spend``)."""
_NOTHING = Ticket(0, 0.0)  # the reservation of an uncapped meter: nothing in flight to track


@contextlib.asynccontextmanager
async def admitted(
    meter: Meter | None, calls: tuple[int, int], tokens: Callable[[], tuple[int, int]]
) -> AsyncIterator[Hold | None]:
    """Around one request under a ranker's cap: admitted by the meter's
    :class:`~.admission.Admission` (waiting for room, or refused), its hold yielded to charge
    its calls to (:func:`charged`) and closed at the end; without a ``meter``, None."""
    hold = await meter.admission.admit(calls, tokens) if meter is not None else None
    try:
        yield hold
    finally:
        if hold is not None:
            hold.close()


def prompt_chars(messages: Sequence[Mapping[str, str]]) -> int:
    """A prompt's size in characters, what :func:`charged` estimates its tokens from."""
    return sum(len(m["content"]) for m in messages)


@contextlib.contextmanager
def charged(meters: Sequence[Charged], prompt_chars: int) -> Iterator[list[Usage]]:
    """Around one attempt: reserve it on every meter (a :class:`Meter`, or an admitted
    request's :class:`Hold` on one), raising :class:`SpendingCapError` before it is sent if
    one would be passed; then settle what the caller appends to the yielded list (its tokens,
    latency, retry) on each."""
    tickets: list[tuple[Charged, Ticket]] = []
    try:
        for meter in meters:
            tickets.append((meter, meter.reserve(prompt_chars)))
    except (SpendingCapError, BudgetSpentError):
        for meter, ticket in tickets:  # the call is not sent: give the others back
            meter.release(ticket)
        raise
    reported: list[Usage] = []
    try:
        yield reported
    finally:
        total = sum(reported, Usage())
        for meter, ticket in tickets:
            meter.settle(ticket, total)
