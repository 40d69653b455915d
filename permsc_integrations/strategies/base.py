"""The strategy protocol: what a strategy is, and what it may ask of the ranker.

A strategy is a callable ``await strategy(ctx) -> order`` over a :class:`RankContext` (the
request in flight, :class:`~permsc_integrations.run.request.RequestRun`), with a ``plan``
method that says what a request costs before it runs (:mod:`.plan`). :class:`NextRounds` is
what a blocks round hands on: the rounds that follow it over its head. The strategies themselves
are in :mod:`.sliding` and :mod:`.blocks`; the registry is :mod:`permsc_integrations.strategies`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..aggregators import Aggregator
from ..window_plan import Window
from .plan import Plan, PlanOptions, WindowShape

__all__ = ["RankContext", "Strategy", "NextRounds"]


@dataclass(frozen=True, slots=True)
class NextRounds:
    """What follows a blocks round: ``rank(ctx, head)`` orders its top ``keep`` items, as
    picked by ``head_by`` (an aggregator name or callable; ``None``: the ranker's quick
    stand-in, see :meth:`~permsc_integrations.run.engine.WindowEngine.head_by`). Unless that is
    the ranker's aggregator itself, the head is known at once and ``rank`` runs while the
    round's consensus is computed."""

    keep: int
    head_by: str | Aggregator | None
    rank: Callable[[RankContext, tuple[int, ...]], Awaitable[Sequence[int]]]


class RankContext(WindowShape, Protocol):
    """What a strategy can ask of the ranker for one request: its ``n`` items, the options
    that shape its windows (:class:`~.plan.WindowShape`), and PSC over a window or blocks."""

    @property
    def n(self) -> int: ...

    async def window(self, number: int, window: Window, inside: tuple[int, ...]) -> Sequence[int]:
        """PSC over the items ``inside`` (in that input order): the same items, best first."""
        ...

    async def blocks(
        self,
        number: int,
        inside: tuple[int, ...],
        *,
        shuffles: int | None = None,
        then: NextRounds | None = None,
    ) -> Sequence[int]:
        """PSC over blocks of ``inside`` (``shuffles`` of them, default m): the consensus
        order of those items; with ``then``, the head ``then.head_by`` picks ranked by
        ``then.rank(ctx, head)`` first (see :class:`NextRounds`)."""
        ...


class Strategy(Protocol):
    """``await strategy(ctx)`` ranks a request; ``plan(n, options)`` says, before it runs,
    which rounds (PSC windows or blocks rounds) it takes and their calls (:mod:`.plan`): the
    progress total, ``permsc estimate`` and the docs read it, and a test holds it to the calls
    the ranker makes."""

    async def __call__(self, ctx: RankContext) -> Sequence[int]: ...

    def plan(self, n: int, options: PlanOptions) -> Plan: ...
