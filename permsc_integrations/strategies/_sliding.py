"""RankGPT's sliding windows: the plan (:mod:`._window_plan`) run back to
front, one window after another, each window's ranking replacing its slice of the list.

Under ``max_calls`` the windows share the budget: each gets ``max_calls // windows`` distinct
shuffles (the windows nearest the top one more, from what is left over), at most m; a window
gets fewer when re-asks and retries have spent more than planned, so the last (top) windows
are never starved. A budget below one call per window ranks the first items of the input
that its windows can afford (RankGPT's ``rank_end``): the rest keep their input order, and
the result's ``head`` says so.

Example:
    >>> from permsc_integrations._options.options import RankingOptions
    >>> plan = Sliding().plan(25, RankingOptions(strategy="sliding", window_size=10, step=5))
    >>> [(r.start, r.end) for r in plan.rounds], str(plan.calls)
    ([(15, 25), (10, 20), (5, 15), (0, 10)], '80')
    >>> budget = RankingOptions(strategy="sliding", max_calls=9)
    >>> [(r.end, r.shuffles) for r in Sliding().plan(100, budget).rounds]
    [(100, 1), (90, 1), (80, 1), (70, 1), (60, 1), (50, 1), (40, 1), (30, 1), (20, 1)]
    >>> [(r.end, r.shuffles) for r in Sliding().plan(100, budget.replace(max_calls=4)).rounds]
    [(50, 1), (40, 1), (30, 1), (20, 1)]
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from permsc_integrations.errors import InvalidRankingError
from permsc_integrations.results import StopReason
from permsc_integrations.strategies._base import Outcome, RankContext
from permsc_integrations.strategies._plan import Plan, PlanOptions, Round, WindowShape
from permsc_integrations.strategies._window_plan import Window, plan_windows

__all__ = ["Sliding", "run_windows", "RankWindow"]


class Sliding:
    """RankGPT's sliding windows, back to front (see the module docstring)."""

    async def __call__(self, ctx: RankContext) -> Outcome:
        """The plan's windows (``ctx.plan.detail``), one after another."""
        laid = ctx.plan.detail
        assert isinstance(laid, _Laid), "a Sliding plan's detail: its windows"
        count = len(laid.windows)

        async def rank(number: int, window: Window, inside: tuple[int, ...]) -> Sequence[int]:
            shuffles, left = laid.shuffles[number], count - number  # left: share what is left
            return await ctx.window(number, window, inside, shuffles=shuffles, left=left)

        order = await run_windows(range(ctx.plan.n), laid.windows, rank)
        return Outcome(tuple(order), head=laid.head, stopped=laid.stopped)

    def plan(self, n: int, options: PlanOptions) -> Plan:
        """One round per window of the plan, m calls each (under ``max_calls``: its share)."""
        head, windows, planned = _budgeted(n, options)
        rounds = (
            Round.of(w.start, w.end, (w.size,), shuffles, options)
            for w, shuffles in zip(windows, planned, strict=True)
        )
        m, budget = options.num_permutations, options.max_calls
        budgeted = budget is not None and budget < m * len(_windows(n, options))
        laid = _Laid(head, tuple(windows), tuple(planned), "budget" if budgeted else "complete")
        return Plan(n, tuple(rounds), detail=laid)


@dataclass(frozen=True, slots=True)
class _Laid:
    """What :meth:`Sliding.plan` decided, for its run: the items ranked (the first ``head``),
    the windows, each one's shuffles, and why sampling will have ended."""

    head: int
    windows: tuple[Window, ...]
    shuffles: tuple[int, ...]
    stopped: StopReason


def _windows(n: int, shape: WindowShape) -> list[Window]:
    """The windows over ``n`` items."""
    return plan_windows(n, window_size=shape.window_size, step=shape.step, top_k=shape.top_k)


def _budgeted(n: int, options: PlanOptions) -> tuple[int, list[Window], list[int]]:
    """The one source of :meth:`Sliding.__call__` and :meth:`Sliding.plan`: the items ranked
    (the first ``head``), their windows and each window's shuffles (module docstring)."""
    m, budget = options.num_permutations, options.max_calls
    windows = _windows(n, options)
    if budget is None or budget >= m * len(windows):
        return n, windows, [m] * len(windows)
    head = n if len(windows) <= budget else _head(n, options, budget)
    windows = _windows(head, options)
    base, extra = divmod(budget, len(windows))
    shares = [min(m, base + (k >= len(windows) - extra)) for k in range(len(windows))]
    return head, windows, shares


def _head(n: int, options: PlanOptions, budget: int) -> int:
    """The most items, from the top, whose windows ``budget`` calls afford (one each)."""
    low, high = min(n, options.window_size), n  # one window: always affordable; n: not
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if len(_windows(mid, options)) <= budget else (low, mid)
    return low


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
