"""PSC over one window: m shuffled prompts, concurrent calls, parse, aggregate.

For each of the m input orders (drawn from a seed derived from the ranker's seed, the
query, the window's items and its place in the plan) the engine renders a prompt, calls
the backend under the shared :class:`~.limiter.CallLimiter` (and an optional per-request
one), retries retryable failures (:mod:`.retry`), re-asks unparseable answers up to
``reasks`` times, maps each answer back to the original items and aggregates the samples
that succeeded. A :class:`BatchBackend` gets each round of a window's prompts as one batch.
``Sample.attempts`` counts asks (1 + re-asks); its ``usage.calls`` counts every backend
attempt, retries included.

Example:
    >>> import anyio
    >>> from permsc_integrations.backends.base import Completion
    >>> class Reverse:  # answers "[n] > ... > [1]": the last item shown is best
    ...     name = "reverse"
    ...     async def acomplete(self, messages, settings):
    ...         n = sum(m["content"].startswith("[") for m in messages if m["role"] == "user")
    ...         return Completion(text=" > ".join(f"[{i}]" for i in range(n, 0, -1)))
    ...     async def aclose(self):
    ...         pass
    >>> engine = WindowEngine.create(Reverse(), num_permutations=1, include_identity=True)
    >>> result = anyio.run(engine.rank_window, "q", ["a", "b", "c"], (0, 1, 2), 0)
    >>> result.order, result.samples[0].status.value
    ((2, 1, 0), 'ok')
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from .aggregators import Aggregator, aggregate, resolve
from .backends.base import Backend, BatchBackend, Completion, GenerationSettings, Message
from .cache import ResponseCache, cache_key
from .errors import BackendError, ConfigurationError, InsufficientSamplesError, ParseError
from .events import Event, EventHook, EventKind, emit
from .limiter import Limiter
from .permutations import sample_permutations
from .prompts import get_prompt
from .prompts.base import Prompt
from .results import ParseStatus, Sample, Usage, WindowResult
from .retry import RetryPolicy, call_with_retry

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["WindowEngine", "derive_seed", "add_note", "REASK"]

REASK = (
    "Your answer could not be read as a ranking. Answer again with only the ranking of all "
    "{n} items, in exactly the format asked for above, and nothing else."
)


def derive_seed(seed: int, query: str, texts: Sequence[str], window: Any = 0) -> int:
    """A 63-bit seed from the ranker's seed, the request and the window (stable across runs).

    >>> derive_seed(0, "q", ["a", "b"]) == derive_seed(0, "q", ["a", "b"])
    True
    """
    blob = json.dumps([seed, query, list(texts), repr(window)], ensure_ascii=False)
    return int.from_bytes(hashlib.blake2b(blob.encode("utf-8"), digest_size=8).digest(), "big") >> 1


@dataclass
class _Attempt:
    """Mutable bookkeeping for one sample while it runs."""

    messages: list[Message]
    usage: Usage = field(default_factory=Usage)
    asks: int = 0
    raw_text: str = ""


@dataclass(frozen=True)
class WindowEngine:
    """Everything needed to run PSC on one window; built once per ranker."""

    backend: Backend
    prompt: Prompt
    aggregator: Aggregator
    num_permutations: int = 20
    include_identity: bool = False
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    reasks: int = 1
    min_successful: int | None = None
    cache: ResponseCache | None = None
    limiter: Limiter | None = None

    @classmethod
    def create(
        cls,
        backend: Backend,
        *,
        prompt: str | Prompt = "rankgpt",
        aggregator: str | Aggregator = "kemeny",
        **options: Any,
    ) -> WindowEngine:
        """An engine from a backend object and names or objects for the rest."""
        return cls(backend, get_prompt(prompt), resolve(aggregator), **options)

    def __post_init__(self) -> None:
        if self.num_permutations < 1:
            raise ConfigurationError(f"num_permutations must be >= 1, got {self.num_permutations}")
        if self.reasks < 0:
            raise ConfigurationError(f"reasks must be >= 0, got {self.reasks}")
        if not 1 <= self.required <= self.num_permutations:
            raise ConfigurationError(
                f"min_successful must be in 1..num_permutations ({self.num_permutations}), "
                f"got {self.min_successful}"
            )

    @property
    def required(self) -> int:
        """Samples that must succeed: ``min_successful`` or ``max(1, m // 2)``."""
        m = self.num_permutations
        return max(1, m // 2) if self.min_successful is None else self.min_successful

    async def rank_window(
        self,
        query: str,
        texts: Sequence[str],
        indices: Sequence[int],
        seed: int,
        *,
        start: int = 0,
        hooks: Sequence[EventHook | None] = (),
        request_id: Any = None,
        window: int = 0,
        request_limiter: Limiter | None = None,
    ) -> WindowResult:
        """PSC over ``indices`` (item indices into ``texts``, in the window's input order)."""
        local = [texts[i] for i in indices]
        perms = sample_permutations(
            len(local), self.num_permutations, seed=seed, include_identity=self.include_identity
        )
        run = _Run(self, query, local, perms, hooks, request_id, window, request_limiter)
        samples = await run.run()
        # exact Kemeny can take a while: keep the event loop free for other requests' calls
        return await anyio.to_thread.run_sync(self._aggregate, indices, start, samples)

    def _aggregate(self, indices: Sequence[int], start: int, samples: list[Sample]) -> WindowResult:
        good = [s.ranking for s in samples if s.ok]
        if len(good) < self.required:
            failures = [
                f"sample {k}: {s.status.value}: {s.error}"
                for k, s in enumerate(samples)
                if not s.ok
            ]
            error = InsufficientSamplesError(len(good), self.required, failures)
            add_note(error, f"in the window at positions {start}..{start + len(indices) - 1}")
            raise error
        n = len(indices)
        consensus = aggregate(good, method=self.aggregator, n_items=n)
        confidence = _confidence(good, consensus)
        to_global = _mapper(indices)
        return WindowResult(
            start=start,
            indices=tuple(indices),
            order=to_global(consensus),
            samples=tuple(
                replace(s, permutation=to_global(s.permutation), ranking=to_global(s.ranking))
                for s in samples
            ),
            confidence=confidence,
        )


def _mapper(indices: Sequence[int]) -> Callable[[Sequence[int]], tuple[int, ...]]:
    return lambda local: tuple(indices[j] for j in local)


def _confidence(rankings: Sequence[Sequence[int]], consensus: Sequence[int]) -> float:
    from .metrics import consensus_confidence

    return float(consensus_confidence(rankings, consensus))


class _Run:
    """One window's samples in flight."""

    def __init__(
        self,
        engine: WindowEngine,
        query: str,
        items: list[str],
        perms: list[tuple[int, ...]],
        hooks: Sequence[EventHook | None],
        request_id: Any,
        window: int,
        request_limiter: Limiter | None,
    ) -> None:
        self.e, self.query, self.items, self.perms = engine, query, items, perms
        self.hooks, self.request_id, self.window = hooks, request_id, window
        self.request_limiter = request_limiter
        self.samples: list[Sample | None] = [None] * len(perms)

    async def run(self) -> list[Sample]:
        try:
            async with anyio.create_task_group() as tg:
                if isinstance(self.e.backend, BatchBackend):
                    tg.start_soon(self._batched)
                else:
                    for k in range(len(self.perms)):
                        tg.start_soon(self._one, k)
        except BaseExceptionGroup as group:  # surface a single failure as itself
            raise _first(group) from None
        return [s for s in self.samples if s is not None]

    async def _emit(self, kind: EventKind, k: int, **detail: Any) -> None:
        if any(self.hooks):
            event = Event(kind, self.request_id, self.window, k, len(self.perms), detail)
            await emit(self.hooks, event)

    def _shown(self, k: int) -> list[str]:
        return [self.items[j] for j in self.perms[k]]

    async def _one(self, k: int) -> None:
        await self._emit("sample_start", k)
        state = _Attempt(self.e.prompt.render(self.query, self._shown(k)))
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
            states[k] = _Attempt(self.e.prompt.render(self.query, self._shown(k)))
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
        self, k: int, state: _Attempt, completion: Completion, usage: Usage
    ) -> Sample | None:
        """The sample for this answer, or None after scheduling a re-ask."""
        state.usage, state.asks, state.raw_text = (
            state.usage + usage,
            state.asks + 1,
            completion.text,
        )
        perm = self.perms[k]
        try:
            parsed = self.e.prompt.parse(completion.text, len(perm), self._shown(k))
        except ParseError as exc:
            if state.asks <= self.e.reasks:
                state.messages = [
                    *state.messages,
                    {"role": "assistant", "content": completion.text},
                    {"role": "user", "content": REASK.format(n=len(perm))},
                ]
                return None
            return Sample(
                perm, (), completion.text, ParseStatus.INVALID, str(exc), state.usage, state.asks
            )
        ranking = tuple(perm[p] for p in parsed.ranking)
        return Sample(perm, ranking, completion.text, parsed.status, None, state.usage, state.asks)

    def _failed(self, k: int, state: _Attempt, exc: BackendError) -> Sample:
        usage = state.usage + getattr(exc, "_permsc_usage", Usage())
        error = f"{type(exc).__name__}: {exc}"
        return Sample(
            self.perms[k], (), state.raw_text, ParseStatus.ERROR, error, usage, state.asks + 1
        )

    async def _finish(self, k: int, sample: Sample) -> None:
        self.samples[k] = sample
        await self._emit(
            "sample_end",
            k,
            status=sample.status.value,
            attempts=sample.attempts,
            error=sample.error,
        )

    async def _call(self, messages: list[Message]) -> tuple[Completion, Usage]:
        key = None
        if self.e.cache is not None:
            key = cache_key(self.e.backend.name, messages, self.e.settings)
            hit = await self.e.cache.aget(key)
            if hit is not None:
                return hit, Usage(cached_calls=1)
        completion, usage = await self._timed(
            lambda: self.e.backend.acomplete(messages, self.e.settings)
        )
        if key is not None and self.e.cache is not None:
            await self.e.cache.aset(key, completion)
        return completion, usage + _tokens(completion)

    async def _timed(self, call: Callable[[], Awaitable[Any]]) -> tuple[Any, Usage]:
        """``call()`` with retries, one limiter slot per attempt; usage counts attempts,
        retries and the attempts' summed latency (not queueing, not backoff)."""
        attempts, latency = 0, 0.0

        async def counted() -> Any:
            nonlocal attempts, latency
            attempts += 1
            began = time.perf_counter()
            try:
                return await call()
            finally:
                latency += time.perf_counter() - began

        def slot() -> _Limited:
            return _Limited(self.request_limiter, self.e.limiter)

        try:
            result, retries = await call_with_retry(
                counted, self.e.retry, self.e.settings.timeout, guard=slot
            )
        except BackendError as exc:
            exc._permsc_usage = Usage(  # type: ignore[attr-defined]
                calls=attempts, retries=max(0, attempts - 1), latency_s=latency
            )
            raise
        return result, Usage(calls=attempts, retries=retries, latency_s=latency)

    async def _call_batch(self, batch: list[list[Message]]) -> list[tuple[Completion, Usage]]:
        e = self.e
        keys = [cache_key(e.backend.name, m, e.settings) for m in batch] if e.cache else []
        hits = [await e.cache.aget(k) for k in keys] if e.cache else [None] * len(batch)
        todo = [i for i, hit in enumerate(hits) if hit is None]
        out: list[Any] = [None if h is None else (h, Usage(cached_calls=1)) for h in hits]
        if todo:
            backend: Any = e.backend
            completions, usage = await self._timed(
                lambda: backend.acomplete_batch([batch[i] for i in todo], e.settings)
            )
            if len(completions) != len(todo):
                raise BackendError(
                    f"{e.backend.name}: batch of {len(todo)} gave {len(completions)} answers"
                )
            share = Usage(calls=usage.calls, retries=usage.retries, latency_s=usage.latency_s)
            for i, completion in zip(todo, completions, strict=True):
                out[i] = (completion, share + _tokens(completion))
                if e.cache is not None:
                    await e.cache.aset(keys[i], completion)
        return out


class _Limited:
    """Hold a slot of the per-request limiter (if any), then of the shared one."""

    def __init__(self, *limiters: Limiter | None) -> None:
        self.limiters = [lim for lim in limiters if lim is not None]

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


def _tokens(completion: Completion) -> Usage:
    u = completion.usage
    return Usage(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens)


def _first(group: BaseExceptionGroup) -> BaseException:
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


def add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` where Python has it (3.11+); a no-op on 3.10."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
