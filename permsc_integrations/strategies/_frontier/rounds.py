"""The frontier strategy (issue 31): calls where the top k is uncertain, within a budget or
until it is certified (:mod:`permsc_integrations.strategies._frontier`).

:class:`Frontier` is registered as ``"frontier"``. The chooser
(:func:`permsc_integrations.strategies.choose`) also picks it for a blocks request whose
``max_calls`` is below the blocks plan, or under adaptive m with a ``top_k``
(:meth:`Frontier.within`). A first parallel round of shuffled blocks shows every item it can
afford (below one pass, the first items of the input: the rest keep their input order, and
the result's ``head`` says so, unless the answers show the input order tells nothing and the
tail fits one window: then it is shown next, :data:`~.policy.COVER_Z`); each later round shows
the items whose top-k membership is still uncertain under one list model of every answer, in
windows whose positions balance each item's exposure to the fitted position bias, never a
prompt twice, and smaller where the model answered its windows degenerately
(:data:`~.policy.DEGENERATE_SHARE`). With a budget, at
most ``max_rounds`` rounds, planned up front; under adaptive m, rounds of ``adaptive_round``
calls until the top k is certified (near-even neighbours settled as ties) or the cap (the
fixed-m plan's calls, or ``max_calls`` below it) is spent. The list model decides where the
calls go and gives each item its probability of the top k; the ranker's aggregator orders
the head from the same answers (:func:`final_order`: the model only orders the pairs no
answer compared), so a budget never returns a worse order than the consensus of its answers.
An aggregator that reads first-token probabilities has nothing to read in these answers: it
is refused (:class:`~permsc_integrations.errors.ConfigurationError`, before any call).

Example:
    >>> from permsc_integrations._options.options import RankingOptions
    >>> settings = frontier_settings(100, RankingOptions(max_calls=12), fixed=120)
    >>> settings.budget, settings.k, [str(r.calls) for r in frontier_plan(100, settings).rounds]
    (12, 10, ['5', '3', '2', '2'])
    >>> frontier_settings(100, RankingOptions(max_calls=120), fixed=120) is None  # no need
    True
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from permsc_integrations._checks import positive_int
from permsc_integrations.aggregators import (
    Aggregator,
    aggregate,
    pairwise_counts,
    reads_probabilities,
    resolve,
)
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.permutations import cut_blocks
from permsc_integrations.results import ParseStatus
from permsc_integrations.strategies._base import Draw, Outcome, RankContext, WaveEnd
from permsc_integrations.strategies._blocks import Blocks
from permsc_integrations.strategies._frontier import Answer, FrontierResult, Settings, is_copy
from permsc_integrations.strategies._frontier import Frontier as Policy
from permsc_integrations.strategies._plan import CallRange, Plan, PlanOptions, Round

__all__ = [
    "Frontier",
    "DEFAULT_TOP_K",
    "served_k",
    "frontier_settings",
    "frontier_plan",
    "final_order",
    "CONSENSUS_TOP",
    "MODEL_BELOW",
    "ECHO_SHARE",
]

DEFAULT_TOP_K = 10
"""The k a ranking under ``max_calls`` serves when ``top_k`` is not set (docs/scores.md)."""

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

ECHO_SHARE = 0.3
"""Where copies (answers that name their items in the order shown, echoes, or in its reverse:
:func:`~permsc_integrations.results.answer_defect`) are this share of the answers or more, the
consensus leaves them out: a model that copies that often copies by failure, not because
the shuffled order was right (the judge's echoes are pure copies: leaving them out gained
0.000-0.106 nDCG@10 over the echoing regimes at budgets 6, 13 and 26, -0.001 once). Rarer
echoes stay in: the 1.5B model's WordSort echoes (5 %) agree with the truth a little (Kendall
tau 0.10) and leaving them all out lost 0.003-0.009 tau at m = 5-20; its MathSort echoes (61 %)
agree with nothing (-0.004). Measured on the saved whole-window answers (Kemeny, tau against
the truth, dropped - kept; m = 3 / 5 / 10 / 20): MathSort (10 lists) -0.009 / +0.076 / +0.076 /
+0.063; WordSort (65) +0.005 / +0.007 / +0.007 / 0.000; generated WordSort (20) +0.002 / +0.002
/ +0.016 / 0.000; GSM8KSort (10) -0.027 / +0.013 / -0.093 / +0.040 (docs/benchmarks.md "real
answers")."""

_WHOLE = Blocks()  # the fixed plan whose calls cap an explicit frontier without a budget
log = logging.getLogger("permsc_integrations")


@dataclass(frozen=True, slots=True)
class Frontier:
    """The frontier strategy (module docstring), with its knobs: ``k`` (None: ``top_k``,
    adaptive m's ``top_k``, else :data:`DEFAULT_TOP_K`), ``max_rounds`` (with a budget),
    ``adaptive_round`` (calls per later round without one), ``consensus_top`` (the aggregator
    orders the model's top ``consensus_top * k``) and ``reading`` (how the list model reads
    an answer: ``"plackett-luce"`` or ``"pairs"``). Asked for by name, it runs on any list
    longer than a window: where the chooser's rule would pick it, as then; otherwise with
    the blocks plan's calls as its budget (``max_calls`` when lower).
    A list that fits one window is one PSC window, as under blocks."""

    k: int | None = None
    max_rounds: int = 4
    adaptive_round: int = 6
    consensus_top: int = CONSENSUS_TOP
    reading: str = "plackett-luce"

    def __post_init__(self) -> None:
        for name in ("max_rounds", "adaptive_round", "consensus_top"):
            positive_int(name, getattr(self, name))
        if self.k is not None:
            positive_int("k", self.k)
        if self.reading not in ("plackett-luce", "pairs"):
            raise ConfigurationError(
                f"reading must be 'plackett-luce' or 'pairs', got {self.reading!r}"
            )

    def within(self, n: int, options: PlanOptions, fixed: Plan) -> Plan | None:
        """The chooser's rule for a blocks request over ``n`` items (``fixed``: the blocks
        plan): this strategy's plan when its budget is below ``fixed`` or adaptive m has a
        ``top_k`` (:func:`frontier_settings`), else None (blocks runs)."""
        settings = frontier_settings(n, options, fixed=fixed.calls.high)
        return None if settings is None else self._planned(n, self._knobs(settings))

    def plan(self, n: int, options: PlanOptions) -> Plan:
        """Asked for by name: the rule's plan, or else the blocks plan's calls as its budget
        (``max_calls`` when lower); a list of one window: that window (the blocks plan)."""
        fixed = _WHOLE.plan(n, options)
        if n <= options.window_size:
            return fixed
        settings = frontier_settings(n, options, fixed=fixed.calls.high) or _forced(
            n, options, fixed.calls.high
        )
        return self._planned(n, self._knobs(settings))

    def _knobs(self, settings: Settings) -> Settings:
        return replace(
            settings,
            k=self.k or settings.k,
            max_rounds=self.max_rounds,
            adaptive_round=self.adaptive_round,
            reading=self.reading,
        )

    def _planned(self, n: int, settings: Settings) -> Plan:
        return replace(frontier_plan(n, settings), detail=settings)

    async def __call__(self, ctx: RankContext) -> Outcome:
        """The rounds the plan's settings say (``ctx.plan.detail``), or its one window."""
        settings, n = ctx.plan.detail, ctx.plan.n
        if not isinstance(settings, Settings):  # a list that fits one window
            return await _WHOLE(ctx)
        aggregator = _rank_aggregator(ctx.options.aggregator)
        seeded = replace(settings, seed=ctx.seed(range(n), "frontier"))
        return await _run(ctx, seeded, aggregator, self.consensus_top * seeded.k)


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
    each round is over the head (a later one over the whole list where the tail may be shown:
    :attr:`~.policy.Frontier.reach`), its prompts at most a window."""
    policy = Policy(n, settings)
    head, size = policy.head, settings.window
    first = tuple(len(b) for b in cut_blocks(range(head), size)) * policy.passes()
    rounds = []
    for number, calls in enumerate(policy.planned()):
        prompts = first[:calls] if number == 0 else (min(size, policy.reach),) * calls
        low = calls if number == 0 or settings.budget is not None else 0
        over = head if number == 0 else policy.reach  # later: the tail too, where it may show
        rounds.append(Round(0, over, prompts, 1, CallRange(low, calls)))
    return Plan(n, tuple(rounds))


def _forced(n: int, options: PlanOptions, fixed: int) -> Settings:
    """Asked for by name where the rule would run blocks: the ``fixed`` plan's calls
    (``max_calls`` when lower) as the budget."""
    cap = min(fixed, options.max_calls or fixed)
    return Settings(k=served_k(options) or DEFAULT_TOP_K, window=options.window_size, budget=cap)


def _rank_aggregator(spec: str | Aggregator) -> Aggregator:
    """The ranker's aggregator, which orders the frontier's head from its answers; one that
    reads first-token probabilities is refused (the frontier's answers are rankings)."""
    aggregator = resolve(spec)
    if reads_probabilities(aggregator):
        raise ConfigurationError(
            f"aggregator {spec!r} reads first-token probabilities, which the frontier's rounds "
            "(max_calls below the blocks plan, adaptive m with a top_k, or "
            "strategy='frontier') do not use: its order comes from the answers' rankings. "
            "Use a rank aggregator (kemeny, borda, copeland, rrf) or drop max_calls"
        )
    return aggregator


async def _run(ctx: RankContext, settings: Settings, aggregator: Aggregator, keep: int) -> Outcome:
    """Drive the policy round by round through ``ctx``: each round's windows all at once,
    every answer to the list model, the round kept with the model's order of the head; then
    the order (``aggregator`` over the model's top ``keep``) and what stands behind it."""
    policy = Policy(ctx.plan.n, settings)
    windows = await ctx.offload(policy.next_round)
    result: FrontierResult | None = None
    number = spent = 0
    while windows is not None:
        head = tuple(range(policy.head if number == 0 else policy.reach))
        draw = await ctx.draw(number, head, [[w] for w in windows], waves=False)
        spent = draw.spent
        unread = sum(1 for s in draw.samples if s.status is ParseStatus.INVALID)
        refused = any(s.status is ParseStatus.SKIPPED for s in draw.samples)
        policy.observe(
            _answers(draw), spent=spent, unread=unread, refused=refused, affordable=draw.affordable
        )
        windows = await ctx.offload(policy.next_round)
        result = await ctx.offload(policy.result)
        wave = WaveEnd(policy.limit, policy.stopped or "unsettled")
        await ctx.settle(draw, [i for i in result.order if i < len(head)], wave=wave)
        number += 1
    if result is None:
        result = policy.result()
    if policy.window < settings.window:
        log.warning(
            "the model answered windows of %d items degenerately or not at all: the frontier "
            "asked its later rounds in windows of %d (a smaller window_size may serve better)",
            settings.window, policy.window,
        )
    saved = max(0, policy.limit - spent) if settings.budget is None else 0
    model = result.order[: policy.head]
    ranked = await ctx.offload(lambda: final_order(aggregator, policy.answers, model, keep))
    order = (*ranked, *result.order[policy.head :])
    ties, p = result.ties, result.top_probability
    return Outcome(order, policy.head, result.stopped, ties, p, saved)


def final_order(
    aggregator: Aggregator, answers: Sequence[Answer], model: Sequence[int], keep: int | None = None
) -> list[int]:
    """The ``aggregator``'s consensus of the ``answers`` over the items of ``model`` (the list
    model's order of them, best first; ``keep``: over its first ``keep`` only, the rest after
    them in the model's order): the answers decide every pair they compared, as in plain PSC
    (their ties broken by the input order), leaving frequent echoes out (:data:`ECHO_SHARE`);
    the list model orders only the pairs no answer compared (fewer than :data:`MODEL_BELOW`
    times), each such pair outvoting its answers (as two-item rankings).

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
    votes = [tuple(at[i] for i in a.ranking if i in at) for a in _sound(answers)]
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


def _sound(answers: Sequence[Answer]) -> Sequence[Answer]:
    """The answers the consensus reads: all of them, or, where copies of the order shown
    (:func:`is_copy`: echoes and reversals) are :data:`ECHO_SHARE` of them or more, the
    others; none where nothing else is left, so that the list model's order stands (with no
    answer but copies, the first-stage order: the windows were shuffled, so a copy says
    nothing). On a DL19 list the embedded 1.5B model echoed 14 of 15 windows and reversed
    the 15th: read alone, that reversal had put the first stage's last items first."""
    kept = [a for a in answers if not is_copy(a)]
    copies = len(answers) - len(kept)
    return kept if copies >= ECHO_SHARE * len(answers) else answers


def _answers(draw: Draw) -> Sequence[Answer]:
    """The round's good answers as the model reads them (the caller's indices)."""
    return [Answer(draw.items(s.permutation), draw.items(s.ranking)) for s in draw.samples if s.ok]
