"""Spending caps: a hard limit on calls, tokens and cost, checked before every call is sent.

A :class:`SpendingCap` bounds one request (``request_cap``) or everything a ranker runs
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
- ``cost`` needs :class:`Prices` (per million prompt and completion tokens, in the user's
  currency); with prices known every ``usage`` also reports its ``cost``.

A ranker's cap also *admits* requests (:meth:`Meter.admit`): before a request starts, the
calls its strategy plans (and, under a token or cost cap, their tokens, estimated as
``permsc estimate`` does) are held for it, so a request starts only when the cap can pay
for all of it; one that cannot wait while others are under way (what they did not use is
given back when they finish), and is refused, having spent nothing, once nothing else
holds any. A cap of "about 5 queries" ranks about 5, however many are sent at once; calls
beyond a plan (re-asks, retries) are paid from what no request holds.

Example:
    >>> cap = SpendingCap.parse("calls=100,tokens=50000,cost=0.25")
    >>> cap.calls, cap.tokens, cap.cost
    (100, 50000, 0.25)
    >>> Prices.parse("0.15,0.60").cost(Usage(prompt_tokens=1_000_000, completion_tokens=10))
    0.150006
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from permsc_integrations._calls.admission import Admitting, Amount, Hold, Waiter
from permsc_integrations._registry import publish
from permsc_integrations.errors import BudgetSpentError, ConfigurationError, SpendingCapError
from permsc_integrations.results import Usage

__all__ = [
    "SpendingCap",
    "Prices",
    "Meter",
    "Hold",
    "Amount",
    "Charged",
    "admitted",
    "charged",
    "parse_cap",
    "parse_prices",
]

CHARS_PER_TOKEN = 4  # as permsc estimate: no tokenizer needed


def _positive(name: str, value: Any, kind: type) -> Any:
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or (kind is int and not isinstance(value, int)) or not value > 0:
        raise ConfigurationError(f"cap {name} must be a {kind.__name__} > 0 or None, got {value!r}")
    if not math.isfinite(value):
        raise ConfigurationError(f"cap {name} must be finite, got {value!r}")
    return kind(value)


@dataclass(frozen=True, slots=True)
class SpendingCap:
    """At most ``calls`` calls, ``tokens`` tokens (prompt + completion) and ``cost`` (with
    :class:`Prices`); ``None`` leaves that one open."""

    calls: int | None = None
    tokens: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", _positive("calls", self.calls, int))
        object.__setattr__(self, "tokens", _positive("tokens", self.tokens, int))
        object.__setattr__(self, "cost", _positive("cost", self.cost, float))
        if self.calls is self.tokens is self.cost is None:
            raise ConfigurationError("a SpendingCap needs calls=, tokens= or cost= (or use None)")

    @classmethod
    def parse(cls, text: str) -> SpendingCap:
        """``"calls=100,tokens=50000,cost=0.25"`` (any of the three, in any order)."""
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = part.partition("=")
            if not sep or name.strip() not in ("calls", "tokens", "cost"):
                raise ConfigurationError(
                    f"a cap is 'calls=N,tokens=N,cost=X' (any of them), got {text!r}"
                )
            try:
                number = float(raw) if name.strip() == "cost" else int(float(raw))
            except ValueError:
                raise ConfigurationError(f"cap {name.strip()}: not a number: {raw!r}") from None
            values[name.strip()] = number
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per million prompt (input) and completion (output) tokens."""

    prompt: float
    completion: float

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"price {f.name} must be a number >= 0, got {value!r}")
            object.__setattr__(self, f.name, float(value))

    @classmethod
    def parse(cls, text: str) -> Prices:
        """``"0.15,0.60"``: prompt and completion prices per million tokens."""
        try:
            prompt, completion = (float(p) for p in text.split(","))
        except ValueError:
            raise ConfigurationError(
                f"prices are 'PROMPT,COMPLETION' per million tokens, got {text!r}"
            ) from None
        return cls(prompt, completion)

    def cost(self, usage: Usage) -> float:
        """What ``usage``'s tokens cost."""
        raw = usage.prompt_tokens * self.prompt + usage.completion_tokens * self.completion
        return round(raw / 1_000_000, 12)

    def priced(self, usage: Usage) -> Usage:
        """``usage`` with its ``cost``."""
        return replace(usage, cost=self.cost(usage))


def parse_cap(name: str, value: Any) -> SpendingCap | None:
    """An option's value as a cap: None, a SpendingCap, its string or a mapping (to_dict)."""
    if value is None or isinstance(value, SpendingCap):
        return value
    if isinstance(value, str):
        return SpendingCap.parse(value)
    if isinstance(value, Mapping):
        try:
            return SpendingCap(**value)
        except TypeError as exc:
            raise ConfigurationError(f"{name}: {exc}") from None
    raise ConfigurationError(
        f"{name} must be None, a SpendingCap or 'calls=N,tokens=N,cost=X', got {value!r}"
    )


def parse_prices(name: str, value: Any) -> Prices | None:
    """An option's value as prices: None, Prices, ``"PROMPT,COMPLETION"`` or a mapping."""
    if value is None or isinstance(value, Prices):
        return value
    if isinstance(value, str):
        return Prices.parse(value)
    if isinstance(value, Mapping):
        try:
            return Prices(**value)
        except TypeError as exc:
            raise ConfigurationError(f"{name}: {exc}") from None
    raise ConfigurationError(
        f"{name} must be None, Prices(prompt, completion) or 'PROMPT,COMPLETION' per million "
        f"tokens, got {value!r}"
    )


class Charged(Protocol):
    """What :func:`charged` asks of a scope: a :class:`Meter`, or a request's :class:`Hold`."""

    def reserve(self, prompt_chars: int) -> _Ticket: ...

    def release(self, ticket: _Ticket) -> None: ...

    def settle(self, ticket: _Ticket, usage: Usage) -> None: ...


@dataclass(eq=False)
class _Ticket:
    """One call's reservation: its estimate until it finishes (and the hold it draws on)."""

    tokens: int
    cost: float
    hold: Hold | None = None


class Meter(Admitting):
    """What one scope (a request, a ranker) has spent, has in flight and holds, against its cap
    (``None``: counted, never refused). A request's meter is the one count of its usage: every
    attempt (:meth:`reserve`, then :meth:`settle` with its tokens, latency and whether it was a
    retry), cache hits and the calls adaptive m saved (:meth:`add`); an error raised out of the
    request carries a read of it (:attr:`spent`).

    A request's ``budget`` (``max_calls``) is the most calls it may send: past it
    :meth:`reserve` raises :class:`~.errors.BudgetSpentError` (the call is not sent, the
    request goes on with the answers it has), where a cap raises :class:`SpendingCapError`.

    Thread-safe: a ranker's meter is shared by every thread and event loop that uses it."""

    cap: SpendingCap | None  # type: ignore[assignment]  # Admitting's cap: set when it admits

    def __init__(
        self,
        cap: SpendingCap | None,
        scope: str,
        prices: Prices | None = None,
        *,
        budget: int | None = None,
    ) -> None:
        self.cap, self.scope, self.prices, self.budget = cap, scope, prices, budget
        self._lock = threading.Lock()
        self._spent = Usage()
        self._flight: list[_Ticket] = []
        self._largest = _Ticket(0, 0.0)
        self._holds: list[Hold] = []
        self._waiters: list[Waiter] = []
        self.refused = 0  # calls the budget refused (the request's ``stopped="budget"``)

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
        held = sum((h.left for h in self._holds), Amount()) if holds else Amount()
        return spent + flight + held

    def reserve(self, prompt_chars: int, hold: Hold | None = None) -> _Ticket:
        """Count a call about to be sent, or raise :class:`SpendingCapError` if it would pass
        the cap (:class:`~.errors.BudgetSpentError` the budget): then nothing is counted and
        the call must not be sent. A call of an admitted request (``hold``) is paid from what
        is held for it while that lasts."""
        if self.cap is None:  # nothing in flight to track
            with self._lock:
                self._count_call()
            return _NOTHING
        guess = max(prompt_chars // CHARS_PER_TOKEN, 1)
        with self._lock:
            est = _Ticket(
                max(self._largest.tokens, guess),
                max(self._largest.cost, self.cost_of(Usage(prompt_tokens=guess))),
                hold,
            )
            self._count_call()
            self._flight.append(est)
            self._use(est, Amount(1, est.tokens, est.cost))
            over = self.over(self.committed())
            if over is not None:
                self._undo(est)
                raise SpendingCapError(self.scope, *over, self._priced(self._spent))
            return est

    def _count_call(self) -> None:
        """Count one call (the lock held), unless the budget is spent: then refuse it."""
        if self.budget is not None and self._spent.calls >= self.budget:
            self.refused += 1
            raise BudgetSpentError(self.budget)
        self._spent += _ONE_CALL

    def take(self, calls: int) -> None:
        """Count ``calls`` more calls at once (the other prompts of a batch, each a call), or
        refuse them all with :class:`~.errors.BudgetSpentError` if the budget cannot pay."""
        with self._lock:
            if self.budget is not None and self._spent.calls + calls > self.budget:
                self.refused += 1
                raise BudgetSpentError(self.budget)
            self._spent += Usage(calls=calls)

    def room(self, calls: int) -> int:
        """How many of ``calls`` prompts the budget still pays for (all of them without one)."""
        if self.budget is None:
            return calls
        with self._lock:
            return max(0, min(calls, self.budget - self._spent.calls))

    def _use(self, ticket: _Ticket, amount: Amount) -> None:
        if ticket.hold is not None:
            ticket.hold.used += amount

    def _undo(self, ticket: _Ticket) -> None:
        if ticket is not _NOTHING:
            self._flight.remove(ticket)
            self._use(ticket, Amount(-1, -ticket.tokens, -ticket.cost))
        self._spent += Usage(calls=-1)

    def over(self, amount: Amount) -> tuple[str, float] | None:
        """The limit ``amount`` passes, with its value, or None."""
        c = self.cap
        if c is None:
            return None
        if c.calls is not None and amount.calls > c.calls:
            return "calls", c.calls
        if c.tokens is not None and amount.tokens > c.tokens:
            return "tokens", c.tokens
        if c.cost is not None and amount.cost > c.cost:
            return "cost", c.cost
        return None

    def release(self, ticket: _Ticket) -> None:
        """Undo :meth:`reserve`: the call was not sent after all."""
        with self._lock:
            self._undo(ticket)

    def settle(self, ticket: _Ticket, usage: Usage) -> None:
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
            self._largest = _Ticket(
                max(self._largest.tokens, tokens), max(self._largest.cost, self.cost_of(usage))
            )

    def add(self, usage: Usage) -> None:
        """Count what no attempt carries: cache hits, calls adaptive m did not need."""
        with self._lock:
            self._spent += usage

    def cost_of(self, usage: Usage) -> float:
        return self.prices.cost(usage) if self.prices else 0.0


_NOTHING = _Ticket(0, 0.0)  # the reservation of an uncapped meter: nothing in flight to track
_ONE_CALL = Usage(calls=1)


@contextlib.asynccontextmanager
async def admitted(
    meter: Meter | None, calls: tuple[int, int], tokens: Callable[[], tuple[int, int]]
) -> AsyncIterator[Hold | None]:
    """Around one request under a ranker's cap: admitted with :meth:`Meter.admit` (waiting for
    room, or refused), its hold yielded to charge its calls to (:func:`charged`) and closed
    at the end; without a ``meter``, None."""
    hold = await meter.admit(calls, tokens) if meter is not None else None
    try:
        yield hold
    finally:
        if hold is not None:
            hold.close()


def prompt_chars(messages: Any) -> int:
    """A prompt's size in characters, what :func:`charged` estimates its tokens from."""
    return sum(len(m["content"]) for m in messages)


@contextlib.contextmanager
def charged(meters: Sequence[Charged], prompt_chars: int) -> Iterator[list[Usage]]:
    """Around one attempt: reserve it on every meter (a :class:`Meter`, or an admitted
    request's :class:`Hold` on one), raising :class:`SpendingCapError` before it is sent if
    one would be passed; then settle what the caller appends to the yielded list (its tokens,
    latency, retry) on each."""
    tickets: list[tuple[Charged, _Ticket]] = []
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


publish("permsc_integrations", SpendingCap, Prices)
