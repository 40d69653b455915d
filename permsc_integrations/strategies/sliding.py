"""RankGPT's sliding windows: the plan (:mod:`permsc_integrations.window_plan`) run back to
front, one window after another, each window's ranking replacing its slice of the list.

Example:
    >>> from permsc_integrations.options import RankingOptions
    >>> plan = Sliding().plan(25, RankingOptions(strategy="sliding", window_size=10, step=5))
    >>> [(r.start, r.end) for r in plan.rounds], str(plan.calls)
    ([(15, 25), (10, 20), (5, 15), (0, 10)], '80')
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ..errors import InvalidRankingError
from ..window_plan import Window, plan_windows
from .base import RankContext
from .plan import Plan, PlanOptions, Round, WindowShape

__all__ = ["Sliding", "run_windows", "RankWindow"]


class Sliding:
    """RankGPT's sliding windows, back to front (see the module docstring)."""

    async def __call__(self, ctx: RankContext) -> Sequence[int]:
        return await run_windows(range(ctx.n), _windows(ctx.n, ctx), ctx.window)

    def plan(self, n: int, options: PlanOptions) -> Plan:
        """One round per window of the plan, m calls each."""
        m = options.num_permutations
        rounds = (Round.of(w.start, w.end, (w.size,), m, options) for w in _windows(n, options))
        return Plan(n, tuple(rounds))


def _windows(n: int, shape: WindowShape) -> list[Window]:
    """The windows over ``n`` items, the one source of :meth:`Sliding.__call__` and
    :meth:`Sliding.plan`."""
    return plan_windows(n, window_size=shape.window_size, step=shape.step, top_k=shape.top_k)


RankWindow = Callable[[int, Window, tuple[int, ...]], Awaitable[Sequence[int]]]
"""``rank(window_number, window, items_in_window) -> the same items, best first``."""


async def run_windows(order: Sequence[int], plan: Sequence[Window], rank: RankWindow) -> list[int]:
    """Run ``plan`` over ``order`` in sequence: each window's ranking replaces its slice."""
    current = list(order)
    for number, window in enumerate(plan):
        inside = tuple(current[window.start : window.end])
        ranked = list(await rank(number, window, inside))
        if sorted(ranked) != sorted(inside):
            raise InvalidRankingError(
                f"window {number} returned {ranked}, not a reordering of {list(inside)}"
            )
        current[window.start : window.end] = ranked
    return current
