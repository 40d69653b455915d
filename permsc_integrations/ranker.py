"""PSCRanker: permutation self-consistency over whole lists, one or many at a time.

Example:
    >>> from permsc_integrations.backends.base import Completion
    >>> class ByLength:  # a toy backend: longer passages rank first
    ...     name = "by-length"
    ...     async def acomplete(self, messages, settings):
    ...         shown = [m["content"] for m in messages[3:-1:2]]
    ...         best = sorted(range(len(shown)), key=lambda p: -len(shown[p]))
    ...         return Completion(text=" > ".join(f"[{p + 1}]" for p in best))
    ...     async def aclose(self):
    ...         pass
    >>> with PSCRanker(ByLength(), num_permutations=4, aggregator="borda") as ranker:
    ...     result = ranker.rank("longest?", ["aa", "a", "aaaa", "aaa"])
    >>> result.order, result.usage.calls
    ((2, 3, 0, 1), 4)
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from .aggregators import Aggregator, resolve
from .backends import resolve_backend
from .backends.base import Backend, GenerationSettings
from .bridge import run_sync
from .cache import ResponseCache
from .engine import WindowEngine, add_note, derive_seed
from .errors import ConfigurationError
from .events import Event, EventHook, EventKind, emit
from .items import normalize_items
from .prompts import get_prompt
from .prompts.base import Prompt
from .results import RankingResult, Usage, WindowResult, scores_from_order
from .retry import RetryPolicy
from .windows import Window, plan_windows, run_windows

__all__ = ["PSCRanker", "RankRequest", "DEFAULT_MAX_CONCURRENCY"]

DEFAULT_MAX_CONCURRENCY = 32
"""Calls in flight at once by default: above the default m = 20, so a window is one round."""


@dataclass(frozen=True)
class RankRequest:
    """One list to rank: ``items`` are strings, documents or mappings; ``id`` tags events."""

    query: str
    items: Sequence[Any]
    id: Any = None


@dataclass
class _Request:
    """One request while it runs: its texts, hooks and the windows done so far."""

    query: str
    texts: list[str]
    hooks: tuple[EventHook | None, ...]
    request_id: Any
    total: int
    limiter: anyio.CapacityLimiter | None
    windows: list[WindowResult] = field(default_factory=list)

    async def emit(self, kind: EventKind, window: int | None = None, **detail: Any) -> None:
        await emit(self.hooks, Event(kind, self.request_id, window, None, self.total, detail))


def _prompt(prompt: str | Prompt, max_words: int | None) -> Prompt:
    if not isinstance(prompt, str):
        return get_prompt(prompt)
    try:
        return get_prompt(prompt, max_words=max_words)
    except ConfigurationError:  # prompts without passage truncation (sorting tasks)
        return get_prompt(prompt)


class PSCRanker:
    """Rank lists with an LLM, robust to position bias (see ``docs/architecture.md``).

    Every call this ranker makes (all windows, all requests) shares one capacity limiter of
    ``max_concurrency`` slots; ``request_concurrency`` caps each request further. Lists
    longer than ``window_size`` are ranked by sliding windows (:mod:`.windows`): one pass
    settles the top ``window_size - step``; ``top_k`` adds passes until the top ``k`` is
    settled. Each window needs ``min_successful`` good samples (default ``max(1, m // 2)``)
    or raises :class:`InsufficientSamplesError`. ``max_words`` truncates passages of a
    prompt given by name. A backend given as a spec string is created (with
    ``backend_options`` such as ``base_url=``), and closed by :meth:`aclose`, by the ranker;
    a backend object stays the caller's to close.
    """

    def __init__(
        self,
        backend: str | Backend,
        *,
        num_permutations: int = 20,
        aggregator: str | Aggregator = "kemeny",
        prompt: str | Prompt = "rankgpt",
        window_size: int = 20,
        step: int = 10,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        request_concurrency: int | None = None,
        seed: int = 0,
        include_identity: bool = False,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        timeout: float | None = 60.0,
        max_words: int | None = 300,
        retry: RetryPolicy | None = None,
        reasks: int = 1,
        min_successful: int | None = None,
        top_k: int | None = None,
        cache: ResponseCache | None = None,
        on_event: EventHook | None = None,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ConfigurationError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if request_concurrency is not None and request_concurrency < 1:
            raise ConfigurationError(
                f"request_concurrency must be >= 1 or None, got {request_concurrency}"
            )
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be > 0 seconds or None, got {timeout}")
        plan_windows(0, window_size=window_size, step=step, top_k=top_k)  # validates the options
        self._owns_backend = isinstance(backend, str)
        self.backend = resolve_backend(backend, **(backend_options or {}))
        self.window_size, self.step, self.top_k, self.seed = window_size, step, top_k, seed
        self.max_concurrency, self.request_concurrency = max_concurrency, request_concurrency
        self.on_event = on_event
        self.limiter = anyio.CapacityLimiter(max_concurrency)
        self.engine = WindowEngine(
            backend=self.backend,
            prompt=_prompt(prompt, max_words),
            aggregator=resolve(aggregator),
            num_permutations=num_permutations,
            include_identity=include_identity,
            settings=GenerationSettings(
                temperature=temperature, max_tokens=max_tokens, timeout=timeout
            ),
            retry=retry if retry is not None else RetryPolicy(),
            reasks=reasks,
            min_successful=min_successful,
            cache=cache,
            limiter=self.limiter,
        )

    def __repr__(self) -> str:
        e = self.engine
        return (
            f"PSCRanker(backend={e.backend.name!r}, num_permutations={e.num_permutations}, "
            f"prompt={e.prompt.name!r}, window_size={self.window_size}, step={self.step})"
        )

    async def arank(
        self,
        query: str,
        items: Sequence[Any],
        *,
        on_event: EventHook | None = None,
        request_id: Any = None,
    ) -> RankingResult:
        """Rank ``items`` for ``query``; ``result.order`` indexes ``items``, best first.

        ``on_event`` receives this request's events besides the ranker's hook; ``request_id``
        tags them. Cancelling the caller cancels every call in flight.
        """
        texts, _ = normalize_items(items)
        plan = plan_windows(
            len(texts), window_size=self.window_size, step=self.step, top_k=self.top_k
        )
        request_limiter = (
            anyio.CapacityLimiter(self.request_concurrency) if self.request_concurrency else None
        )
        req = _Request(
            query, texts, (self.on_event, on_event), request_id, len(plan), request_limiter
        )
        await req.emit("request_start", n_items=len(texts))
        try:
            order = tuple(
                await run_windows(range(len(texts)), plan, functools.partial(self._window, req))
            )
        except Exception as exc:
            await req.emit("request_end", n_items=len(texts), status="error", error=repr(exc))
            raise
        usage = sum((s.usage for w in req.windows for s in w.samples), Usage())
        confidence = (
            sum(w.confidence for w in req.windows) / len(req.windows) if req.windows else 1.0
        )
        await req.emit("request_end", n_items=len(texts), status="ok", confidence=confidence)
        return RankingResult(order, scores_from_order(order), tuple(req.windows), confidence, usage)

    async def _window(
        self, req: _Request, number: int, window: Window, inside: tuple[int, ...]
    ) -> tuple[int, ...]:
        """PSC over one window of the plan, with its events."""
        where = {"start": window.start, "end": window.end, "pass": window.pass_index}
        await req.emit("window_start", number, **where)
        seed = derive_seed(
            self.seed, req.query, [req.texts[i] for i in inside], (window.pass_index, window.start)
        )
        result = await self.engine.rank_window(
            req.query,
            req.texts,
            inside,
            seed,
            start=window.start,
            hooks=req.hooks,
            request_id=req.request_id,
            window=number,
            request_limiter=req.limiter,
        )
        req.windows.append(result)
        await req.emit(
            "window_end", number, **where, confidence=result.confidence, failed=len(result.failed)
        )
        return result.order

    def rank(
        self, query: str, items: Sequence[Any], *, on_event: EventHook | None = None
    ) -> RankingResult:
        """Sync :meth:`arank`, through the one bridge (works inside a running event loop)."""
        return run_sync(self.arank, query, items, on_event=on_event)

    async def arank_many(
        self,
        requests: Iterable[RankRequest | tuple[str, Sequence[Any]]],
        *,
        on_event: EventHook | None = None,
        return_exceptions: bool = False,
    ) -> AsyncIterator[RankingResult | BaseException]:
        """Rank many lists at once; yield each result as it completes (``result.request``).

        All calls share the ranker's limiter, and at most ``max_concurrency`` requests are
        under way at once (the others wait their turn, in order). A failed request never
        stops the others: with ``return_exceptions=True`` its exception (with ``.request``
        set) is yielded in its place; otherwise every other result is yielded first and then
        the first failure is raised, with a note counting any further ones. Wrap the iterator
        in ``contextlib.aclosing`` if you may ``break`` out of the loop: closing it cancels
        the requests still under way.
        """
        failures: list[BaseException] = []
        stream = self._stream([_as_request(r) for r in requests], on_event)
        async with contextlib.aclosing(stream):
            async for _, outcome in stream:
                if isinstance(outcome, BaseException) and not return_exceptions:
                    failures.append(outcome)
                else:
                    yield outcome
        if failures:
            raise _first_failure(failures)

    async def _stream(
        self, todo: list[RankRequest], on_event: EventHook | None
    ) -> AsyncGenerator[tuple[int, Any], None]:
        """``(position, result or exception)`` for every request, as each completes."""
        send, receive = anyio.create_memory_object_stream[Any](len(todo) or 1)
        active = anyio.CapacityLimiter(self.max_concurrency)  # requests started at once
        async with anyio.create_task_group() as tg:
            for number, request in enumerate(todo):
                tg.start_soon(self._one_of_many, request, number, on_event, send.clone(), active)
            send.close()
            try:
                async with receive:
                    async for item in receive:
                        yield item
            except GeneratorExit:  # the consumer stopped early: cancel what is left
                tg.cancel_scope.cancel()

    async def _one_of_many(
        self,
        request: RankRequest,
        number: int,
        on_event: EventHook | None,
        send: Any,
        active: anyio.CapacityLimiter,
    ) -> None:
        async with send, active:
            rid = request.id if request.id is not None else number
            try:
                result = await self.arank(
                    request.query, request.items, on_event=on_event, request_id=rid
                )
            except Exception as exc:
                exc.request = request  # type: ignore[attr-defined]
                await send.send((number, exc))
            else:
                await send.send((number, replace(result, request=request)))

    def rank_many(
        self,
        requests: Iterable[RankRequest | tuple[str, Sequence[Any]]],
        *,
        on_event: EventHook | None = None,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """Sync :meth:`arank_many`; results in request order (see there for failures)."""
        todo = [_as_request(r) for r in requests]
        return run_sync(self._collect, todo, on_event, return_exceptions)

    async def _collect(
        self, todo: list[RankRequest], on_event: EventHook | None, return_exceptions: bool
    ) -> list[Any]:
        out: list[Any] = [None] * len(todo)
        async with contextlib.aclosing(self._stream(todo, on_event)) as stream:
            async for number, outcome in stream:
                out[number] = outcome
        errors = [o for o in out if isinstance(o, BaseException)]
        if errors and not return_exceptions:
            raise _first_failure(errors)
        return out

    async def aclose(self) -> None:
        """Close the backend if this ranker created it from a spec string."""
        if self._owns_backend:
            await self.backend.aclose()

    def close(self) -> None:
        """Sync :meth:`aclose`."""
        run_sync(self.aclose)

    async def __aenter__(self) -> PSCRanker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> PSCRanker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_request(request: RankRequest | tuple[str, Sequence[Any]]) -> RankRequest:
    if isinstance(request, RankRequest):
        return request
    try:
        query, items = request
    except (TypeError, ValueError):
        raise ConfigurationError(
            "each request must be a RankRequest or a (query, items) pair, "
            f"got {type(request).__name__}"
        ) from None
    return RankRequest(query, items)


def _first_failure(failures: list[BaseException]) -> BaseException:
    for extra in failures[1:]:
        add_note(failures[0], f"another request also failed: {type(extra).__name__}: {extra}")
    return failures[0]
