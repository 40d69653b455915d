"""RankGPT-style sliding windows: the plan (pure); the sliding strategy runs it
(:mod:`permsc_integrations.strategies._sliding`).

Windows of ``window_size`` positions move by ``step`` from the back of the list to the
front; each window reorders the current list in place, so the best items are carried
forward. Consecutive windows overlap by ``window_size - step`` positions, which is what a
pass carries: if every window were ordered perfectly, one pass settles the top
``window_size - step`` positions (the true best items, in order) and nothing else is
guaranteed. The last window of a pass is cut at the top of the list, so irregular tails
still cover position 0.

``top_k`` asks for the top ``k`` positions to be settled. One pass settles
``window_size - step``; when ``k`` is larger, further passes run over the unsettled
suffix only (each settles ``window_size - step`` more), and passes stop as soon as the top
``k`` is settled. ``top_k=None`` runs the single RankGPT pass.

Example:
    >>> [(w.start, w.end) for w in plan_windows(25, window_size=10, step=5)]
    [(15, 25), (10, 20), (5, 15), (0, 10)]
    >>> [(w.pass_index, w.start, w.end) for w in plan_windows(12, window_size=10, step=5, top_k=8)]
    [(0, 2, 12), (0, 0, 7), (1, 5, 12)]
"""

from __future__ import annotations

from dataclasses import dataclass

from permsc_integrations._checks import at_least, sliding_step

__all__ = ["Window", "plan_windows", "settled_per_pass"]


@dataclass(frozen=True, slots=True)
class Window:
    """Positions ``[start, end)`` of the current list, ranked in pass ``pass_index``."""

    start: int
    end: int
    pass_index: int = 0

    @property
    def size(self) -> int:
        return self.end - self.start


def _check(n: int, window_size: int, step: int, top_k: int | None) -> None:
    at_least(0)("n", n)
    at_least(2)("window_size", window_size)
    sliding_step(step, window_size)
    at_least(1, optional=True)("top_k", top_k)


def settled_per_pass(window_size: int, step: int) -> int:
    """Positions one back-to-front pass settles at its front: ``window_size - step``."""
    return window_size - step


def _one_pass(offset: int, n: int, window_size: int, step: int, pass_index: int) -> list[Window]:
    if n - offset <= window_size:
        return [Window(offset, n, pass_index)]
    windows, end = [], n
    start = n - window_size
    while start > offset:
        windows.append(Window(start, end, pass_index))
        start, end = start - step, end - step
    windows.append(Window(offset, end, pass_index))
    return windows


def plan_windows(
    n: int, *, window_size: int = 20, step: int = 10, top_k: int | None = None
) -> list[Window]:
    """Every window to rank, in execution order (see the module docstring)."""
    _check(n, window_size, step, top_k)
    if n <= 1:
        return []
    target = min(n, settled_per_pass(window_size, step) if top_k is None else top_k)
    plan: list[Window] = []
    settled, pass_index = 0, 0
    while settled < target:
        plan.extend(_one_pass(settled, n, window_size, step, pass_index))
        remaining = n - settled
        settled = n if remaining <= window_size else settled + settled_per_pass(window_size, step)
        pass_index += 1
    return plan
