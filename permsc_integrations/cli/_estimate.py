"""``permsc estimate``: the calls and tokens a ``permsc rank`` run would spend, before it runs.

Calls come from the strategy's plan (``RankingOptions.plan``: its rounds, each with its prompts
and calls). They count the prompts sent when every answer is read the first time: re-asks and
retries come on top and cache hits are not calls, so the count is exact only for a fixed m and
a model that always answers well; with adaptive m it is a range (each round stops between its
first stable wave and m). The strategy printed is the one each query would run, as the chooser
picks it (:func:`~permsc_integrations.strategies.choose`: blocks hands a long list to the
frontier under a ``--max-calls`` below its plan; ``--max-total-tokens`` and ``--max-cost``
are turned into each query's calls as ``rank`` turns them, :mod:`._options.spend`). With
``--max-calls`` it is the strategy's
plan within the budget, an upper bound: re-asks and retries never take a query past it, they
leave prompts unsent. Tokens are approximate: characters / 4 of the rendered prompts, no
tokenizer needed, counted at the most calls, as are the cost and the caps. With ``--prices``
the cost is estimated too; with ``--request-cap``/``--ranker-cap`` it says how many queries a
cap would stop (request) or allow (ranker).

Example:
    $ permsc estimate --input dl19.bm25.top100.jsonl -m 20
"""

from __future__ import annotations

import argparse
import functools
import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, TypedDict

from permsc_integrations._calls.spending import usage_passes
from permsc_integrations._options.spend import named_budgets, within_spend
from permsc_integrations.cli._common import (
    Query,
    add_ranking_arguments,
    cli_options,
    load_queries,
    say,
)
from permsc_integrations.results import Usage
from permsc_integrations.strategies import approx_tokens, choose, planned_tokens

if TYPE_CHECKING:
    from permsc_integrations._calls.caps import SpendingCap
    from permsc_integrations._options.options import RankingOptions
    from permsc_integrations.cli._common import Subparsers
    from permsc_integrations.prompts import Prompt
    from permsc_integrations.strategies import Choice, Plan

__all__ = [
    "add_parser",
    "run",
    "Estimate",
    "estimate_query",
    "approx_tokens",
    "cap_report",
    "chosen_strategies",
]


@dataclass(frozen=True, slots=True)
class Estimate:
    """What ranking some queries would spend: ``min_calls..calls`` (equal unless adaptive m
    may stop rounds early), tokens approximate and counted at ``calls``."""

    queries: int = 0
    items: int = 0
    rounds: int = 0
    min_calls: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(
            *(a + b for a, b in zip(asdict(self).values(), asdict(other).values(), strict=True))
        )

    @property
    def usage(self) -> Usage:
        """As a :class:`Usage` (for prices and caps)."""
        return Usage(self.prompt_tokens, self.completion_tokens, self.calls)


class _Stopped(TypedDict):
    cap: str
    queries_stopped: int


class _Allowed(TypedDict):
    cap: str
    queries_allowed: int


class CapReport(TypedDict, total=False):
    """What :func:`cap_report` finds, for each cap that is set."""

    request_cap: _Stopped
    ranker_cap: _Allowed


def cap_report(per_query: list[Estimate], options: RankingOptions) -> CapReport:
    """What the caps would do to these queries: ``request_cap`` stops the queries whose own
    estimate passes it; ``ranker_cap`` allows as many queries as fit together, in input
    order, as ``permsc rank`` admits them (:mod:`._calls.admission`: a query starts only when the
    cap can pay for its plan; under adaptive m one may finish early and leave room for more)."""
    out: CapReport = {}
    prices = options.prices
    if options.request_cap is not None:
        over = sum(usage_passes(options.request_cap, q.usage, prices) for q in per_query)
        out["request_cap"] = {"cap": _cap_text(options.request_cap), "queries_stopped": over}
    if options.ranker_cap is not None:
        total, fit = Usage(), 0
        for q in per_query:
            total += q.usage
            if usage_passes(options.ranker_cap, total, prices):
                break
            fit += 1
        out["ranker_cap"] = {"cap": _cap_text(options.ranker_cap), "queries_allowed": fit}
    return out


def _cap_text(cap: SpendingCap) -> str:
    return ",".join(f"{k}={v:g}" for k, v in asdict(cap).items() if v is not None)


def estimate_query(query: Query, prompt: Prompt, plan: Plan) -> Estimate:
    """The plan's calls; each round's prompts rendered on the items at its positions when
    the ranking starts (a later round's head is not known yet: the first items stand in)."""
    prompt_tokens, completion = planned_tokens(
        plan, lambda shown: prompt.render(query.query, shown), query.texts
    )
    calls = plan.calls
    return Estimate(1, plan.n, len(plan.rounds), calls.low, calls.high, prompt_tokens, completion)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("estimate", help="calls and tokens a rank run would spend")
    parser.add_argument("--input", "-i", required=True, help="JSONL file, as for 'permsc rank'")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_ranking_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    options = cli_options(args)  # a bad option fails here, as it would in 'rank'
    prompt = options.build_prompt()
    queries, bad = load_queries(args.input)
    choices = [_chosen(options, prompt, q) for q in queries]
    per_query = [estimate_query(q, prompt, c.plan) for q, c in zip(queries, choices, strict=True)]
    total = sum(per_query, Estimate())
    cost = options.prices.cost(total.usage) if options.prices is not None else None
    caps = cap_report(per_query, options)
    strategy = chosen_strategies([c.name for c in choices], options)
    exact = total.min_calls == total.calls
    if args.json:
        extra = {"cost": cost} if cost is not None else {}
        record = {**asdict(total), "strategy": strategy, "calls_exact": exact, **extra, **caps}
        tokens = "approximate (chars/4), at the most calls"
        say(json.dumps({**record, "bad_lines": bad, "tokens": tokens}))
    else:
        calls = f"{total.calls}" if exact else f"{total.min_calls}..{total.calls}"
        stops = "" if exact else "adaptive m: a round stops between its first stable wave and m; "
        budget = _budget(options)
        say(f"queries:           {total.queries} ({bad} bad lines skipped)")
        say(f"items:             {total.items}")
        say(f"strategy:          {strategy}")
        say(f"rounds:            {total.rounds} (PSC windows and blocks rounds)")
        say(
            f"calls:             {calls} (m={options.num_permutations}{budget}; {stops}every "
            "answer read the first time: re-asks and retries come on top, cache hits are not "
            "calls)"
        )
        say(f"prompt tokens:     ~{total.prompt_tokens:,} (approximate: characters / 4)")
        say(f"completion tokens: ~{total.completion_tokens:,} (approximate: 6 per ranked item)")
        if cost is not None:
            say(f"cost:              ~{cost:.4g} (at --prices, per million tokens)")
        _say_caps(caps, total.queries)
    return 2 if bad else 0


def _budget(options: RankingOptions) -> str:
    named = named_budgets(options)
    return f", {named}: at most" if named else ""


def _chosen(options: RankingOptions, prompt: Prompt, query: Query) -> Choice:
    """The chooser's pick for ``query``, within its token or cost budget (as ``rank``)."""
    render = functools.partial(prompt.render, query.query)
    within = within_spend(options, render, query.texts)
    return choose(within.strategy, len(query.texts), within)


def chosen_strategies(names: list[str], options: RankingOptions) -> str:
    """The strategy the chooser picks for each query (``strategies.choose``, as ``rank`` runs
    it), with the query count where they differ: ``"frontier"``, or
    ``"frontier (1 query), blocks (1 query)"``; with no query, the configured one."""
    counts = Counter(names)
    if not counts:
        configured = options.strategy
        return configured if isinstance(configured, str) else type(configured).__name__.lower()
    if len(counts) == 1:
        return names[0]
    return ", ".join(
        f"{name} ({k} quer{'y' if k == 1 else 'ies'})" for name, k in counts.most_common()
    )


def _say_caps(caps: CapReport, queries: int) -> None:
    if "request_cap" in caps:
        stopped = caps["request_cap"]
        say(
            f"request cap:       {stopped['cap']}: would stop {stopped['queries_stopped']} of "
            f"{queries} queries (each query's own estimate)"
        )
    if "ranker_cap" in caps:
        allowed = caps["ranker_cap"]
        say(
            f"ranker cap:        {allowed['cap']}: allows about {allowed['queries_allowed']} of "
            f"{queries} queries (a query starts only if the cap can pay for its plan: "
            "the rest are not started, and --resume ranks them later)"
        )
