"""A budget in tokens or money (``max_total_tokens``, ``max_cost``) as the calls one request plans.

The strategies plan in calls. For one request, a token or cost budget becomes the most calls
whose plan (the chooser's, :func:`~permsc_integrations.strategies.choose`) fits it at the
estimate ``permsc estimate`` makes (:func:`~permsc_integrations.strategies.planned_tokens`:
each prompt rendered on the items it shows when the ranking starts, characters / 4, answers at
6 tokens an item). Those calls are the request's ``max_calls`` (its own, where lower, stays)
until the first answers report their tokens: after each round the calls are planned again at
what a call has cost (:meth:`~permsc_integrations._calls.spending.Meter.affordable`), and the
meter stops at the budget itself (its ``spend``): a tokenizer that counts more than the
estimate gets fewer calls, one that counts fewer gets more, never a larger bill. A budget that
pays for the whole plan changes nothing; one that cannot pay for a single call is refused
before any call.

Example:
    >>> from permsc_integrations._options.options import RankingOptions
    >>> render = lambda shown: [{"role": "user", "content": " ".join(shown)}]
    >>> texts = [f"passage number {i} " * 10 for i in range(100)]
    >>> within_spend(RankingOptions(max_total_tokens=30_000), render, texts).max_calls
    29
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from permsc_integrations._calls.spending import BUDGET_OPTIONS, usage_passes
from permsc_integrations._options.options import RankingOptions
from permsc_integrations.backends.base import Message
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.results import Usage
from permsc_integrations.strategies import Plan, choose, planned_tokens

__all__ = ["within_spend", "named_budgets", "BUDGETS"]

Render = Callable[[list[str]], Sequence[Message]]


def within_spend(options: RankingOptions, render: Render, texts: Sequence[str]) -> RankingOptions:
    """``options`` for ranking ``texts`` (``render``: a window's prompt) with ``max_calls`` the
    most calls whose plan fits ``max_total_tokens`` and ``max_cost`` (module docstring);
    ``options`` themselves where neither is set or the whole plan fits."""
    if options.spend is None:
        return options
    n = len(texts)
    whole = choose(options.strategy, n, options).plan
    if _fits(options, whole, render, texts):
        return options
    low, high = 0, whole.calls.high  # low fits (no call), high does not
    while high - low > 1:
        mid = (low + high) // 2
        planned = choose(options.strategy, n, options.replace(max_calls=mid)).plan
        low, high = (mid, high) if _fits(options, planned, render, texts) else (low, mid)
    if low == 0:
        one = _usage(choose(options.strategy, n, options.replace(max_calls=1)).plan, render, texts)
        named = named_budgets(options)
        raise ConfigurationError(
            f"{named} does not pay for one call over these {n} items (one is ~"
            f"{one.total_tokens:,} tokens, characters / 4): raise it, or show fewer or shorter "
            "items a prompt (window_size, max_words)"
        )
    return options.replace(max_calls=low)


def _fits(options: RankingOptions, plan: Plan, render: Render, texts: Sequence[str]) -> bool:
    return not usage_passes(options.spend, _usage(plan, render, texts), options.prices)


def _usage(plan: Plan, render: Render, texts: Sequence[str]) -> Usage:
    """The estimated usage of ``plan`` at its most calls."""
    return Usage(*planned_tokens(plan, render, texts), plan.calls.high)


BUDGETS = tuple(BUDGET_OPTIONS.values())
"""The options a request plans within (the first in calls, the others turned into calls)."""


def named_budgets(options: RankingOptions, names: Sequence[str] = BUDGETS) -> str:
    """The budgets among ``names`` that ``options`` set, as ``"max_calls=12, max_cost=0.01"``."""
    given = ((name, getattr(options, name)) for name in names)
    return ", ".join(f"{name}={value:g}" for name, value in given if value is not None)
