"""Rounds of blocks, each over the head of the round before (the default strategy; the
package docstring of :mod:`permsc_integrations.strategies` and docs/strategies.md describe it).

Example:
    >>> Blocks().planned(100, window_size=20, step=10, top_k=None)
    2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..aggregators import Aggregator, resolve
from ..checks import positive_int
from ..window_plan import Window
from .base import NextRounds, RankContext

__all__ = ["Blocks"]


@dataclass(frozen=True, slots=True)
class Blocks:
    """Rounds of blocks, each over the head of the one before (module docstring).

    ``head_windows``: how many windows' worth of the head the last round ranks. 1 (the
    default): one PSC window over the top ``window_size``. 2 or more: blocks again over the
    top ``head_windows * window_size``, for ``m`` more calls per extra window; it catches
    good items the round before left just below the head (docs/strategies.md).
    ``screen_to``: a list longer than this many windows is screened first: a round of
    ``screen_shuffles`` shuffles (at most m) keeps its top ``screen_to`` windows' worth for
    the full rounds, so a long list costs a few calls per item instead of m.
    ``head_by``: the consensus (an aggregator name or callable) that picks a full round's
    head for the next round. By default the aggregator's ``quick`` stand-in (Kemeny's: its
    local search, milliseconds): the next round starts at once and the ranker's aggregator
    orders the rest of the round meanwhile, so the head never waits for exact Kemeny (up to
    its ``time_limit``) and never depends on how far it got. An aggregator without a stand-in
    (Borda, RRF, Copeland), or ``head_by`` naming the ranker's aggregator
    (``head_by="kemeny"``), picks the head from the round's consensus: the next round waits
    for it (docs/strategies.md: what either costs). ``screen_by``: the consensus whose head
    a screening round keeps. A screening round sees each item in only a few blocks, where
    Kemeny keeps items that never lost below a few lucky ones; RRF rewards an item placed
    first in most of its blocks (docs/strategies.md: the true top 10 of 1,000 all kept by
    RRF, 6 of them by Kemeny).
    """

    head_windows: int = 1
    screen_to: int = 5
    screen_shuffles: int = 5
    head_by: str | Aggregator | None = None
    screen_by: str | Aggregator = "rrf"

    def __post_init__(self) -> None:
        for name in ("head_windows", "screen_to", "screen_shuffles"):
            positive_int(name, getattr(self, name))
        for method in (self.head_by, self.screen_by):
            if method is not None:
                resolve(method)  # an unknown name fails here, not in the middle of a request

    async def __call__(self, ctx: RankContext) -> Sequence[int]:
        everything = tuple(range(ctx.n))
        if ctx.n <= 1:
            return everything
        return await self._round(ctx, 0, everything)

    async def _round(self, ctx: RankContext, number: int, items: tuple[int, ...]) -> Sequence[int]:
        """A blocks round over ``items`` (screening when they are many), then the next
        rounds over its head; a list that fits the last round is ranked by it alone."""
        size = ctx.window_size
        if len(items) <= self.head_windows * size:
            return await self._last(ctx, number, items)
        if len(items) > self.screen_to * size:
            screen = NextRounds(
                self.screen_to * size,
                self.screen_by,
                lambda run, head: self._round(run, number + 1, head),
            )
            return await ctx.blocks(number, items, shuffles=self.screen_shuffles, then=screen)
        head = NextRounds(
            self.head_windows * size,
            self.head_by,
            lambda run, head: self._last(run, number + 1, head),
        )
        return await ctx.blocks(number, items, then=head)

    @staticmethod
    async def _last(ctx: RankContext, number: int, items: tuple[int, ...]) -> Sequence[int]:
        if len(items) > ctx.window_size:
            return await ctx.blocks(number, items)
        return await ctx.window(number, Window(0, len(items), pass_index=number), items)

    def planned(self, n: int, *, window_size: int, step: int, top_k: int | None) -> int:
        rounds = 0 if n <= 1 else 1
        if n > self.screen_to * window_size:
            rounds, n = rounds + 1, self.screen_to * window_size
        return rounds + (n > self.head_windows * window_size)
