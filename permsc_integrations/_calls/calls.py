"""How one request's calls go out, and the one place what they cost is counted.

:meth:`Calls.send` sends one call (a prompt, a batch of prompts, a first-token read) with
retries (:mod:`.retry`: tenacity, ``Retry-After`` honoured). Each attempt, in this order:

1. holds a slot of every limiter (the request's, then the ranker's), never
   during a backoff, and the wait for it counts against no timeout;
2. is admitted by the ranker's :class:`~.breaker.Breaker` (refused while it is open; the one
   probe when it is half-open);
3. is charged to the request's meters (:func:`.spending.charged`): refused before it is sent
   if a spending cap would be passed;
4. is timed and counted: the request's meter (its one count of usage) and the sample's
   :class:`Tab` get the attempt, its retry, its latency and the tokens its answer reported.

Cache hits (:meth:`Calls.hit`) and the calls adaptive m did not need (:meth:`Calls.saved`) are
counted here too, so a request's usage is read from its meter and nowhere else rewritten.

Example:
    >>> import anyio
    >>> from permsc_integrations._calls.spending import Meter
    >>> from .breaker import Breaker
    >>> meter = Meter(None, "request")
    >>> calls = Calls("echo", RetryPolicy(), None, Breaker(), [], meter)
    >>> async def echo():
    ...     return "hi"
    >>> tab = Tab()
    >>> anyio.run(calls.send, echo, 2, tab)
    'hi'
    >>> tab.usage.calls, meter.spent.calls
    (1, 1)
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from permsc_integrations._calls.breaker import Breaker
from permsc_integrations._calls.limiter import CallLimiter
from permsc_integrations._calls.retry import Attempts, RetryPolicy
from permsc_integrations._calls.spending import Charged, Meter, charged
from permsc_integrations.backends.base import Completion, LabelProbabilities
from permsc_integrations.errors import (
    BackendError,
    BudgetSpentError,
    PermscError,
    SpendingCapError,
    add_note,
)
from permsc_integrations.results import Usage

__all__ = ["Calls", "Tab"]

T = TypeVar("T")


@dataclass(kw_only=True, slots=True)
class Tab:
    """What one sample (or one batch) has spent so far; :meth:`Calls.send` adds each attempt."""

    usage: Usage = field(default_factory=Usage)


class Calls:
    """One request's way out to the backend (see the module docstring): ``source`` names the
    backend in errors; ``meter`` is the request's (its one count), ``also`` the ranker's (its
    meter, or an admitted request's hold on it)."""

    def __init__(
        self,
        source: str,
        retry: RetryPolicy,
        timeout: float | None,
        breaker: Breaker,
        limiters: Sequence[CallLimiter],
        meter: Meter,
        also: Charged | None = None,
    ) -> None:
        self.source, self.retry, self.timeout = source, retry, timeout
        self.breaker = breaker
        self.meter = meter
        self.meters: tuple[Charged, ...] = (meter, also) if also is not None else (meter,)
        self.slots = _Slots(limiters)

    def _slot(self) -> _Slots:
        return self.slots

    async def send(
        self, call: Callable[[], Awaitable[T]], chars: int, tab: Tab, prompts: int = 1
    ) -> T:
        """``await call()`` with retries, each attempt under the limiters, the breaker and the
        spending caps, counted on the request's meter and on ``tab`` (``chars``: the prompt's
        size, what a cap estimates its tokens from). The last failure is raised as is, also
        when the budget (``max_calls``) refuses its retry: a call that was sent and failed is
        a failure, never a :class:`BudgetSpentError` (that means: not sent at all)."""
        self.breaker.check()
        attempts = Attempts(self.retry, self.timeout, guard=self._slot)
        failed: BackendError | None = None
        try:
            async for attempt in attempts:
                with attempt:  # a retryable failure is retried, the last one raised by the loop
                    try:
                        async with attempts:  # the limiter slots and the time limit
                            result = await self._admitted(
                                call, chars, tab, prompts, retry=attempts.retries > 0
                            )
                    except BackendError as exc:  # a timeout too (raised leaving ``attempts``)
                        failed = exc
                        raise
        except BudgetSpentError as spent:
            if failed is None:  # never sent: the caller skips it
                raise
            add_note(failed, f"its retry was not sent: {spent.option}={spent.budget:g} was spent")
            raise failed from None  # sent and failed: a failure, never a skip
        return result

    async def send_batch(
        self, call: Callable[[], Awaitable[list[T]]], chars: int, tabs: Sequence[Tab]
    ) -> list[T]:
        """:meth:`send` for a batch (one backend call) of ``len(tabs)`` prompts, each a call
        (every attempt counts them all, against ``max_calls`` too: all or none): each tab gets
        its prompt's calls and the tokens of its own answer, the first tab the retries (all the
        calls when it failed), and the latency is split evenly over the tabs."""
        whole = Tab()
        try:
            answers = await self.send(call, chars, whole, prompts=len(tabs))
            if len(answers) != len(tabs):
                raise BackendError(
                    f"{self.source}: batch of {len(tabs)} gave {len(answers)}", retryable=False
                )
        except BaseException:
            tabs[0].usage += whole.usage
            raise
        share = Usage(
            calls=whole.usage.calls // len(tabs), latency_s=whole.usage.latency_s / len(tabs)
        )
        tabs[0].usage += Usage(retries=whole.usage.retries, batches=whole.usage.batches)
        for tab, answer in zip(tabs, answers, strict=True):
            tab.usage += share + _tokens_of(answer)
        return answers

    async def _admitted(
        self, call: Callable[[], Awaitable[T]], chars: int, tab: Tab, prompts: int, *, retry: bool
    ) -> T:
        """One attempt, with a slot held: the breaker may have opened meanwhile, or this is
        its probe (settled with the attempt's outcome)."""
        probe = await self.breaker.admit()
        try:
            result = await self._counted(call, chars, tab, prompts, retry=retry)
        except BaseException as exc:
            self.breaker.settle(probe, exc)
            raise
        self.breaker.settle(probe, None)
        return result

    async def _counted(
        self, call: Callable[[], Awaitable[T]], chars: int, tab: Tab, prompts: int, *, retry: bool
    ) -> T:
        """One attempt charged to the meters and counted: the one place usage is written. An
        attempt at a batch of ``prompts`` prompts is that many calls on the request's meter
        (``max_calls`` counts the prompts a model answers, batched or not)."""
        if prompts > 1:
            self.meter.take(prompts - 1)  # all of the batch, or BudgetSpentError: not sent
        try:
            with charged(self.meters, chars) as reported:
                return await self._timed(call, tab, prompts, reported, retry=retry)
        except (SpendingCapError, BudgetSpentError):
            if prompts > 1:  # not sent after all: the batch's other prompts are given back
                self.meter.add(Usage(calls=1 - prompts))
            raise

    async def _timed(
        self,
        call: Callable[[], Awaitable[T]],
        tab: Tab,
        prompts: int,
        reported: list[Usage],
        *,
        retry: bool,
    ) -> T:
        began = time.perf_counter()
        answer: T | None = None
        try:
            answer = await _guarded(call, self.source)
            return answer
        finally:
            took = time.perf_counter() - began
            spent = Usage(retries=int(retry), latency_s=took, batches=1) + _tokens_of(answer)
            reported.append(spent)  # the meters counted the call itself when reserving
            tab.usage += Usage(calls=prompts) + spent

    def hit(self, tab: Tab) -> None:
        """A cache hit: counted as a cached call, not a call."""
        self.meter.add(_HIT)
        tab.usage += _HIT

    def saved(self, calls: int) -> None:
        """``calls`` calls adaptive m did not need to make."""
        if calls:
            self.meter.add(Usage(saved_calls=calls))


_HIT = Usage(cached_calls=1)


def _tokens_of(answer: object) -> Usage:
    """The tokens an answer (a completion, a first-token read, or a list of them) reported."""
    if isinstance(answer, Completion):
        u = answer.usage
        return Usage(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens)
    if isinstance(answer, LabelProbabilities):  # one token is generated, reported or not
        u = answer.usage
        return Usage(prompt_tokens=u.prompt_tokens, completion_tokens=max(1, u.completion_tokens))
    if isinstance(answer, list):
        return sum((_tokens_of(a) for a in answer), Usage())
    return Usage()


async def _guarded(call: Callable[[], Awaitable[T]], source: str) -> T:
    """``await call()``; anything but a library error (a backend bug, a malformed answer)
    becomes a non-retryable :class:`BackendError` that fails this sample only."""
    try:
        return await call()
    except PermscError:
        raise
    except Exception as exc:
        raise BackendError(
            f"{source} raised {type(exc).__name__}: {exc}; this sample failed (a bug in the "
            "backend or a malformed answer)",
            retryable=False,
        ) from exc


class _Slots:
    """Hold a slot of each limiter (the request's, then the ranker's), released in reverse."""

    def __init__(self, limiters: Sequence[CallLimiter]) -> None:
        self.limiters = tuple(limiters)

    async def __aenter__(self) -> None:
        for i, lim in enumerate(self.limiters):
            try:
                await lim.acquire()
            except BaseException:
                for held in reversed(self.limiters[:i]):
                    held.release()
                raise

    async def __aexit__(self, *exc: object) -> None:
        for lim in reversed(self.limiters):
            lim.release()
