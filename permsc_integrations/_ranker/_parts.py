"""The ranker's parts off a request's path: :class:`RankRequest` and the many-request helpers
(:meth:`~permsc_integrations.PSCRanker.arank_many`), and why a built ranker refuses a write."""

from __future__ import annotations

import contextlib
import difflib
import logging
from collections.abc import AsyncGenerator, Awaitable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from permsc_integrations._events import EventHook
from permsc_integrations._options.options import RankingOptions
from permsc_integrations.errors import ConfigurationError, add_note, grouped
from permsc_integrations.results import RankingResult

__all__ = ["RankRequest"]


@dataclass(frozen=True)
class RankRequest:
    """One list to rank: ``items`` are strings, documents or mappings; ``id`` tags events."""

    query: str
    items: Sequence[object]
    id: object = None


_SETTABLE = frozenset({"on_event"})
"""What a built ranker reads on every request, so that setting it is honoured: its event hook.
Its parts (``_engine``, ``_limiter``, ``_breaker``, ``_meter``: the spending meter of
``ranker_cap``, given to another ranker as ``meter=``) are private."""


def _refusal(ranker: object, name: str) -> str:
    """Why ``ranker.name = ...`` is refused (a built PSCRanker), and what to do instead."""
    if name in RankingOptions.names():
        return (
            f"a PSCRanker's options are fixed when it is built (its engine, limiter and breaker "
            f"are made from them), so setting {name!r} would be ignored; build a new ranker: "
            f"PSCRanker(backend, options=ranker.options.replace({name}=...))"
        )
    if hasattr(type(ranker), name) or name in vars(ranker):
        return (
            f"PSCRanker.{name} is fixed when the ranker is built, so setting it would be "
            "ignored; build a new ranker"
        )
    public = [a for a in vars(ranker) if not a.startswith("_")]
    close = difflib.get_close_matches(name, [*RankingOptions.names(), *public], n=2)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return (
        f"PSCRanker has no attribute {name!r}{hint}; its options are given when it is built "
        f"(PSCRanker(backend, num_permutations=...)) and fixed after"
    )


def _as_request(request: RankRequest | tuple[str, Sequence[object]]) -> RankRequest:
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
    for line in grouped(failures[1:]):  # identical failures once, counted
        add_note(failures[0], f"other requests also failed: {line}")
    return failures[0]


Outcome = RankingResult | BaseException
"""What one of many requests ends in: its result, or the exception it raised."""


class Arank(Protocol):
    """:meth:`~permsc_integrations.PSCRanker.arank`, as the many-request helpers call it."""

    def __call__(
        self, query: str, items: Sequence[object], *, on_event: EventHook | None, request_id: object
    ) -> Awaitable[RankingResult]: ...


async def stream_requests(
    arank: Arank, todo: list[RankRequest], on_event: EventHook | None, limit: int
) -> AsyncGenerator[tuple[int, Outcome], None]:
    """``(position, result or exception)`` for every request, as each completes; at most
    ``limit`` requests under way at once (the others wait their turn, in order)."""
    send, receive = anyio.create_memory_object_stream[tuple[int, Outcome]](len(todo) or 1)
    active = anyio.CapacityLimiter(limit)  # requests started at once
    async with anyio.create_task_group() as tg:
        for number, request in enumerate(todo):
            tg.start_soon(_one_of_many, arank, request, number, on_event, send.clone(), active)
        send.close()
        try:
            async with receive:
                async for item in receive:
                    yield item
        except GeneratorExit:  # the consumer stopped early: cancel what is left
            tg.cancel_scope.cancel()


async def _one_of_many(
    arank: Arank,
    request: RankRequest,
    number: int,
    on_event: EventHook | None,
    send: MemoryObjectSendStream[tuple[int, Outcome]],
    active: anyio.CapacityLimiter,
) -> None:
    async with send, active:
        rid = request.id if request.id is not None else number
        try:
            result = await arank(request.query, request.items, on_event=on_event, request_id=rid)
        except Exception as exc:
            try:  # declared on PermscError; set on any other exception that takes it
                exc.request = request  # type: ignore[attr-defined]
            except AttributeError:
                add_note(exc, f"while ranking request {rid!r}")
            await send.send((number, exc))
        else:
            await send.send((number, replace(result, request=request)))


async def collect_requests(
    arank: Arank,
    todo: list[RankRequest],
    on_event: EventHook | None,
    limit: int,
    return_exceptions: bool,
) -> list[Outcome]:
    """Every request's outcome, in request order; the first failure raised unless
    ``return_exceptions``."""
    out: list[Outcome | None] = [None] * len(todo)
    async with contextlib.aclosing(stream_requests(arank, todo, on_event, limit)) as stream:
        async for number, outcome in stream:
            out[number] = outcome
    done = [o for o in out if o is not None]
    errors = [o for o in done if isinstance(o, BaseException)]
    if errors and not return_exceptions:
        raise _first_failure(errors)
    return done


def warn_degenerate(result: RankingResult) -> None:
    """Log :attr:`RankingResult.degenerate_note` as a warning, if there is one: the ranking
    stands; the warning says what it stands on."""
    note = result.degenerate_note
    if note is not None:
        logging.getLogger("permsc_integrations").warning("%s", note)
