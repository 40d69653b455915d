"""Retry policy: bounded attempts and time, Retry-After honoured, only retryable errors.

Driven through :meth:`Calls.send`, the one retry loop production runs (every call a request
sends goes out there), with a real :class:`CallLimiter` as the slot an attempt holds."""

from __future__ import annotations

import time

import anyio
import pytest

from permsc_integrations._calls.breaker import Breaker
from permsc_integrations._calls.calls import Calls, Tab
from permsc_integrations._calls.limiter import CallLimiter
from permsc_integrations._calls.retry import RetryPolicy
from permsc_integrations._calls.spending import Meter
from permsc_integrations.errors import (
    BackendError,
    BackendTimeoutError,
    ConfigurationError,
    ContextLengthError,
    RateLimitError,
)

pytestmark = pytest.mark.timeout(20)  # the hangs these tests guard against last 30 s

FAST = RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.02, jitter=0.0)


async def sent(
    fn, policy: RetryPolicy, timeout: float | None, *, slot: CallLimiter | None = None
) -> tuple[object, int]:
    """``fn`` sent as a request's calls are (:meth:`Calls.send`): its answer and its retries."""
    limiters = [] if slot is None else [slot]
    calls = Calls("test", policy, timeout, Breaker(), limiters, Meter(None, "request"))
    tab = Tab()
    result = await calls.send(fn, 0, tab)
    assert calls.meter.spent.retries == tab.usage.retries  # one count, on the meter too
    return result, tab.usage.retries


class Waits(list):
    """The backoff waits the retry layer asked for, in order (it sleeps with ``anyio.sleep``);
    ``asked`` is set at the first. They are slept for real: a wrong 30 s wait still shows."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = anyio.Event()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Waits:
    recorded, real_sleep = Waits(), anyio.sleep

    async def sleep(delay: float) -> None:
        recorded.append(delay)
        recorded.asked.set()
        await real_sleep(delay)

    monkeypatch.setattr(anyio, "sleep", sleep)
    return recorded


class Failing:
    """Raise ``errors[k]`` on call k (then succeed); records when each call started."""

    def __init__(self, *errors: BaseException | None) -> None:
        self.errors = list(errors)
        self.started: list[float] = []

    async def __call__(self) -> str:
        self.started.append(time.monotonic())
        k = len(self.started) - 1
        if k < len(self.errors) and self.errors[k] is not None:
            raise self.errors[k]
        return f"ok after {k}"


async def test_retryable_errors_are_retried_until_success() -> None:
    fn = Failing(BackendError("boom", retryable=True, status_code=500), RateLimitError("429"))
    result, retries = await sent(fn, FAST, timeout=5)
    assert (result, retries) == ("ok after 2", 2)


async def test_attempts_are_bounded() -> None:
    fn = Failing(*[BackendError("500", retryable=True)] * 10)
    with pytest.raises(BackendError, match="500"):
        await sent(fn, FAST, timeout=5)
    assert len(fn.started) == FAST.max_attempts


@pytest.mark.parametrize("error", [ContextLengthError("too long"), BackendError("400 bad request")])
async def test_non_retryable_errors_fail_at_once(error: BackendError) -> None:
    fn = Failing(error)
    with pytest.raises(type(error)):
        await sent(fn, FAST, timeout=5)
    assert len(fn.started) == 1


async def test_other_exceptions_are_not_retried() -> None:
    """A backend bug fails its sample as a non-retryable BackendError (the KeyError its cause)."""
    fn = Failing(KeyError("bug"))
    with pytest.raises(BackendError, match="KeyError") as raised:
        await sent(fn, FAST, timeout=5)
    assert not raised.value.retryable and isinstance(raised.value.__cause__, KeyError)
    assert len(fn.started) == 1


async def test_retry_after_is_honoured_over_backoff(waits: Waits) -> None:
    slow_backoff = RetryPolicy(max_attempts=3, initial_backoff=30.0, max_backoff=30.0, jitter=0.0)
    fn = Failing(RateLimitError("429", retry_after=0.3))
    result, retries = await sent(fn, slow_backoff, timeout=5)
    assert retries == 1 and result == "ok after 1"
    assert waits == [0.3]  # not the 30 s backoff (that would also outlast the test's timeout)
    assert fn.started[1] - fn.started[0] >= 0.29


async def test_a_retry_after_past_the_cap_is_raised_at_once(waits: Waits) -> None:
    """Waiting max_retry_after and asking again before the server's Retry-After would only be
    refused again (and holds the caller meanwhile): the error goes up at once, with the
    server's retry_after for the caller to pass on (permsc serve's 429 says Retry-After)."""
    policy = RetryPolicy(max_attempts=4, initial_backoff=0.0, jitter=0.0, max_retry_after=60.0)
    fn = Failing(RateLimitError("429", retry_after=3600))
    with pytest.raises(RateLimitError) as raised:
        await sent(fn, policy, timeout=5)
    assert raised.value.retry_after == 3600
    assert waits == [] and len(fn.started) == 1
    at_the_cap = Failing(RateLimitError("429", retry_after=0.05))
    capped = RetryPolicy(max_attempts=2, initial_backoff=0.0, jitter=0.0, max_retry_after=0.05)
    await sent(at_the_cap, capped, timeout=5)
    assert waits == [0.05] and len(at_the_cap.started) == 2


async def test_backoff_grows_exponentially(waits: Waits) -> None:
    policy = RetryPolicy(max_attempts=4, initial_backoff=0.05, max_backoff=10, jitter=0.0)
    fn = Failing(*[BackendError("503", retryable=True)] * 3)
    await sent(fn, policy, timeout=5)
    assert waits == [0.05, 0.1, 0.2]
    gaps = [b - a for a, b in zip(fn.started, fn.started[1:], strict=False)]
    assert gaps[0] >= 0.045 and gaps[1] >= 0.095 and gaps[2] >= 0.19, gaps


async def test_total_time_is_bounded(waits: Waits) -> None:
    policy = RetryPolicy(
        max_attempts=100, initial_backoff=0.1, max_backoff=0.1, jitter=0.0, max_total_time=0.5
    )
    fn = Failing(*[BackendError("503", retryable=True)] * 100)
    with pytest.raises(BackendError):
        await sent(fn, policy, timeout=5)
    assert 2 <= len(fn.started) <= 5 and len(waits) == len(fn.started) - 1
    # no wait was asked that would end past the 0.5 s budget (measured from the first try)
    assert all(start - fn.started[0] + 0.1 < 0.5 for start in fn.started[:-1])


async def test_per_call_timeout_raises_a_retryable_timeout() -> None:
    calls = []

    async def slow_then_fast() -> str:
        calls.append(1)
        if len(calls) == 1:
            await anyio.sleep(30)
        return "fast"

    with anyio.fail_after(5):
        result, retries = await sent(slow_then_fast, FAST, timeout=0.2)
    assert (result, retries) == ("fast", 1)


async def test_a_call_that_always_hangs_ends_in_backend_timeout_error() -> None:
    async def hang() -> None:
        await anyio.sleep(30)

    with pytest.raises(BackendTimeoutError, match="timeout"):  # not a 30 s hang (test timeout)
        await sent(
            hang, RetryPolicy(max_attempts=2, initial_backoff=0, jitter=0), timeout=0.1
        )


async def test_total_time_also_cuts_a_slow_attempt() -> None:
    async def hang() -> None:
        await anyio.sleep(30)

    with pytest.raises(BackendTimeoutError, match="budget"):  # not a 30 s hang (test timeout)
        await sent(hang, RetryPolicy(max_total_time=0.3), timeout=10)


async def test_cancellation_during_backoff_is_prompt(waits: Waits) -> None:
    policy = RetryPolicy(max_attempts=5, initial_backoff=30, max_backoff=30, jitter=0)
    fn = Failing(*[BackendError("503", retryable=True)] * 5)

    async def cancel_in_the_backoff(scope: anyio.CancelScope) -> None:
        await waits.asked.wait()
        scope.cancel()

    async with anyio.create_task_group() as group:  # a 30 s backoff fails on the test timeout
        group.start_soon(cancel_in_the_backoff, group.cancel_scope)
        await sent(fn, policy, timeout=5)
    assert group.cancel_scope.cancelled_caught and len(fn.started) == 1 and waits == [30]


@pytest.mark.parametrize(
    "kwargs",
    [dict(max_attempts=0), dict(initial_backoff=-1), dict(max_total_time=0), dict(jitter=-0.1)],
)
def test_bad_policy_raises_configuration_error(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)


async def test_the_slot_is_held_per_attempt_and_released_during_backoff(waits: Waits) -> None:
    slot = CallLimiter(1)
    holders: list[int] = []

    class Watched(Failing):  # how many held the slot at each attempt
        async def __call__(self) -> str:
            holders.append(slot.borrowed_tokens)
            return await super().__call__()

    fn = Watched(RateLimitError("429", retry_after=0.3))
    free_during_backoff: list[bool] = []

    async def neighbour() -> None:
        await waits.asked.wait()  # the call is in its backoff now
        free_during_backoff.append(slot.borrowed_tokens == 0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(neighbour)
        await sent(fn, FAST, timeout=5, slot=slot)
    assert holders == [1, 1], "each attempt held the slot"
    assert free_during_backoff == [True], "the slot was free during the wait"


async def hog_until_queued(slot: CallLimiter, seconds: float, until) -> float:
    """Hold ``slot`` until another task queues for it, then ``seconds`` more; returns when
    the slot was given back."""
    async with slot:
        await until(lambda: slot.waiting == 1)
        await anyio.sleep(seconds)
        return time.monotonic()


async def test_waiting_for_the_slot_does_not_count_against_the_timeout(until) -> None:
    slot = CallLimiter(1)
    fn = Failing()
    released: list[float] = []

    async def hog() -> None:
        released.append(await hog_until_queued(slot, 0.3, until))  # 3 x the call's timeout

    async with anyio.create_task_group() as tg:
        tg.start_soon(hog)
        await until(lambda: slot.borrowed_tokens == 1)
        result, retries = await sent(fn, FAST, timeout=0.1, slot=slot)
    assert (result, retries) == ("ok after 0", 0)
    assert fn.started[0] >= released[0], "the call queued for the slot"


async def test_waiting_for_the_slot_does_not_count_against_the_retry_budget(until) -> None:
    """A healthy call that queued longer than max_total_time still gets its attempts."""
    slot = CallLimiter(1)
    fn = Failing(BackendError("503", retryable=True))
    policy = RetryPolicy(max_attempts=3, initial_backoff=0.01, jitter=0, max_total_time=0.2)
    released: list[float] = []

    async def hog() -> None:
        released.append(await hog_until_queued(slot, 0.4, until))  # twice the whole budget

    async with anyio.create_task_group() as tg:
        tg.start_soon(hog)
        await until(lambda: slot.borrowed_tokens == 1)
        result, retries = await sent(fn, policy, timeout=5, slot=slot)
    assert (result, retries) == ("ok after 1", 1)
    assert fn.started[0] >= released[0], "the call queued for the slot"


@pytest.mark.parametrize("hint", [0.0, -5.0])
async def test_a_zero_or_negative_retry_after_falls_back_to_the_backoff(hint: float) -> None:
    policy = RetryPolicy(max_attempts=3, initial_backoff=0.1, jitter=0.0)
    fn = Failing(RateLimitError("429", retry_after=hint), RateLimitError("429", retry_after=hint))
    await sent(fn, policy, timeout=5)
    gaps = [b - a for a, b in zip(fn.started, fn.started[1:], strict=False)]
    assert gaps[0] >= 0.09 and gaps[1] >= 0.19, gaps  # backoff, not immediate retries
