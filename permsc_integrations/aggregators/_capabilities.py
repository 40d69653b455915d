"""What an aggregator is (:class:`Aggregator`) and what it may offer beside its ranking, each
capability one protocol.

An aggregator is a callable; one that offers more says so with an attribute, declared here once
and read only through these protocols and helpers:

- :class:`HasQuick`: ``quick``, a faster stand-in that picks a blocks round's head (Kemeny's:
  its insertion local search); without one the aggregator itself picks it.
- :class:`ReadsProbabilities`: ``uses_probabilities = True``, the aggregator reads first-token
  label probabilities (``probabilities=``, one ``{item: p}`` per ranking).
- :class:`ScoresItems`: ``item_scores(probabilities, n_items=...)``, each item's score (the
  result's relevance scores).

Example:
    >>> from permsc_integrations.aggregators import get
    >>> quick_of(get("kemeny")) is get("local_search"), quick_of(get("borda")) is get("borda")
    (True, True)
    >>> reads_probabilities(get("mean_probability")), reads_probabilities(get("kemeny"))
    (True, False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Aggregator",
    "HasQuick",
    "ReadsProbabilities",
    "ScoresItems",
    "quick_of",
    "reads_probabilities",
    "scores_of",
]

Probabilities = Sequence[Mapping[int, float]]
"""One ``{item: probability}`` per ranking, in the rankings' order."""


class Aggregator(Protocol):
    """A function from rankings to one ranking of ``n_items``. ``options`` are the
    aggregator's own (``k`` for RRF, ``probabilities`` for the first-token ones, ...): each
    declares the ones it reads with their types and ignores the rest, hence ``Any`` here."""

    def __call__(
        self, rankings: Sequence[Sequence[int]], *, n_items: int, **options: Any
    ) -> list[int]: ...


@runtime_checkable
class HasQuick(Protocol):
    """An aggregator with a quick stand-in for a blocks round's head (``quick``)."""

    quick: Aggregator


@runtime_checkable
class ReadsProbabilities(Protocol):
    """An aggregator that reads first-token probabilities (``uses_probabilities = True``)."""

    uses_probabilities: bool


@runtime_checkable
class ScoresItems(Protocol):
    """An aggregator that scores each item from the probabilities (``item_scores``)."""

    def item_scores(self, probabilities: Probabilities | None, *, n_items: int) -> list[float]:
        """Each item's score in [0, 1] (0 for an item no sample showed)."""
        ...


def quick_of(aggregator: Aggregator) -> Aggregator:
    """``aggregator``'s quick stand-in, else the aggregator itself."""
    return aggregator.quick if isinstance(aggregator, HasQuick) else aggregator


def reads_probabilities(aggregator: object) -> bool:
    """Whether ``aggregator`` (a callable) reads first-token probabilities."""
    return isinstance(aggregator, ReadsProbabilities) and bool(aggregator.uses_probabilities)


def scores_of(aggregator: object) -> ScoresItems | None:
    """``aggregator`` as an item scorer, or None when it scores no items."""
    return aggregator if isinstance(aggregator, ScoresItems) else None
