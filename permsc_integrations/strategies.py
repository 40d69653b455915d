"""How a list longer than one window is ranked: strategies, by name.

- ``"sliding"`` (RankGPT): windows of ``window_size`` move by ``step`` from the back of the
  list to the front, one after another, PSC in each (:mod:`.windows`). One pass settles the
  top ``window_size - step``; ``top_k`` adds passes.
- ``"blocks"``: rounds of blocks, each over the head of the round before. In a round, each
  shuffle of the round's items is cut into balanced blocks of at most ``window_size`` items
  (every item once per shuffle, with new neighbours each time), and every block of every
  shuffle is one call, all at once. A quick consensus (``head_by``) picks the round's head
  for the next round, which starts at once while the ranker's aggregator orders the rest of
  the round's items; the last round is one PSC window over the top ``window_size``. A list
  of up to five windows takes two rounds (about two calls' latency whatever its length, for
  ``m * ceil(n / window_size) + m`` calls; sliding, one pass: ``m`` per window); a longer
  one is first *screened* by a round of a few shuffles (``screen_shuffles``, 5) that keeps
  its top five windows (three rounds: n = 1000, m = 20: 370 calls). ``top_k`` up to
  ``window_size`` is settled by the last round; below the head, each item keeps the order
  of the last round that ranked it. ``Blocks(head_windows=2)`` makes the last round blocks
  over the top two windows' worth instead.

A list that fits one window is one PSC window under either strategy. A strategy is a callable
``await strategy(ctx) -> order`` over a :class:`RankContext` with a ``planned`` method;
``strategies.register(name, obj)`` (or the entry-point group
``permsc_integrations.strategies``) adds one.

Example:
    >>> available()
    ['blocks', 'sliding']
    >>> get("blocks").planned(100, window_size=20, step=10, top_k=None)
    2
    >>> get("blocks").planned(1000, window_size=20, step=10, top_k=None)
    3
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .aggregators import Aggregator, resolve
from .options import _at_least
from .registry import Registry
from .request import Later
from .windows import Window, plan_windows, run_windows

__all__ = [
    "RankContext",
    "Strategy",
    "Sliding",
    "Blocks",
    "Later",
    "register",
    "available",
    "get",
]


class RankContext(Protocol):
    """What a strategy can ask of the ranker for one request."""

    @property
    def n(self) -> int: ...

    @property
    def window_size(self) -> int: ...

    @property
    def step(self) -> int: ...

    @property
    def top_k(self) -> int | None: ...

    async def window(self, number: int, window: Window, inside: tuple[int, ...]) -> Sequence[int]:
        """PSC over the items ``inside`` (in that input order): the same items, best first."""
        ...

    async def blocks(
        self,
        number: int,
        inside: tuple[int, ...],
        *,
        shuffles: int | None = None,
        then: Later | None = None,
    ) -> Sequence[int]:
        """PSC over blocks of ``inside`` (``shuffles`` of them, default m): the consensus
        order of those items; with ``then``, the head ``then.head_by`` picks ranked by
        ``then.rank(ctx, head)`` first (see :class:`Later`)."""
        ...


class Strategy(Protocol):
    """``await strategy(ctx)`` ranks a request; ``planned`` says how many PSC windows it
    takes (for progress events)."""

    async def __call__(self, ctx: RankContext) -> Sequence[int]: ...

    def planned(self, n: int, *, window_size: int, step: int, top_k: int | None) -> int: ...


class Sliding:
    """RankGPT's sliding windows, back to front (see the module docstring)."""

    async def __call__(self, ctx: RankContext) -> Sequence[int]:
        plan = plan_windows(ctx.n, window_size=ctx.window_size, step=ctx.step, top_k=ctx.top_k)
        return await run_windows(range(ctx.n), plan, ctx.window)

    def planned(self, n: int, *, window_size: int, step: int, top_k: int | None) -> int:
        return len(plan_windows(n, window_size=window_size, step=step, top_k=top_k))


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
            _at_least(1)(name, getattr(self, name))
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
            screen = Later(
                self.screen_to * size,
                self.screen_by,
                lambda run, head: self._round(run, number + 1, head),
            )
            return await ctx.blocks(number, items, shuffles=self.screen_shuffles, then=screen)
        head = Later(
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


SLIDING, BLOCKS = Sliding(), Blocks()


_registry: Registry[Strategy] = Registry(
    "strategy",
    "permsc_integrations.strategies",
    {
        "sliding": "permsc_integrations.strategies:SLIDING",
        "blocks": "permsc_integrations.strategies:BLOCKS",
    },
    normalize=lambda name: name.strip().lower(),
)


def register(name: str, strategy: Strategy) -> None:
    """Register ``strategy`` (see :class:`Strategy`) as ``name``."""
    _registry.register(name, strategy)


def available() -> list[str]:
    """Every strategy name, sorted."""
    return _registry.available()


def get(name: str | Strategy) -> Strategy:
    """The strategy registered as ``name`` (an object is returned as is)."""
    return _registry.get(name) if isinstance(name, str) else name
