"""One request while it runs: its texts, its events, and the PSC windows a strategy asks for.

:class:`RequestRun` is the :class:`~permsc_integrations.strategies.base.RankContext` the ranker
hands its strategy: ``window`` runs PSC over a window of the list, ``blocks`` PSC over blocks of it,
each with its ``window_start``/``window_end`` events, its own derived seed, and its result kept
for the request's usage and confidence.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

from ..errors import PermscError
from ..events import Event, EventHook, EventKind, emit
from ..options import RankingOptions
from ..results import Usage, WindowResult
from ..strategies.base import NextRounds
from ..window_plan import Window
from .engine import BlocksDraw, WindowEngine, derive_seed
from .limiter import CallLimiter
from .sampling import first_failure

__all__ = ["RequestRun"]


@dataclass
class RequestRun:
    """One request in flight (see the module docstring)."""

    engine: WindowEngine
    options: RankingOptions
    query: str
    texts: list[str]
    hooks: tuple[EventHook | None, ...]
    request_id: Any
    total: int
    limiter: CallLimiter | None
    done: dict[int, WindowResult] = field(default_factory=dict)

    @property
    def windows(self) -> list[WindowResult]:
        """The windows done so far, in plan order (blocks rounds can finish out of order)."""
        return [self.done[k] for k in sorted(self.done)]

    @property
    def n(self) -> int:
        return len(self.texts)

    @property
    def window_size(self) -> int:
        return self.options.window_size

    @property
    def step(self) -> int:
        return self.options.step

    @property
    def top_k(self) -> int | None:
        return self.options.top_k

    def usage(self) -> Usage:
        """What the windows done so far cost."""
        saved = Usage(saved_calls=sum(w.saved_calls for w in self.windows))
        return sum((s.usage for w in self.windows for s in w.samples), saved)

    async def emit(self, kind: EventKind, window: int | None = None, **detail: Any) -> None:
        await emit(self.hooks, Event(kind, self.request_id, window, None, self.total, detail))

    def _seed(self, inside: Sequence[int], where: Any) -> int:
        return derive_seed(self.options.seed, self.query, [self.texts[i] for i in inside], where)

    async def window(self, number: int, window: Window, inside: tuple[int, ...]) -> Sequence[int]:
        """PSC over one window (``inside``: its items in input order), with its events."""
        where = {"start": window.start, "end": window.end, "pass": window.pass_index}
        await self.emit("window_start", number, **where, items=inside)
        result = await self.engine.rank_window(
            self.query,
            self.texts,
            inside,
            self._seed(inside, (window.pass_index, window.start)),
            start=window.start,
            hooks=self.hooks,
            request_id=self.request_id,
            window=number,
            request_limiter=self.limiter,
        )
        return await self._done(number, result, where)

    async def blocks(
        self,
        number: int,
        inside: tuple[int, ...],
        *,
        shuffles: int | None = None,
        then: NextRounds | None = None,
    ) -> Sequence[int]:
        """PSC over blocks of ``inside`` (a round of the blocks strategy), with its events.

        ``shuffles``: how many shuffles of ``inside`` (default m). ``then``: the later rounds
        (:class:`NextRounds`) over this round's head; the answer is their order followed by this
        round's consensus of the rest."""
        where = {"start": 0, "end": len(inside), "pass": number, "blocks": True}
        await self.emit("window_start", number, **where, items=inside)
        draw = await self.engine.draw_blocks(
            self.query,
            self.texts,
            inside,
            self._seed(inside, "blocks"),
            block_size=self.window_size,
            shuffles=shuffles,
            hooks=self.hooks,
            request_id=self.request_id,
            window=number,
            request_limiter=self.limiter,
        )
        if then is None:
            return await self._settle(number, draw, where)
        return await self._then(number, draw, where, then)

    async def _then(
        self, number: int, draw: BlocksDraw, where: dict[str, Any], then: NextRounds
    ) -> Sequence[int]:
        """The later rounds over this round's head (:class:`NextRounds`), beside its consensus
        unless the consensus itself picks the head."""
        pick = self.engine.head_by(then.head_by)
        if pick is self.engine.aggregator:  # no quicker way to the head: wait for it
            order = await self._settle(number, draw, where)
            head = tuple(order[: then.keep])
            ranked = await then.rank(self, head)
        else:
            head = await self.engine.pick_head(draw, then.keep, pick)
            outcome: list[Sequence[int] | PermscError] = []
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(_attempt, then.rank(self, head), outcome)
                    order = await self._settle(number, draw, where)
            except BaseExceptionGroup as errors:  # surface the failure itself
                raise first_failure(errors) from None
            if isinstance(outcome[0], PermscError):
                raise outcome[0]
            ranked = outcome[0]
        chosen = set(head)
        return [*ranked, *(i for i in order if i not in chosen)]

    async def _settle(self, number: int, draw: BlocksDraw, where: dict[str, Any]) -> Sequence[int]:
        return await self._done(number, await self.engine.settle(draw), where)

    async def _done(
        self, number: int, result: WindowResult, where: dict[str, Any]
    ) -> Sequence[int]:
        self.done[number] = result
        await self.emit(
            "window_end",
            number,
            **where,
            confidence=result.confidence,
            failed=len(result.failed),
            samples=len(result.samples),
        )
        return result.order


async def _attempt(
    work: Awaitable[Sequence[int]], outcome: list[Sequence[int] | PermscError]
) -> None:
    """``work``'s result or its library error, kept in ``outcome`` (so that the round beside
    it finishes and its calls are counted before the error is raised)."""
    try:
        outcome.append(await work)
    except PermscError as error:
        outcome.append(error)
