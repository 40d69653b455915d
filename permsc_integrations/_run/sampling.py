"""One window's samples in flight: each one asked of a :class:`Sampler`, all at once.

Each sample shows a list of the window's items in some order: all of them, shuffled (a PSC
window), or a block of them (the blocks strategy); its answer is mapped back to those items.
:class:`WindowRun` owns a sample's life: its ``sample_start``/``sample_end`` events, its
:class:`Ask` (what it showed, asked and spent), its failure. How a sample is asked is the
sampler's, the window run's one collaborator: :class:`Generate` here (the model writes a
ranking: the cache, parsing, re-asks) or :class:`~.first_token.FirstToken` (one token's label
probabilities); both send their calls through the request's :class:`~._calls.calls.Calls`, which
counts them. A sampler that can batch (:meth:`Sampler.batches`) gets its samples in batches,
one backend call each: :class:`Generate` gives a :class:`BatchBackend` all of a window's
prompts as one batch (at most the prompts ``max_calls`` still pays for), then one batch per
round of re-asks.

An answer :class:`Generate` cannot read (or that ranks fewer items than ``min_coverage`` asks
for) is re-asked up to ``reasks`` times, with the answer and :data:`REASK` appended.

What a sample costs (``Sample.usage``) is its share: its own attempts (``calls``, retries
included) and their summed latency; a call is one prompt the model answers, batched or not (a
batch of k prompts is k calls, against ``max_calls`` too): each sample of a batch gets its
call, the batch's retries go to its first sample, and its latency is split evenly. The request's
usage is its meter's count (:mod:`._calls.calls`), never a sum rewritten on the way up.

A call the request's budget (``max_calls``) refuses is not sent: its sample is *skipped*
(:attr:`ParseStatus.SKIPPED`, with what it spent before), and the round goes on with the others.

A failure a retry cannot fix for any call (``BackendError.fatal``: bad key, unknown model, no
credit, prompt too long) cancels the window's other calls and is raised as itself; one that
``trips_breaker`` also opens the ranker's :class:`~._calls.breaker.Breaker`, so no later call is
sent (until a probe, for a cause that recovers: :mod:`._calls.breaker`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import anyio

from permsc_integrations._calls.cache import cache_key
from permsc_integrations._calls.calls import Calls, Tab
from permsc_integrations._calls.spending import prompt_chars
from permsc_integrations._events import EventKind
from permsc_integrations._options.options import RankingOptions
from permsc_integrations._run.state import RequestState
from permsc_integrations.backends.base import Backend, BatchBackend, Completion, Message
from permsc_integrations.errors import BackendError, BudgetSpentError, ParseError, first_failure
from permsc_integrations.prompts import Prompt
from permsc_integrations.results import ParseStatus, Sample

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["WindowRun", "Ask", "Sampler", "Generate", "REASK", "Refused"]

Refused = BackendError | BudgetSpentError
"""Why a sample has no answer: its call failed, or the request's budget did not send it."""


@dataclass(slots=True)
class Ask(Tab):
    """One sample while it is asked: what it shows (``perm``: window positions in prompt
    order; ``shown``: their texts), the messages sent, the answers read and the last one."""

    perm: tuple[int, ...]
    shown: list[str]
    messages: Sequence[Message] = ()
    asks: int = 0
    raw_text: str = ""
    unread: ParseError | None = None  # why the last answer is being re-asked

    def refused(self, exc: Refused) -> Sample | Refused:
        """What a refused call leaves of this sample: its last answer, unread, when the
        budget refused the re-ask (it was asked and answered: a failure, not a skip)."""
        if self.unread is None or not isinstance(exc, BudgetSpentError):
            return exc
        error = f"{self.unread}; its re-ask was not sent: {exc}"
        return _sample(self, (), ParseStatus.INVALID, error, self.unread)


class Sampler(Protocol):
    """How a window's samples are asked of the model (the window run's collaborator)."""

    def batches(self, perms: Sequence[tuple[int, ...]]) -> list[list[int]] | None:
        """The samples (by position in ``perms``, what each shows) asked together, one call
        per batch; None: one call per sample."""
        ...

    async def sample(self, query: str, ask: Ask, calls: Calls) -> Sample:
        """One sample; a :class:`BackendError` fails it (``ask`` keeps what it spent)."""
        ...

    async def sample_batch(
        self, query: str, asks: Sequence[Ask], calls: Calls
    ) -> list[Sample | Refused]:
        """The samples of one batch, each a sample or the error that failed (or skipped) it."""
        ...


class WindowRun:
    """One window's samples in flight (see the module docstring): the prompts ``perms`` over
    the window's texts ``local``, samples ``offset...`` of the window's ``total``."""

    def __init__(
        self,
        state: RequestState,
        sampler: Sampler,
        local: Sequence[str],
        perms: Sequence[tuple[int, ...]],
        window: int,
        offset: int = 0,
        total: int | None = None,
    ) -> None:
        self.state, self.sampler, self.window = state, sampler, window
        self.local, self.perms = local, perms
        self.offset, self.total = offset, len(perms) if total is None else total
        self.samples: list[Sample | None] = [None] * len(perms)

    async def run(self) -> list[Sample]:
        groups = self.sampler.batches(self.perms)
        try:
            async with anyio.create_task_group() as tg:
                for keys in groups or ():
                    tg.start_soon(self._batch, keys)
                for k in range(len(self.perms)) if groups is None else ():
                    tg.start_soon(self._one, k)
                    await _yield_to_started_call()
        except BaseExceptionGroup as group:  # surface a single failure as itself
            raise first_failure(group) from None
        return [s for s in self.samples if s is not None]

    async def _emit(self, kind: EventKind, k: int, **detail: object) -> None:
        if self.state.observed:
            sample, total = self.offset + k, self.total
            await self.state.emit(kind, self.window, sample=sample, total=total, **detail)

    async def _start(self, k: int) -> Ask:
        """Sample ``k``'s ``sample_start`` and its :class:`Ask`."""
        await self._emit("sample_start", k)
        perm = self.perms[k]
        return Ask(perm, [self.local[j] for j in perm])  # made as it starts, dropped as it ends

    async def _one(self, k: int) -> None:
        ask = await self._start(k)
        try:
            sample = await self.sampler.sample(self.state.query, ask, self.state.calls)
        except (BackendError, BudgetSpentError) as exc:
            sample = self._failed(ask, exc)
        await self._finish(k, sample)
        _raise_fatal([sample])

    async def _batch(self, keys: list[int]) -> None:
        asks = [await self._start(k) for k in keys]
        try:
            outcomes = await self.sampler.sample_batch(self.state.query, asks, self.state.calls)
        except (BackendError, BudgetSpentError) as exc:  # the batch's call: all of it
            outcomes = [exc] * len(keys)
        samples = [
            outcome if isinstance(outcome, Sample) else self._failed(ask, outcome)
            for ask, outcome in zip(asks, outcomes, strict=True)
        ]
        for k, sample in zip(keys, samples, strict=True):
            await self._finish(k, sample)
        _raise_fatal(samples)

    def _failed(self, ask: Ask, exc: Refused) -> Sample:
        """The failed sample (skipped, when the budget refused its call); a fatal error opens
        the breaker, and is raised once its sample has ended (:func:`_raise_fatal`), so that
        its ``sample_end`` (a tracing span's error) says what failed."""
        if isinstance(exc, BudgetSpentError):
            status = ParseStatus.SKIPPED
            return Sample(ask.perm, (), ask.raw_text, status, str(exc), ask.usage, ask.asks)
        if exc.fatal:
            self.state.calls.breaker.trip(exc)
        error = f"{type(exc).__name__}: {exc}"
        return Sample(
            ask.perm,
            (),
            ask.raw_text,
            ParseStatus.ERROR,
            error,
            ask.usage,
            ask.asks + 1,
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


def _raise_fatal(samples: Sequence[Sample]) -> None:
    """Raise the first fatal error among ``samples`` (a retry fixes it for no call)."""
    for sample in samples:
        if isinstance(sample.exception, BackendError) and sample.exception.fatal:
            raise sample.exception


REASK = (
    "Your answer could not be read as a ranking. Answer again with only the ranking of all "
    "{n} items, in exactly the format asked for above, and nothing else."
)


class Generate:
    """The model writes each sample's ranking (see the module docstring); ``options`` give
    the decoding settings, the cache, ``reasks`` and ``min_coverage``."""

    def __init__(self, options: RankingOptions, backend: Backend, prompt: Prompt) -> None:
        self.options, self.backend, self.prompt = options, backend, prompt
        self.settings = options.generation

    def batches(self, perms: Sequence[tuple[int, ...]]) -> list[list[int]] | None:
        return [list(range(len(perms)))] if isinstance(self.backend, BatchBackend) else None

    async def sample(self, query: str, ask: Ask, calls: Calls) -> Sample:
        ask.messages = self.prompt.render(query, ask.shown)
        while True:
            completion = await self._cached(ask, calls)
            if completion is None:
                messages = ask.messages
                call = partial(self.backend.acomplete, messages, self.settings)
                try:
                    completion = await calls.send(call, prompt_chars(messages), ask)
                except BudgetSpentError as exc:
                    left = ask.refused(exc)
                    if isinstance(left, Sample):
                        return left
                    raise
                await self._keep(messages, completion)
            sample = self._read(ask, completion)
            if sample is not None:
                return sample

    async def sample_batch(
        self, query: str, asks: Sequence[Ask], calls: Calls
    ) -> list[Sample | Refused]:
        """One batch of the window's prompts, then one of the re-asks, until all are read."""
        out: dict[int, Sample | Refused] = {}
        for ask in asks:
            ask.messages = self.prompt.render(query, ask.shown)
        todo = list(range(len(asks)))
        while todo:
            room = calls.meter.room(len(todo))  # each prompt of a batch is a call: max_calls
            if room < len(todo):
                refused = BudgetSpentError(calls.meter.budget or 0)
                out.update((k, asks[k].refused(refused)) for k in todo[room:])
                todo = todo[:room]
            if not todo:
                break
            try:
                answers = await self._answers([asks[k] for k in todo], calls)
            except (BackendError, BudgetSpentError) as exc:
                out.update((k, asks[k].refused(exc)) for k in todo)
                break
            reads = {k: self._read(asks[k], c) for k, c in zip(todo, answers, strict=True)}
            out.update((k, sample) for k, sample in reads.items() if sample is not None)
            todo = [k for k, sample in reads.items() if sample is None]
        return [out[k] for k in range(len(asks))]

    async def _answers(self, asks: Sequence[Ask], calls: Calls) -> list[Completion]:
        """Each ask's answer: from the cache, else from one batch of those not cached."""
        hits = [await self._cached(ask, calls) for ask in asks]
        todo = [ask for ask, hit in zip(asks, hits, strict=True) if hit is None]
        if not todo:
            return [hit for hit in hits if hit is not None]
        backend = self.backend
        assert isinstance(backend, BatchBackend)
        batch = [ask.messages for ask in todo]
        sent = iter(
            await calls.send_batch(
                partial(backend.acomplete_batch, batch, self.settings),
                sum(prompt_chars(m) for m in batch),
                todo,
            )
        )
        answers = [hit if hit is not None else next(sent) for hit in hits]
        for ask, hit, answer in zip(asks, hits, answers, strict=True):
            if hit is None:
                await self._keep(ask.messages, answer)
        return answers

    async def _cached(self, ask: Ask, calls: Calls) -> Completion | None:
        cache = self.options.cache
        if cache is None:
            return None
        key = cache_key(self.backend, ask.messages, self.settings)
        hit: Completion | None = await cache.aget(key)
        if hit is not None:
            calls.hit(ask)
        return hit

    async def _keep(self, messages: Sequence[Message], completion: Completion) -> None:
        cache = self.options.cache
        if cache is not None:
            await cache.aset(cache_key(self.backend, messages, self.settings), completion)

    def _read(self, ask: Ask, completion: Completion) -> Sample | None:
        """The sample for this answer, or None after scheduling a re-ask."""
        ask.asks += 1
        ask.raw_text = completion.text
        perm = ask.perm
        try:
            parsed = self.prompt.parse(completion.text, len(perm), ask.shown)
            _check_coverage(parsed.ranking, len(perm), self.options.min_coverage, completion.text)
        except ParseError as exc:
            if ask.asks <= self.options.reasks:
                ask.unread = exc
                ask.messages = [
                    *ask.messages,
                    {"role": "assistant", "content": completion.text},
                    {"role": "user", "content": REASK.format(n=len(perm))},
                ]
                return None
            return _sample(ask, (), ParseStatus.INVALID, str(exc), exc)
        ranking = tuple(perm[p] for p in parsed.ranking)  # prompt positions -> window positions
        return _sample(ask, ranking, parsed.status)


def _sample(
    ask: Ask,
    ranking: tuple[int, ...],
    status: ParseStatus,
    error: str | None = None,
    exception: BaseException | None = None,
) -> Sample:
    return Sample(
        ask.perm, ranking, ask.raw_text, status, error, ask.usage, ask.asks, exception=exception
    )


def _check_coverage(ranking: Sequence[int], n: int, share: float, text: str) -> None:
    if share > 0 and len(ranking) < share * n:
        raise ParseError(
            f"the answer ranks {len(ranking)} of {n} items, fewer than min_coverage={share:g} "
            "asks for",
            text,
        )


async def _yield_to_started_call() -> None:
    """Yield once, so that the call just started is sent before the next one is built
    (started all at once, every request of a round was built before the first went out:
    docs/benchmarks.md "send-order")."""
    await anyio.sleep(0)
