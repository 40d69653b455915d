"""The ranker's breaker: after a failure that every later call would meet, no call is sent.

A failure that ``trips_breaker`` (a bad key 401/403, an unknown model, an exhausted quota)
opens it: each later call raises a copy of that error without being sent. What opened it
decides how it closes again:

- a cause that only a change on this side fixes (a bad key, an unknown model:
  ``BackendError.recovers`` is false) keeps it open until :meth:`Breaker.reset`
  (``ranker.reset_breaker()``);
- a cause that can go away by itself (an exhausted quota, topped up) keeps it open for
  ``cooldown`` seconds (the ``breaker_cooldown`` option). Then it is half-open: the next call
  goes out as the one probe, and the calls that come while it is out wait for its outcome.
  An answer closes the breaker and they all go; an error that trips it opens it again for
  another ``cooldown``; anything else (a timeout, a 5xx, a cancelled call) tells nothing, and
  the next call probes.

The clock is a monotonic seconds function (``clock=``), so tests move time instead of
sleeping.

Example:
    >>> from permsc_integrations.errors import QuotaExceededError
    >>> now = [0.0]
    >>> breaker = Breaker(cooldown=60, clock=lambda: now[0])
    >>> breaker.trip(QuotaExceededError("no credit"))
    >>> breaker.state
    'open'
    >>> now[0] = 60.0
    >>> breaker.state
    'half-open'
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Literal

from permsc_integrations._calls.turn import Turn
from permsc_integrations._checks import number
from permsc_integrations.errors import BackendError

__all__ = ["Breaker", "BreakerState", "Probe"]

BreakerState = Literal["closed", "open", "half-open"]


class Probe:
    """The one call a half-open breaker lets through; :meth:`Breaker.settle` takes it back."""

    __slots__ = ()


class Breaker:
    """Open once a call failed in a way that every later call would too (see the module
    docstring); shared by every call of one ranker, from any thread or event loop."""

    def __init__(
        self, cooldown: float = 60.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cooldown: float = number(positive=False)("breaker_cooldown", cooldown)
        self.clock = clock
        self._error: BackendError | None = None
        self._opened = 0.0
        self._probe: Probe | None = None
        self._lock = threading.Lock()
        self._waiters: list[Turn] = []

    def __repr__(self) -> str:
        return f"Breaker({self.state}, cooldown={self.cooldown:g})"

    @property
    def error(self) -> BackendError | None:
        """The error that opened the breaker (None while closed)."""
        return self._error

    @property
    def waiting(self) -> int:
        """Calls waiting for the probe's outcome (half-open)."""
        return len(self._waiters)

    @property
    def state(self) -> BreakerState:
        """``closed``, ``open`` (calls refused) or ``half-open`` (one probe may go)."""
        with self._lock:
            return self._state()

    def _state(self) -> BreakerState:
        if self._error is None:
            return "closed"
        if self._error.recovers and self.clock() - self._opened >= self.cooldown:
            return "half-open"
        return "open"

    def trip(self, error: BackendError) -> None:
        """Open on an error that ``trips_breaker``; one whose cause cannot recover replaces a
        recoverable one (a bad key found while the quota was out keeps it open)."""
        if not error.trips_breaker:
            return
        with self._lock:
            if self._error is None or (self._error.recovers and not error.recovers):
                self._open(error)

    def _open(self, error: BackendError) -> None:
        self._error, self._opened, self._probe = error, self.clock(), None

    def check(self) -> None:
        """Raise a copy of the error that opened the breaker while it is open (half-open: no
        error; :meth:`admit` decides, call by call)."""
        with self._lock:
            blocking = self._error if self._state() == "open" else None
        if blocking is not None:
            raise self._refusal(blocking)

    async def admit(self) -> Probe | None:
        """Just before a call is sent: None when closed; the :class:`Probe` for the first call
        when half-open (hand it to :meth:`settle` with the call's outcome), while later calls
        wait for that outcome; a copy of the error while open."""
        while True:
            with self._lock:
                state, error = self._state(), self._error
                if state == "half-open":
                    if self._probe is None:
                        self._probe = Probe()
                        return self._probe
                    turn = Turn()
                    self._waiters.append(turn)  # the probe's outcome wakes it
            if state == "closed" or error is None:
                return None
            if state == "open":
                raise self._refusal(error)
            try:
                await turn
            finally:
                self._withdraw(turn)

    def settle(self, probe: Probe | None, outcome: BaseException | None) -> None:
        """The probe's outcome (None: an answer): close, open again, or let the next call
        probe; the waiting calls then go on. Anything but a probe is ignored."""
        if probe is None:
            return
        with self._lock:
            if probe is not self._probe:
                return  # reset (or opened by another error) meanwhile
            if outcome is None:
                self._error, self._probe = None, None
            elif isinstance(outcome, BackendError) and outcome.trips_breaker:
                self._open(outcome)
            else:
                self._probe = None
        self._wake_all()

    def reset(self) -> None:
        """Close the breaker (the cause is fixed); waiting calls go on."""
        with self._lock:
            self._error, self._probe = None, None
        self._wake_all()

    def _refusal(self, error: BackendError) -> BackendError:
        clone = copy.copy(error)
        clone.__traceback__, clone.__cause__, clone.usage = None, None, None
        if error.recovers:
            left = max(0.0, self.cooldown - (self.clock() - self._opened))
            clone.retry_after = left  # when the probe may go (permsc serve: Retry-After)
            hint = (
                f"one call probes the upstream again in {left:.0f} s (breaker_cooldown="
                f"{self.cooldown:g}), or call ranker.reset_breaker()"
            )
        else:
            hint = "fix the cause, then call ranker.reset_breaker() (or make a new ranker)"
        note = f"not sent: an earlier call of this ranker failed with this error; {hint}"
        clone.__notes__ = [note]  # type: ignore[attr-defined]
        return clone

    def _withdraw(self, turn: Turn) -> None:
        with self._lock:
            if turn in self._waiters:
                self._waiters.remove(turn)

    def _wake_all(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for turn in waiters:
            turn.wake()  # (a closed loop's waiter: no one to wake)
