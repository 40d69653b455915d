"""Rounds of blocks, each over the head of the round before (the default strategy; the
package docstring of :mod:`permsc_integrations.strategies` and docs/strategies.md describe it).

Example:
    >>> from permsc_integrations.options import RankingOptions
    >>> plan = Blocks().plan(1000, RankingOptions())  # screening, a full round, the head
    >>> [(r.items, len(r.prompts), r.shuffles, r.calls.high) for r in plan.rounds]
    [(1000, 50, 5, 250), (100, 5, 20, 100), (20, 1, 20, 20)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..aggregators import Aggregator, resolve
from ..checks import positive_int
from ..permutations import cut_blocks
from ..window_plan import Window
from .base import NextRounds, RankContext
from .plan import Plan, PlanOptions, Round

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
        stages = self._shape(ctx.n, ctx.window_size)
        everything = tuple(range(ctx.n))
        return await self._run(ctx, stages, 0, everything) if stages else everything

    def _shape(self, n: int, size: int) -> tuple[_Stage, ...]:
        """The rounds over ``n`` items, the one source of :meth:`__call__` and :meth:`plan`:
        a screening round when they are many, a full round when they are more than the last
        round takes, then the last round (a window, or blocks over ``head_windows`` windows)."""
        if n <= 1:
            return ()
        stages = []
        if n > self.screen_to * size:
            stages.append(_Stage(n, self.screen_shuffles, self.screen_by))
            n = self.screen_to * size
        if n > self.head_windows * size:
            stages.append(_Stage(n, None, self.head_by))
            n = self.head_windows * size
        stages.append(_Stage(n, None, None, window=n <= size))
        return tuple(stages)

    async def _run(
        self, ctx: RankContext, stages: tuple[_Stage, ...], number: int, items: tuple[int, ...]
    ) -> Sequence[int]:
        """Round ``number`` over ``items``, then the rounds after it over its head."""
        stage = stages[number]
        if stage.window:
            return await ctx.window(number, Window(0, len(items), pass_index=number), items)
        then = None
        if number + 1 < len(stages):
            then = NextRounds(
                stages[number + 1].items,
                stage.pick,
                lambda run, head: self._run(run, stages, number + 1, head),
            )
        return await ctx.blocks(number, items, shuffles=stage.shuffles, then=then)

    def plan(self, n: int, options: PlanOptions) -> Plan:
        """The rounds of :meth:`_shape` and their calls (blocks read neither ``step`` nor
        ``top_k``: the last round settles the top ``window_size``)."""
        m, size = options.num_permutations, options.window_size
        rounds = []
        for stage in self._shape(n, size):
            prompts = (stage.items,) if stage.window else _block_sizes(stage.items, size)
            shuffles = min(stage.shuffles or m, m)
            rounds.append(Round.of(0, stage.items, prompts, shuffles, options))
        return Plan(n, tuple(rounds))


@dataclass(frozen=True, slots=True)
class _Stage:
    """One round of :meth:`Blocks._shape`: over ``items`` items (the head of the round
    before), blocks of ``shuffles`` shuffles (None: m) or one ``window``; ``pick`` picks
    its head for the next round (:class:`NextRounds`)."""

    items: int
    shuffles: int | None
    pick: str | Aggregator | None
    window: bool = False


def _block_sizes(items: int, size: int) -> tuple[int, ...]:
    return tuple(len(block) for block in cut_blocks(range(items), size))
