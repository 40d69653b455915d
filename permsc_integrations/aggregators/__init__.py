"""Rank aggregation: a registry of callables from rankings to one ranking.

An aggregator is any callable ``fn(rankings, *, n_items, **options) -> list[int]`` where
``rankings`` are sequences of 0-based item indices, best first, possibly partial, already
validated. It returns a full ranking of ``range(n_items)``. Ties break by item index (the
first-stage order). Third-party aggregators register through the entry-point group
``permsc_integrations.aggregators``. What an aggregator may offer beside its ranking (a quick
stand-in, reading first-token probabilities, item scores) is declared by the protocols of
:mod:`._capabilities` (:class:`HasQuick`, :class:`ReadsProbabilities`, :class:`ScoresItems`).

Example:
    >>> from permsc_integrations import aggregate
    >>> aggregate([[0, 1, 2], [1, 0, 2], [0, 2, 1]], method="borda")
    [0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from permsc_integrations._registry import Registry, lazy_exports, publish
from permsc_integrations.aggregators._capabilities import (
    Aggregator,
    HasQuick,
    ReadsProbabilities,
    ScoresItems,
    quick_of,
    reads_probabilities,
    scores_of,
)
from permsc_integrations.errors import InvalidRankingError

if TYPE_CHECKING:
    from permsc_integrations.aggregators._pairwise import pairwise_counts as pairwise_counts

__all__ = [
    "Aggregator",
    "register",
    "get",
    "available",
    "aggregate",
    "HasQuick",
    "ReadsProbabilities",
    "ScoresItems",
    "quick_of",
    "reads_probabilities",
    "scores_of",
]

ENTRY_POINT_GROUP = "permsc_integrations.aggregators"


_registry: Registry[Aggregator] = Registry(
    "aggregator",
    ENTRY_POINT_GROUP,
    {  # built-ins load on first use, so that importing the package stays fast
        name: f"permsc_integrations.aggregators._{name}:{name}"
        for name in ("kemeny", "rrf", "borda", "copeland", "local_search")
    }
    | {  # first-token probabilities (scoring="first_token")
        name: f"permsc_integrations.aggregators._probability:{name}"
        for name in ("mean_probability", "mean_log_probability")
    },
)


def register(name: str, fn: Aggregator) -> None:
    """Register ``fn`` under ``name`` (replacing any aggregator of that name)."""
    _registry.register(name, fn)


def available() -> list[str]:
    """Names of every registered aggregator, sorted."""
    return _registry.available()


def get(name: str) -> Aggregator:
    """The aggregator registered as ``name``; :class:`~.errors.UnknownNameError` lists the
    others."""
    return _registry.get(name)


def resolve(method: str | Aggregator) -> Aggregator:
    """A name or a callable, as the aggregator callable."""
    return get(method) if isinstance(method, str) else method


def _validate(
    rankings: Sequence[Sequence[int]], n_items: int | None
) -> tuple[list[list[int]], int]:
    if isinstance(rankings, (str, bytes)):
        raise InvalidRankingError("rankings must be a sequence of rankings, not a string")
    clean = [list(map(int, r)) for r in rankings]  # the hot path: loops in C, one per check
    filled = [r for r in clean if r]
    high = max(map(max, filled), default=-1)
    n = high + 1 if n_items is None else int(n_items)
    if n <= 0:
        raise InvalidRankingError(
            "nothing to aggregate: no items in any ranking and n_items not given"
        )
    if (
        high >= n
        or min(map(min, filled), default=0) < 0
        or list(map(len, map(set, clean))) != list(map(len, clean))
    ):
        _explain(clean, n)
    return clean, n


def _explain(clean: list[list[int]], n: int) -> None:
    """Raise for the first ranking that lists an item twice or an index outside ``0..n-1``."""
    for k, r in enumerate(clean):
        if len(set(r)) != len(r):
            raise InvalidRankingError(f"ranking {k} lists an item twice: {r}")
        bad = [i for i in r if i < 0 or i >= n]
        if bad:
            raise InvalidRankingError(f"ranking {k} has indices outside 0..{n - 1}: {bad}")


def aggregate(
    rankings: Sequence[Sequence[int]],
    *,
    method: str | Aggregator = "kemeny",
    n_items: int | None = None,
    **options: object,
) -> list[int]:
    """Aggregate ``rankings`` (best first, maybe partial) into one full ranking.

    ``n_items`` defaults to 1 + the largest index seen; items absent from every ranking go
    last, in index order.

    >>> aggregate([[2, 0, 1], [2, 1, 0], [0, 2, 1]])
    [2, 0, 1]
    """
    clean, n = _validate(rankings, n_items)
    fn: Callable[..., list[int]] = resolve(method)
    return list(fn(clean, n_items=n, **options))


def fuse_first_stage(
    order: Sequence[int], weight: float, first_stage: Sequence[int] | None = None
) -> list[int]:
    """``order`` (a full ranking of items ``0..n-1``) fused with the first-stage order
    (``first_stage``, best first; default ``0..n-1``): each item scores ``(1 - weight)``
    times its Borda points in ``order`` plus ``weight`` times those in the first stage; ties
    break by first-stage order. ``weight`` 0 keeps ``order``, 1 gives the first stage back.

    >>> fuse_first_stage([3, 2, 1, 0], 0.0), fuse_first_stage([3, 2, 1, 0], 0.6)
    ([3, 2, 1, 0], [0, 1, 2, 3])
    >>> fuse_first_stage([2, 0, 1, 3], 0.4)
    [0, 2, 1, 3]
    """
    n = len(order)
    if n < 2 or weight <= 0:
        return list(order)
    stage = list(range(n)) if first_stage is None else list(first_stage)
    place = {item: rank for rank, item in enumerate(order)}
    prior = {item: rank for rank, item in enumerate(stage)}
    score = {i: (1 - weight) * (n - 1 - place[i]) + weight * (n - 1 - prior[i]) for i in stage}
    return sorted(stage, key=lambda i: (-score[i], prior[i]))


# Besides __all__, what the strategies build on (numpy loads with it, on first use).
__getattr__ = lazy_exports(
    __name__, {"pairwise_counts": "permsc_integrations.aggregators._pairwise"}
)
publish(
    __name__,
    Aggregator,
    HasQuick,
    ReadsProbabilities,
    ScoresItems,
    quick_of,
    reads_probabilities,
    scores_of,
)
