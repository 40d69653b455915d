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

- ``"frontier"`` (issue 31): the calls go where the top k is still uncertain under one list
  model of every answer, in parallel rounds, within ``max_calls`` or until the top k is
  certified (:class:`Frontier`, with its knobs).

**One chooser** (:func:`choose`) picks the strategy once per request and makes its one
:class:`Plan`: the one asked for, except that a blocks request whose ``max_calls`` is below
the blocks plan, or under adaptive m with a ``top_k``, runs the frontier (a list longer than a
window). The result records the choice (``RankingResult.strategy``), the request carries the
plan (``RankContext.plan``), and nothing plans twice.

A list that fits one window is one PSC window under every strategy. A strategy is a callable
``await strategy(ctx) -> Outcome`` over a :class:`RankContext` (PSC over a window, or a round it
composes: ``draw`` any prompts over chosen items at once, then ``settle`` or ``lead``) with a
``plan(n, options)`` method that gives its rounds and calls before it runs (:class:`Plan`);
``strategies.register(name, obj)`` (or the entry-point group
``permsc_integrations.strategies``) adds one.

Example:
    >>> from permsc_integrations._options.options import RankingOptions
    >>> available()
    ['blocks', 'frontier', 'sliding']
    >>> [str(get(name).plan(100, RankingOptions()).calls) for name in ("blocks", "sliding")]
    ['120', '180']
    >>> [str(get(s).plan(1000, RankingOptions(top_k=10)).calls) for s in ("blocks", "sliding")]
    ['370', '1980']
    >>> choice = choose("blocks", 100, RankingOptions(max_calls=12))
    >>> choice.name, str(choice.plan.calls)
    ('frontier', '12')
"""

from __future__ import annotations

from dataclasses import dataclass

from permsc_integrations._registry import Registry, publish
from permsc_integrations.strategies._adaptive import (
    Adaptive as Adaptive,  # for _options, _run (not public)
)
from permsc_integrations.strategies._adaptive import waves as waves  # for _run
from permsc_integrations.strategies._base import (
    Draw,
    Lead,
    Outcome,
    RankContext,
    Strategy,
    StrategyOptions,
    WaveEnd,
)
from permsc_integrations.strategies._blocks import Blocks
from permsc_integrations.strategies._frontier.rounds import Frontier
from permsc_integrations.strategies._frontier.rounds import served_k as served_k  # for serve
from permsc_integrations.strategies._plan import (
    CallRange,
    Plan,
    PlanOptions,
    Round,
    WindowShape,
)
from permsc_integrations.strategies._plan import (
    approx_tokens as approx_tokens,  # for cli
)
from permsc_integrations.strategies._plan import (
    planned_tokens as planned_tokens,  # for cli, ranker
)
from permsc_integrations.strategies._sliding import Sliding
from permsc_integrations.strategies._top_probability import (
    top_probability as top_probability,  # for the ranker
)
from permsc_integrations.strategies._window_plan import Window

__all__ = [
    "RankContext",
    "Strategy",
    "StrategyOptions",
    "Sliding",
    "Blocks",
    "Frontier",
    "Draw",
    "Lead",
    "Outcome",
    "WaveEnd",
    "Window",
    "Plan",
    "Round",
    "CallRange",
    "PlanOptions",
    "WindowShape",
    "Choice",
    "choose",
    "register",
    "available",
    "get",
]

SLIDING, BLOCKS, FRONTIER = Sliding(), Blocks(), Frontier()


_registry: Registry[Strategy] = Registry(
    "strategy",
    "permsc_integrations.strategies",
    {
        "sliding": "permsc_integrations.strategies:SLIDING",
        "blocks": "permsc_integrations.strategies:BLOCKS",
        "frontier": "permsc_integrations.strategies:FRONTIER",
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


@dataclass(frozen=True, slots=True)
class Choice:
    """A request's strategy: its ``name`` (the registered name; for an object, its class's
    name in lower case), the ``strategy`` itself and the request's one ``plan``."""

    name: str
    strategy: Strategy
    plan: Plan


def choose(strategy: str | Strategy, n: int, options: PlanOptions) -> Choice:
    """The strategy a request over ``n`` items runs, chosen once, and its plan: ``strategy``
    (a name or an object), except that blocks hands a list longer than a window to the
    frontier when ``max_calls`` is below the blocks plan or adaptive m has a ``top_k``
    (:meth:`Frontier.within`; the ``"frontier"`` registered, with its knobs)."""
    chosen = get(strategy)
    plan = chosen.plan(n, options)
    if isinstance(chosen, Blocks):
        frontier = get("frontier")
        within = frontier.within(n, options, plan) if isinstance(frontier, Frontier) else None
        if within is not None:
            return Choice("frontier", frontier, within)
    name = strategy.strip().lower() if isinstance(strategy, str) else type(strategy).__name__
    return Choice(name.lower(), chosen, plan)


publish(__name__, *(globals()[name] for name in __all__))
