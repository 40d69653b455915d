"""How a list longer than one window is ranked: strategies, by name.

- ``"sliding"`` (RankGPT): windows of ``window_size`` move by ``step`` from the back of the
  list to the front, one after another, PSC in each (:mod:`.windows`). One pass settles the
  top ``window_size - step``; ``top_k`` adds passes.
- ``"blocks"``: two rounds. Each of the m shuffles of the *whole* list is cut into balanced
  blocks of at most ``window_size`` items (every item once per shuffle, with new neighbours
  each time); every block of every shuffle is one call, all in the first round; the consensus
  of all the blocks' partial rankings orders the list. The second round is one PSC window
  over the consensus's top ``window_size``. So the wall time is about two calls' latency
  whatever the length (sliding: one per window), for ``m * ceil(n / window_size) + m`` calls
  (sliding, one pass: ``m`` per window). ``top_k`` up to ``window_size`` is settled by the
  second round; below it the order is the first round's consensus. ``Blocks(head_windows=2)``
  makes the second round blocks over the top two windows' worth instead.

A list that fits one window is one PSC window under either strategy. A strategy is a callable
``await strategy(ctx) -> order`` over a :class:`RankContext` with a ``planned`` method;
``strategies.register(name, obj)`` (or the entry-point group
``permsc_integrations.strategies``) adds one.

Example:
    >>> available()
    ['blocks', 'sliding']
    >>> get("blocks").planned(100, window_size=20, step=10, top_k=None)
    2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .options import _at_least
from .registry import Registry
from .windows import Window, plan_windows, run_windows

__all__ = [
    "RankContext",
    "Strategy",
    "Sliding",
    "Blocks",
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

    async def blocks(self, number: int, inside: tuple[int, ...]) -> Sequence[int]:
        """PSC over blocks of ``inside``: the consensus order of those items."""
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
    """Blocks of every shuffle at once, then the head again (module docstring).

    ``head_windows``: how many windows' worth of the first round's head the second round
    ranks. 1 (the default): one PSC window over the top ``window_size``. 2 or more: blocks
    again over the top ``head_windows * window_size``, still one round, for ``m`` more calls
    per extra window; it catches good items the first round left just below the head
    (docs/strategies.md: top 10 of 1,000, P@10 0.77 with 1, 0.90 with 2).
    """

    head_windows: int = 1

    def __post_init__(self) -> None:
        _at_least(1)("head_windows", self.head_windows)

    async def __call__(self, ctx: RankContext) -> Sequence[int]:
        everything = tuple(range(ctx.n))
        if ctx.n <= 1:
            return everything
        if ctx.n <= ctx.window_size:
            return await ctx.window(0, Window(0, ctx.n), everything)
        first = list(await ctx.blocks(0, everything))
        size = self.head_windows * ctx.window_size
        head = tuple(first[:size])
        if len(head) > ctx.window_size:
            refined = await ctx.blocks(1, head)
        else:
            refined = await ctx.window(1, Window(0, len(head), pass_index=1), head)
        return [*refined, *first[size:]]

    def planned(self, n: int, *, window_size: int, step: int, top_k: int | None) -> int:
        return 0 if n <= 1 else 1 if n <= window_size else 2


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
