"""Rounds of blocks, each over the head of the round before (the default strategy; the
package docstring of :mod:`permsc_integrations.strategies` and docs/strategies.md describe it).
Under ``max_calls`` below this plan, or adaptive m with a ``top_k``, the chooser
(:func:`permsc_integrations.strategies.choose`) runs a list longer than a window with the
frontier strategy instead; a list that fits one window gets at most ``max_calls`` shuffles.

Example:
    >>> from permsc_integrations._options.options import RankingOptions
    >>> plan = Blocks().plan(1000, RankingOptions())  # screening, a full round, the head
    >>> [(r.items, len(r.prompts), r.shuffles, r.calls.high) for r in plan.rounds]
    [(1000, 50, 5, 250), (100, 5, 20, 100), (20, 1, 20, 20)]
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from permsc_integrations._checks import positive_int
from permsc_integrations.aggregators import Aggregator, resolve
from permsc_integrations.permutations import cut_blocks, distinct_permutations
from permsc_integrations.strategies._base import Outcome, RankContext
from permsc_integrations.strategies._plan import Plan, PlanOptions, Round
from permsc_integrations.strategies._window_plan import Window

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

    async def __call__(self, ctx: RankContext) -> Outcome:
        """Each round over the head of the one before: a round's head is picked at once
        (:meth:`RankContext.lead`) and the next round starts while the round's consensus is
        computed; the answer is the last round's order, then each earlier round's consensus
        of the items it did not pass on."""
        return Outcome(tuple(await self._rounds(ctx)))

    async def _rounds(self, ctx: RankContext) -> Sequence[int]:
        stages = ctx.plan.detail
        assert isinstance(stages, tuple), "a Blocks plan's detail: its stages"
        items = tuple(range(ctx.plan.n))
        later: list[Awaitable[Sequence[int]]] = []
        ranked: Sequence[int] = items
        for number, stage in enumerate(stages):
            if stage.window:
                where = Window(0, len(items), pass_index=number)
                count = _window_shuffles(ctx.options)
                ranked = await ctx.window(number, where, items, shuffles=count)
                break
            shuffles = self._shuffles(ctx, items, stage)
            draw = await ctx.draw(number, items, shuffles, top=ctx.options.window_size)
            if number + 1 == len(stages):
                ranked = await ctx.settle(draw)
                break
            lead = await ctx.lead(draw, stages[number + 1].items, stage.pick)
            later.append(lead.rest)
            items = lead.head
        for rest in reversed(later):
            order, chosen = await rest, set(ranked)
            ranked = [*ranked, *(i for i in order if i not in chosen)]
        return ranked

    @staticmethod
    def _shuffles(
        ctx: RankContext, items: tuple[int, ...], stage: _Stage
    ) -> list[list[tuple[int, ...]]]:
        """The round's distinct shuffles of ``items`` (``stage.shuffles``, at most m), each
        cut into balanced blocks of at most ``window_size`` positions."""
        m, size = ctx.options.num_permutations, ctx.options.window_size
        count = min(stage.shuffles or m, m)
        perms = distinct_permutations(len(items), count, seed=ctx.seed(items, "blocks"))
        return [cut_blocks(perm, size) for perm in perms]

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

    def plan(self, n: int, options: PlanOptions) -> Plan:
        """The rounds of :meth:`_shape` and their calls (blocks read neither ``step`` nor
        ``top_k``: the last round settles the top ``window_size``). Where the chooser runs
        the frontier instead, ``RankingOptions.plan`` gives the frontier's plan."""
        m, size = options.num_permutations, options.window_size
        rounds, stages = [], self._shape(n, size)
        for stage in stages:
            prompts = (stage.items,) if stage.window else _block_sizes(stage.items, size)
            shuffles = _window_shuffles(options) if stage.window else min(stage.shuffles or m, m)
            rounds.append(Round.of(0, stage.items, prompts, shuffles, options))
        return Plan(n, tuple(rounds), detail=stages)


@dataclass(frozen=True, slots=True)
class _Stage:
    """One round of :meth:`Blocks._shape`: over ``items`` items (the head of the round
    before), blocks of ``shuffles`` shuffles (None: m) or one ``window``; ``pick`` picks
    its head for the next round (:meth:`RankContext.lead`)."""

    items: int
    shuffles: int | None
    pick: str | Aggregator | None
    window: bool = False


def _window_shuffles(options: PlanOptions) -> int:
    """A last round's PSC window: m shuffles, at most ``max_calls``."""
    return min(options.num_permutations, options.max_calls or options.num_permutations)


def _block_sizes(items: int, size: int) -> tuple[int, ...]:
    return tuple(len(block) for block in cut_blocks(range(items), size))
