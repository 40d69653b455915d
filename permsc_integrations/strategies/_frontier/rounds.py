"""The frontier policy's rounds: calls where the top k is uncertain, within a budget or until
it is certified (issue 31; :mod:`permsc_integrations.strategies._frontier`).

The blocks strategy hands a list longer than a window to
:class:`~.policy.Frontier` when ``max_calls`` is below its own plan, or
when adaptive m has a ``top_k`` (:func:`frontier_settings`). A first parallel round of shuffled
blocks shows every item it can afford (below one pass, the first items of the input: the rest
keep their input order, and the result's ``head`` says so); each later round shows the items
whose top-k membership is still uncertain under one list model of every answer, in windows
whose positions balance each item's exposure to the fitted position bias, never a prompt twice.
With a budget, at most four rounds, planned up front; under adaptive m, rounds of six calls
until the top k is certified (near-even neighbours settled as ties) or the cap (the fixed-m
plan's calls, or ``max_calls`` below it) is spent. The list model decides where the calls go
and gives each item its probability of the top k; the ranker's aggregator orders the head from
the same answers (:func:`final_order`: the model only breaks the aggregator's ties and orders
the pairs no answer compared), so a budget never returns a worse order than the consensus of
its answers.

Example:
    >>> from permsc_integrations._options.options import RankingOptions
    >>> settings = frontier_settings(100, RankingOptions(max_calls=12), fixed=120)
    >>> settings.budget, settings.k, [str(r.calls) for r in frontier_plan(100, settings).rounds]
    (12, 10, ['5', '3', '2', '2'])
    >>> frontier_settings(100, RankingOptions(max_calls=120), fixed=120) is None  # no need
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from permsc_integrations.aggregators import Aggregator, aggregate
from permsc_integrations.aggregators._pairwise import pairwise_counts
from permsc_integrations.permutations import cut_blocks
from permsc_integrations.strategies._base import Draw, Outcome, RankContext
from permsc_integrations.strategies._frontier import Answer, Frontier, FrontierResult, Settings
from permsc_integrations.strategies._plan import CallRange, Plan, PlanOptions, Round

__all__ = [
    "DEFAULT_TOP_K",
    "served_k",
    "frontier_settings",
    "frontier_plan",
    "run_frontier",
    "final_order",
    "CONSENSUS_TOP",
    "MODEL_BELOW",
]

DEFAULT_TOP_K = 10
"""The k a ranking under ``max_calls`` serves when ``top_k`` is not set."""

MODEL_BELOW = 1
"""The list model decides a pair that fewer than ``MODEL_BELOW`` answers compared (1: only the
pairs no answer compared). Measured (65 WordSort lists of real answers; the judge, 10 lists,
budgets 6 and 12): 1 keeps Kemeny's Kendall tau (-0.001 at m = 20) and loses 0.00-0.05 nDCG to
the model's order on the judge; 2 loses 0.006 tau and 0.00-0.05; 3 loses 0.009 tau and
0.00-0.008. Real answers decide: 1."""

CONSENSUS_TOP = 4
"""The aggregator orders the list model's top ``CONSENSUS_TOP * k`` items of the head (the
rest keep the model's order): 40 items for k = 10 keep exact Kemeny over a complete tournament
to milliseconds, where the whole head of 100 took seconds and hit its time limit (untuned
beyond that: on the judge 4k and the whole head differed by 0.01-0.02 nDCG either way)."""


def served_k(options: PlanOptions) -> int | None:
    """The k of "the top k" a ranking serves: ``top_k``, adaptive m's own ``top_k``, or
    :data:`DEFAULT_TOP_K` under ``max_calls``; None: no k (the whole order)."""
    adaptive = options.adaptive.top_k if options.adaptive is not None else None
    k = options.top_k or adaptive
    return k or (DEFAULT_TOP_K if options.max_calls is not None else None)


def frontier_settings(
    n: int, options: PlanOptions, *, fixed: int, seed: int = 0
) -> Settings | None:
    """The policy's settings for ``n`` items under ``options``, or None when the strategy's
    own rounds run (``fixed``: their calls, the cap of adaptive m): a list that fits a
    window, a budget that pays for the fixed plan, adaptive m without a ``top_k``."""
    budget, k, size = options.max_calls, served_k(options), options.window_size
    if n <= size or k is None:
        return None
    adaptive, cap = options.adaptive, fixed if budget is None else min(budget, fixed)
    certify = adaptive is not None and (options.top_k or adaptive.top_k)
    if adaptive is not None and certify and cap > -(-n // size):  # a later round fits
        return Settings(k=k, window=size, cap=cap, confidence=adaptive.confidence, seed=seed)
    if budget is None or budget >= fixed:
        return None
    return Settings(k=k, window=size, budget=budget, seed=seed)


def frontier_plan(n: int, settings: Settings) -> Plan:
    """The policy's rounds over ``n`` items, each at its most calls (a budget's are exact
    unless every order of a few items runs out; adaptive ones may not run after the first);
    each round is over the head, its prompts at most a window."""
    policy = Frontier(n, settings)
    head, size = policy.head, settings.window
    first = tuple(len(b) for b in cut_blocks(range(head), size))
    rounds = []
    for number, calls in enumerate(policy.planned()):
        prompts = first[:calls] if number == 0 else (min(size, head),) * calls
        low = calls if number == 0 or settings.budget is not None else 0
        rounds.append(Round(0, head, prompts, 1, CallRange(low, calls)))
    return Plan(n, tuple(rounds))


async def run_frontier(ctx: RankContext, settings: Settings) -> list[int]:
    """Drive the policy round by round through ``ctx``: each round's windows all at once,
    every answer to the list model, the round kept with the model's order of the head; then
    the outcome (``head``, ``stopped``, ``ties``, ``top_probability``)."""
    policy = Frontier(ctx.n, settings)
    head = tuple(range(policy.head))
    windows = await ctx.offload(policy.next_round)
    result: FrontierResult | None = None
    number = 0
    while windows is not None:
        draw = await ctx.draw(number, head, [[w] for w in windows], waves=False)
        policy.observe(_answers(draw), spent=ctx.spent)
        windows = await ctx.offload(policy.next_round)
        result = await ctx.offload(policy.result)
        why = policy.stopped or "unsettled"
        await ctx.wave_end(number, calls=ctx.spent, cap=policy.limit, why=why)
        await ctx.settle(draw, result.order[: policy.head])
        number += 1
    if result is None:
        result = policy.result()
    saved = max(0, policy.limit - ctx.spent) if settings.budget is None else 0
    ctx.conclude(Outcome(policy.head, result.stopped, result.ties, result.top_probability, saved))
    model, keep = result.order[: policy.head], CONSENSUS_TOP * settings.k
    ranked = await ctx.offload(lambda: final_order(ctx.aggregator, policy.answers, model, keep))
    return [*ranked, *result.order[policy.head :]]


def final_order(
    aggregator: Aggregator, answers: Sequence[Answer], model: Sequence[int], keep: int | None = None
) -> list[int]:
    """The ``aggregator``'s consensus of the ``answers`` over the items of ``model`` (the list
    model's order of them, best first; ``keep``: over its first ``keep`` only, the rest after
    them in the model's order): the answers decide every pair they compared, as in plain PSC
    (their ties broken by the input order); the list model orders only the pairs no answer
    compared (fewer than :data:`MODEL_BELOW` times), each such pair outvoting its answers (as
    two-item rankings).

    On real answers the list model's own order fell 0.096 Kendall tau below Kemeny over the
    same answers, and breaking Kemeny's ties by the model lost 0.003-0.010 (docs/benchmarks.md
    "frontier stop rule on real answers"): the model is for where to look, and for the pairs
    the answers are silent on.

    >>> from permsc_integrations.aggregators import get
    >>> final_order(get("kemeny"), [Answer((0, 1), (1, 0))], [2, 0, 1])  # 2 never compared
    [2, 1, 0]
    """
    if keep is not None and keep < len(model):
        return [*final_order(aggregator, answers, model[:keep]), *model[keep:]]
    items = sorted(model)
    at = {item: j for j, item in enumerate(items)}
    votes = [tuple(at[i] for i in a.ranking if i in at) for a in answers]
    votes = [v for v in votes if len(v) > 1]
    if not votes:
        return list(model)
    n = len(items)
    seen = pairwise_counts(votes, n)
    seen += seen.T  # how many answers compared each pair
    rank = np.empty(n, dtype=int)
    rank[[at[i] for i in model]] = np.arange(n)
    fills: list[tuple[int, int]] = []
    for a, b in np.argwhere(np.triu(seen < MODEL_BELOW, 1)).tolist():
        fills += [(a, b) if rank[a] < rank[b] else (b, a)] * (int(seen[a, b]) + 1)
    order = aggregate([*votes, *fills], method=aggregator, n_items=n)
    return [items[j] for j in order]


def _answers(draw: Draw) -> Sequence[Answer]:
    """The round's good answers as the model reads them (the caller's indices)."""
    return [Answer(draw.items(s.permutation), draw.items(s.ranking)) for s in draw.samples if s.ok]
