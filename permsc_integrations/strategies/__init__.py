"""How a list longer than one window is ranked: strategies, by name.

- ``"sliding"`` (RankGPT): windows of ``window_size`` move by ``step`` from the back of the
  list to the front, one after another, PSC in each (:mod:`._sliding`). One pass settles the
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
``await strategy(ctx) -> order`` over a :class:`RankContext` (PSC over a window, or a round it
composes: ``draw`` any prompts over chosen items at once, then ``settle`` or ``lead``) with a
``plan(n, options)`` method that gives its rounds and calls before it runs (:class:`Plan`);
``strategies.register(name, obj)`` (or the entry-point group
``permsc_integrations.strategies``) adds one.

Example:
    >>> from permsc_integrations._options.options import RankingOptions
    >>> available()
    ['blocks', 'sliding']
    >>> [str(get(name).plan(100, RankingOptions()).calls) for name in available()]
    ['120', '180']
    >>> [str(get(name).plan(1000, RankingOptions(top_k=10)).calls) for name in available()]
    ['370', '1980']
"""

from __future__ import annotations

from permsc_integrations._registry import Registry
from permsc_integrations.strategies._base import Draw, Lead, RankContext, Strategy
from permsc_integrations.strategies._blocks import Blocks
from permsc_integrations.strategies._plan import CallRange, Plan, PlanOptions, Round, WindowShape
from permsc_integrations.strategies._sliding import Sliding

__all__ = [
    "RankContext",
    "Strategy",
    "Sliding",
    "Blocks",
    "Draw",
    "Lead",
    "Plan",
    "Round",
    "CallRange",
    "PlanOptions",
    "WindowShape",
    "register",
    "available",
    "get",
]

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
