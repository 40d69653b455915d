"""One window's samples in flight: prompts, calls under the limiters, retries, re-asks.

Each sample shows a list of the window's items in some order: all of them, shuffled (a PSC
window), or a block of them (the blocks strategy); answers are mapped back to those items.

:class:`WindowRun` renders each shuffled prompt, calls the backend (one call per sample, or
one batch for a :class:`BatchBackend`), retries what is retryable (:mod:`..retry`), re-asks
unreadable answers and maps each answer back to the original items. What it costs:

- ``Sample.usage`` is the sample's share: its own attempts (``calls``, retries included) and
  their summed latency; a batch is *one* call, so its calls and retries go to the batch's first
  sample and its latency is split evenly over the batch's samples (sums are never inflated).
- :attr:`WindowRun.spent` is every call the window made, finished or not: what an error
  raised out of the window carries as ``usage``.

A failure a retry cannot fix for any call (``BackendError.fatal``: bad key, unknown model, no
credit, prompt too long) cancels the window's other calls and is raised as itself; one that
``trips_breaker`` also opens the ranker's :class:`~.breaker.Breaker`, so no later call is
sent (until a probe, for a cause that recovers: :mod:`.breaker`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..backends.base import (
    Backend,
    BatchBackend,
    Completion,
    GenerationSettings,
    LabelProbabilities,
    Message,
)
from ..errors import BackendError, ParseError, PermscError, add_note
from ..events import Event, EventHook, EventKind, emit
from ..prompts.base import Prompt
from ..results import ParseStatus, Sample, Usage
from ..retry import RetryPolicy, call_with_retry
from ..spending import charged, prompt_chars
from .breaker import Breaker
from .cache import ResponseCache, cache_key
from .calibration import PriorCache
from .first_token import start_first_token
from .limiter import Limiter

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["WindowRun", "SamplingSetup", "REASK", "first_failure"]

Answer = (Completion, LabelProbabilities)
"""What a call returns: a generated answer or a first-token read; both carry ``usage``."""

REASK = (
    "Your answer could not be read as a ranking. Answer again with only the ranking of all "
    "{n} items, in exactly the format asked for above, and nothing else."
)


@dataclass
class _Sample:
    """Mutable bookkeeping for one sample while it runs."""

    messages: list[Message]
    usage: Usage = field(default_factory=Usage)
    asks: int = 0
    raw_text: str = ""


@dataclass(frozen=True, slots=True)
class SamplingSetup:
    """What a window's calls need, built by the engine
    (:meth:`~.engine.WindowEngine.sampling_setup`): the backend and its settings, the prompt
    that renders and parses, the retry policy, the cache, the engine's limiter, the breaker,
    the re-asks of an unreadable answer and the share of items an answer must rank; in
    first-token scoring, the position prior's cache when calibrating."""

    backend: Backend
    prompt: Prompt
    settings: GenerationSettings
    retry: RetryPolicy
    cache: ResponseCache | None
    limiter: Limiter | None
    breaker: Breaker
    reasks: int
    min_coverage: float
    scoring: str = "generate"  # or "first_token" (:mod:`.first_token`)
    calibration: PriorCache | None = None  # first_token: divide by the position prior


class WindowRun:
    """One window's samples in flight (see the module docstring)."""

    def __init__(
        self,
        setup: SamplingSetup,
        query: str,
        items: list[str],
        perms: list[tuple[int, ...]],
        hooks: Sequence[EventHook | None],
        request_id: Any,
        window: int,
        request_limiter: Limiter | None,
        *,
        offset: int = 0,
        total: int | None = None,
    ) -> None:
        self.setup, self.query, self.items, self.perms = setup, query, items, perms
        self.offset, self.total = offset, len(perms) if total is None else total
        self.hooks, self.request_id, self.window = hooks, request_id, window
        self.limiters = [lim for lim in (request_limiter, setup.limiter) if lim is not None]
        self.samples: list[Sample | None] = [None] * len(perms)
        self.spent = Usage()

    async def run(self) -> list[Sample]:
        try:
            async with anyio.create_task_group() as tg:
                if self.setup.scoring == "first_token":
                    await start_first_token(self, tg)
                elif isinstance(self.setup.backend, BatchBackend):
                    tg.start_soon(self._batched)
                else:
                    for k in range(len(self.perms)):
                        tg.start_soon(self._one, k)
                        await _yield_to_started_call()
        except BaseExceptionGroup as group:  # surface a single failure as itself
            error = first_failure(group)
            if isinstance(error, PermscError):
                error.usage = self.spent
            raise error from None
        return [s for s in self.samples if s is not None]

    async def _emit(self, kind: EventKind, k: int, **detail: Any) -> None:
        if any(self.hooks):
            event = Event(kind, self.request_id, self.window, self.offset + k, self.total, detail)
            await emit(self.hooks, event)

    def _shown(self, k: int) -> list[str]:
        return [self.items[j] for j in self.perms[k]]

    async def _one(self, k: int) -> None:
        await self._emit("sample_start", k)
        state = _Sample(self.setup.prompt.render(self.query, self._shown(k)))
        try:
            sample = None
            while sample is None:
                completion, usage = await self._call(state.messages)
                sample = self._digest(k, state, completion, usage)
        except BackendError as exc:
            sample = self._failed(k, state, exc)
        await self._finish(k, sample)

    async def _batched(self) -> None:
        states = {}
        for k in range(len(self.perms)):
            await self._emit("sample_start", k)
            states[k] = _Sample(self.setup.prompt.render(self.query, self._shown(k)))
        while states:
            keys = list(states)
            try:
                answers = await self._call_batch([states[k].messages for k in keys])
            except BackendError as exc:
                for k in keys:
                    await self._finish(k, self._failed(k, states.pop(k), exc))
                return
            for k, (completion, usage) in zip(keys, answers, strict=True):
                sample = self._digest(k, states[k], completion, usage)
                if sample is not None:
                    del states[k]
                    await self._finish(k, sample)

    def _digest(
        self, k: int, state: _Sample, completion: Completion, usage: Usage
    ) -> Sample | None:
        """The sample for this answer, or None after scheduling a re-ask."""
        state.usage += usage
        state.asks += 1
        state.raw_text = completion.text
        perm = self.perms[k]
        try:
            parsed = self.setup.prompt.parse(completion.text, len(perm), self._shown(k))
            _check_coverage(parsed.ranking, len(perm), self.setup.min_coverage, completion.text)
        except ParseError as exc:
            if state.asks <= self.setup.reasks:
                state.messages = [
                    *state.messages,
                    {"role": "assistant", "content": completion.text},
                    {"role": "user", "content": REASK.format(n=len(perm))},
                ]
                return None
            return Sample(
                perm,
                (),
                completion.text,
                ParseStatus.INVALID,
                str(exc),
                state.usage,
                state.asks,
                exception=exc,
            )
        ranking = tuple(perm[p] for p in parsed.ranking)  # prompt positions -> items
        return Sample(perm, ranking, completion.text, parsed.status, None, state.usage, state.asks)

    def failed_call(self, k: int, messages: list[Message], exc: BackendError) -> Sample:
        """The failed sample of a call that gave no answer (first-token calls)."""
        return self._failed(k, _Sample(messages), exc)

    def _failed(self, k: int, state: _Sample, exc: BackendError) -> Sample:
        """The failed sample; a fatal error opens the breaker and is raised instead."""
        if exc.fatal:
            self.setup.breaker.trip(exc)
            raise exc
        usage = state.usage + (exc.usage or Usage())
        error = f"{type(exc).__name__}: {exc}"
        return Sample(
            self.perms[k],
            (),
            state.raw_text,
            ParseStatus.ERROR,
            error,
            usage,
            state.asks + 1,
            exception=exc,
        )

    async def _finish(self, k: int, sample: Sample) -> None:
        self.samples[k] = sample
        await self._emit(
            "sample_end",
            k,
            status=sample.status.value,
            attempts=sample.attempts + sample.usage.retries,  # every time the model was asked
            retries=sample.usage.retries,
            error=sample.error,
            usage=sample.usage,  # the sample's calls and tokens (its tracing span's)
            permutation=sample.permutation,  # prompt order, as places in window_start's items
        )

    async def _call(self, messages: list[Message]) -> tuple[Completion, Usage]:
        e = self.setup
        e.breaker.check()
        key = cache_key(e.backend, messages, e.settings) if e.cache is not None else None
        if key is not None and e.cache is not None:
            hit = await e.cache.aget(key)
            if hit is not None:
                return hit, Usage(cached_calls=1)
        completion, usage = await self._timed(
            lambda: e.backend.acomplete(messages, e.settings), prompt_chars(messages)
        )
        tokens = _tokens(completion)
        self.spent += tokens
        if key is not None and e.cache is not None:
            await e.cache.aset(key, completion)
        return completion, usage + tokens

    async def _timed(self, call: Callable[[], Awaitable[Any]], chars: int) -> tuple[Any, Usage]:
        """``call()`` with retries, one limiter slot per attempt; the usage counts attempts,
        retries and the attempts' summed latency (not queueing, not backoff). Each attempt
        is charged to the spending caps (:mod:`..spending`; ``chars``: the prompt's size) and
        not sent if one would be passed."""
        attempts, latency = 0, 0.0

        async def attempt() -> Any:
            nonlocal attempts, latency
            with charged(chars) as reported:
                attempts += 1
                began = time.perf_counter()
                try:
                    result = await _guarded(call, self.setup.backend.name)
                    reported.append(_reported(result))
                    return result
                finally:
                    took = time.perf_counter() - began
                    latency += took
                    self.spent += Usage(calls=1, retries=int(attempts > 1), latency_s=took)

        async def counted() -> Any:
            # with the slot held: the breaker may have opened meanwhile, or this is its probe
            probe = await self.setup.breaker.admit()
            try:
                result = await attempt()
            except BaseException as exc:
                self.setup.breaker.settle(probe, exc)
                raise
            self.setup.breaker.settle(probe, None)
            return result

        try:
            result, retries = await call_with_retry(
                counted, self.setup.retry, self.setup.settings.timeout, guard=self._slot
            )
        except BackendError as exc:
            exc.usage = Usage(calls=attempts, retries=max(0, attempts - 1), latency_s=latency)
            raise
        return result, Usage(calls=attempts, retries=retries, latency_s=latency)

    def _slot(self) -> _Slots:
        return _Slots(self.limiters)

    async def _call_batch(self, batch: list[list[Message]]) -> list[tuple[Completion, Usage]]:
        e = self.setup
        e.breaker.check()
        keys = [cache_key(e.backend, m, e.settings) for m in batch] if e.cache else []
        hits = [await e.cache.aget(k) for k in keys] if e.cache else [None] * len(batch)
        todo = [i for i, hit in enumerate(hits) if hit is None]
        out: list[Any] = [None if h is None else (h, Usage(cached_calls=1)) for h in hits]
        if not todo:
            return out
        backend: Any = e.backend
        completions, usage = await self._timed(
            lambda: backend.acomplete_batch([batch[i] for i in todo], e.settings),
            sum(prompt_chars(batch[i]) for i in todo),
        )
        if len(completions) != len(todo):
            raise BackendError(f"{e.backend.name}: batch of {len(todo)} gave {len(completions)}")
        share = usage.latency_s / len(todo)  # the batch's latency, split; its calls counted once
        for n, (i, completion) in enumerate(zip(todo, completions, strict=True)):
            tokens = _tokens(completion)
            self.spent += tokens
            first = Usage(calls=usage.calls, retries=usage.retries) if n == 0 else Usage()
            out[i] = (completion, first + Usage(latency_s=share) + tokens)
            if e.cache is not None:
                await e.cache.aset(keys[i], completion)
        return out


def _check_coverage(ranking: Sequence[int], n: int, share: float, text: str) -> None:
    if share > 0 and len(ranking) < share * n:
        raise ParseError(
            f"the answer ranks {len(ranking)} of {n} items, fewer than min_coverage={share:g} "
            "asks for",
            text,
        )


async def _guarded(call: Callable[[], Awaitable[Any]], source: str) -> Any:
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

    def __init__(self, limiters: Sequence[Limiter]) -> None:
        self.limiters = limiters

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


def _reported(result: Completion | LabelProbabilities | list[Any]) -> Usage:
    """The tokens a call's answer (or a batch's answers) reported."""
    answers = result if isinstance(result, list) else [result]
    return sum((_tokens(c) for c in answers if isinstance(c, Answer)), Usage())


def _tokens(completion: Completion | LabelProbabilities) -> Usage:
    u = completion.usage
    return Usage(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens)


async def _yield_to_started_call() -> None:
    """Yield once, so that the call just started is sent before the next one is built
    (started all at once, every request of a round was built before the first went out:
    docs/benchmarks.md "send-order")."""
    await anyio.sleep(0)


def first_failure(group: BaseExceptionGroup) -> BaseException:
    """The first real failure in a task-group error (the others are noted on it)."""
    flat: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            stack[:0] = list(exc.exceptions)
        else:
            flat.append(exc)
    if len(flat) > 1 and isinstance(flat[0], Exception):
        add_note(flat[0], f"{len(flat) - 1} other sample(s) of this window also failed")
    return flat[0]
