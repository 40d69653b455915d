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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from .errors import ConfigurationError, SpendingCapError
from .results import Usage

__all__ = ["SpendingCap", "Prices", "Meter", "charged", "parse_cap", "parse_prices"]

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


@dataclass(eq=False)
class _Ticket:
    """One call's reservation: its estimate until it finishes."""

    tokens: int
    cost: float


class Meter:
    """What one scope (a request, a ranker) has spent and has in flight, against its cap
    (``None``: counted, never refused). A request's meter is the one count of its usage: every
    attempt (:meth:`reserve`, then :meth:`settle` with its tokens, latency and whether it was a
    retry), cache hits and the calls adaptive m saved (:meth:`add`); an error raised out of the
    request carries a read of it (:attr:`spent`).

    Thread-safe: a ranker's meter is shared by every thread and event loop that uses it."""

    def __init__(self, cap: SpendingCap | None, scope: str, prices: Prices | None = None) -> None:
        self.cap, self.scope, self.prices = cap, scope, prices
        self._lock = threading.Lock()
        self._spent = Usage()
        self._flight: list[_Ticket] = []
        self._largest = _Ticket(0, 0.0)

    @property
    def spent(self) -> Usage:
        """Calls sent, tokens reported, retries and latency so far (with ``cost`` when prices
        are known); a request's meter also counts cache hits and saved calls."""
        with self._lock:
            return self._priced(self._spent)

    def _priced(self, usage: Usage) -> Usage:
        return self.prices.priced(usage) if self.prices else usage

    def reserve(self, prompt_chars: int) -> _Ticket:
        """Count a call about to be sent, or raise :class:`SpendingCapError` if it would pass
        the cap (then nothing is counted and the call must not be sent)."""
        with self._lock:
            if self.cap is None:
                est = _NOTHING
            else:
                est = self._estimate(prompt_chars)
                over = self._over([*self._flight, est])
                if over is not None:
                    raise SpendingCapError(self.scope, *over, self._priced(self._spent))
                self._flight.append(est)
            self._spent += _ONE_CALL
            return est

    def _estimate(self, prompt_chars: int) -> _Ticket:
        guess = max(prompt_chars // CHARS_PER_TOKEN, 1)
        return _Ticket(
            max(self._largest.tokens, guess),
            max(self._largest.cost, self._cost(Usage(prompt_tokens=guess))),
        )

    def _over(self, flight: list[_Ticket]) -> tuple[str, float] | None:
        """The limit one more call would pass, with its value, or None."""
        c = self.cap
        assert c is not None
        if c.calls is not None and self._spent.calls + 1 > c.calls:
            return "calls", c.calls
        tokens = self._spent.total_tokens + sum(t.tokens for t in flight)
        if c.tokens is not None and tokens > c.tokens:
            return "tokens", c.tokens
        cost = self._cost(self._spent) + sum(t.cost for t in flight)
        if c.cost is not None and cost > c.cost:
            return "cost", c.cost
        return None

    def release(self, ticket: _Ticket) -> None:
        """Undo :meth:`reserve`: the call was not sent after all."""
        with self._lock:
            self._drop(ticket)
            self._spent += Usage(calls=-1)

    def settle(self, ticket: _Ticket, usage: Usage) -> None:
        """The call of ``ticket`` finished (or failed): ``usage`` holds the tokens it reported,
        its latency and whether it was a retry (its call was counted by :meth:`reserve`)."""
        with self._lock:
            self._drop(ticket)
            self._spent += usage
            if self.cap is not None:
                self._largest = _Ticket(
                    max(self._largest.tokens, usage.total_tokens),
                    max(self._largest.cost, self._cost(usage)),
                )

    def add(self, usage: Usage) -> None:
        """Count what no attempt carries: cache hits, calls adaptive m did not need."""
        with self._lock:
            self._spent += usage

    def _drop(self, ticket: _Ticket) -> None:
        if ticket is not _NOTHING:
            with contextlib.suppress(ValueError):
                self._flight.remove(ticket)

    def _cost(self, usage: Usage) -> float:
        return self.prices.cost(usage) if self.prices else 0.0


_NOTHING = _Ticket(0, 0.0)  # the reservation of an uncapped meter: nothing in flight to track
_ONE_CALL = Usage(calls=1)


def prompt_chars(messages: Any) -> int:
    """A prompt's size in characters, what :func:`charged` estimates its tokens from."""
    return sum(len(m["content"]) for m in messages)


@contextlib.contextmanager
def charged(meters: Sequence[Meter], prompt_chars: int) -> Iterator[list[Usage]]:
    """Around one attempt: reserve it on every meter (raising :class:`SpendingCapError` before
    it is sent if one would be passed), then settle what the caller appends to the yielded
    list (its tokens, latency, retry) on each."""
    tickets: list[tuple[Meter, _Ticket]] = []
    try:
        for meter in meters:
            tickets.append((meter, meter.reserve(prompt_chars)))
    except SpendingCapError:
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
