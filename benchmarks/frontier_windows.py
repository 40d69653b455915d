"""The frontier's first round and its window, in process against the simulated judge.

Three questions of issue 39, each a table in docs/benchmarks.md "frontier windows":

- ``passes``: the first round's passes over the head (``Settings.first_passes`` 1, 2, 3) at
  call budgets, the final order as the ranker makes it (Kemeny over the list model's top 30).
- ``contenders``: how many items a budget's later rounds show (``Settings.contenders`` x k at
  most, or every item the fit leaves a chance of the top k: ``None``), at call budgets.
- ``window``: at equal *tokens*, which window serves (20, 10, 20 then 10) and whether one
  request's answers can tell: ``learned`` starts at half the window and grows to the whole
  one where, in its second round, a full window's answer agrees with the first round's answers
  (on the pairs they share) at least as well as the half windows' answers do, less
  ``--margin``. Tokens are modelled as 140 a prompt + 88 an item (the judge's own counts on
  DL19 passages: 1,900 for 20 items, 1,020 for 10); a budget pays for the most calls whose
  plan fits, re-planned after each round at the next window's cost.

The judge answers in process (benchmarks/_frontier_runs.py), 20 DL19 lists, judge seed 0;
regimes from benchmarks/_frontier_regimes.py plus ``window-noisy`` (benchmarks/peers.py's:
noise x (w / 10) ** 1.5) and two written down before they ran: ``window-biased``
(position-biased, window_noise 1) and ``window-mild`` (mild, noise 0.5, window_noise 1).
Not part of CI::

    python benchmarks/frontier_windows.py passes --write
    python benchmarks/frontier_windows.py contenders --budgets 8,12,16,22 --write
    python benchmarks/frontier_windows.py window --write
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # 2 shared cores: BLAS threads only thrash

import argparse  # noqa: E402
import itertools  # noqa: E402
import logging  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _frontier_runs as runs  # noqa: E402
from _frontier_regimes import ALL, Regime  # noqa: E402
from _report import write_section  # noqa: E402

from permsc_integrations.aggregators import get  # noqa: E402
from permsc_integrations.strategies._frontier.model import Answer  # noqa: E402
from permsc_integrations.strategies._frontier.policy import Frontier, Settings  # noqa: E402
from permsc_integrations.strategies._frontier.rounds import CONSENSUS_TOP, final_order  # noqa: E402
from permsc_integrations.testing import REGIMES  # noqa: E402

WINDOWED = {
    "window-noisy": Regime(REGIMES["mild"].but(noise=0.7, window_noise=1.5)),
    "window-biased": Regime(REGIMES["position-biased"].but(window_noise=1.0)),
    "window-mild": Regime(REGIMES["mild"].but(noise=0.5, window_noise=1.0)),
}
REGIMES_ALL = {**ALL, **WINDOWED}
TOKENS = (7600, 12200, 13400, 17000, 18100, 21000, 25000, 36000)  # the peers' means, about
KEMENY = get("kemeny")
VARIANTS = {"w=20": (20, 20), "w=10": (10, 10), "20 then 10": (20, 10), "learned": (10, 10)}
"""Each variant's first window and later window (learned: its later window may grow)."""


def cost(window: int) -> int:
    """A prompt's tokens, modelled (module docstring)."""
    return 140 + 88 * window


def ranked(judged: runs.Judged, q, policy: Frontier) -> float:
    """nDCG@k of the ranker's order from the policy's answers."""
    r = policy.result()
    keep = CONSENSUS_TOP * judged.regime.k
    top = final_order(KEMENY, policy.answers, r.order[: policy.head], keep)
    return judged.ndcg(q, [*top, *r.order[policy.head :]])


def at_calls(judged: runs.Judged, q, budget: int, **settings) -> float:
    """nDCG@10 of ``max_calls = budget``, with ``settings`` (Settings fields) over the defaults."""
    policy = Frontier(len(q.texts), Settings(budget=budget, seed=_seed(q), **settings))
    while (windows := policy.next_round()) is not None:
        policy.observe([judged.ask(q, w) for w in windows])
    return ranked(judged, q, policy)


def _seed(q) -> int:
    return sum(map(ord, q.qid))


def _calls_within(n: int, tokens: int, window: int, later: int) -> int:
    """The most calls whose plan (first round at ``window``, later at ``later``) fits."""
    best = 1
    for budget in range(1, 400):
        plan = Frontier(n, Settings(window=window, budget=budget, first_passes=1)).planned()
        spend = sum(c * cost(window if i == 0 else later) for i, c in enumerate(plan))
        if spend > tokens:
            break
        best = budget
    return best


def at_tokens(judged: runs.Judged, q, tokens: int, variant: str, margin: float) -> float:
    """One list under a token budget: window 20, 10, 20 then 10, or learned (docstring)."""
    first, later = VARIANTS[variant]
    n = len(q.texts)
    budget = _calls_within(n, tokens, first, later)
    policy = Frontier(n, Settings(window=first, budget=budget, first_passes=1, seed=_seed(q)))
    spent, firsts = 0, []
    while (windows := policy.next_round()) is not None:
        if variant == "learned" and policy.rounds == 2:
            windows = _probe(policy, windows)
        answers = [judged.ask(q, w) for w in windows]
        spent += sum(cost(len(w)) for w in windows)
        if policy.rounds == 1:
            firsts = answers
            policy.window = later
        elif variant == "learned" and policy.rounds == 2 and _grows(answers, firsts, margin):
            policy.window = 20
        shown = len(policy.answers) + len(answers)
        affordable = shown + max(0, (tokens - spent) // cost(policy.window))
        policy.observe(answers, spent=shown, affordable=affordable)
    return ranked(judged, q, policy)


def _probe(policy: Frontier, windows: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The second round with one full window over the likeliest 20, shuffled (not shown best
    first), in place of the round's last two windows."""
    p = policy.model().top_probabilities(policy.settings.k)
    likeliest = sorted(range(policy.head), key=lambda i: -p[i])[:20]
    random.Random(policy.settings.seed).shuffle(likeliest)
    return [*windows[: max(1, len(windows) - 2)], tuple(likeliest)]


def _grows(answers: list[Answer], firsts: list[Answer], margin: float) -> bool:
    full = _agreement([a for a in answers if len(a.shown) > 10], firsts)
    half = _agreement([a for a in answers if len(a.shown) <= 10], firsts)
    return full is not None and full >= (half if half is not None else 1.0) - margin


def _agreement(answers: list[Answer], reference: list[Answer]) -> float | None:
    """The share of the pairs ``answers`` and ``reference`` both ordered that they agree on."""
    agree = total = 0
    for a in answers:
        at = {item: r for r, item in enumerate(a.ranking)}
        for ref in reference:
            rt = {item: r for r, item in enumerate(ref.ranking)}
            common = [i for i in a.ranking if i in rt]
            for x, y in itertools.combinations(common, 2):
                total += 1
                agree += (at[x] < at[y]) == (rt[x] < rt[y])
    return agree / total if total else None


def _lists(regime: str, count: int) -> runs.Judged:
    return runs.Judged(REGIMES_ALL[regime], 0, count)


PASSES = {str(p): {"first_passes": p} for p in (1, 2, 3)}
CONTENDERS = {
    "every plausible": {"contenders": None},
    "3 x k": {"contenders": 3},
    "2 x k": {"contenders": 2},
}


def budget_table(args: argparse.Namespace, column: str, variants: dict[str, dict]) -> str:
    """nDCG@10 of each variant (Settings fields) at each call budget, a row a regime."""
    budgets = [int(b) for b in args.budgets.split(",")]
    lines = [
        f"| regime | {column} | " + " | ".join(f"B={b}" for b in budgets) + " | mean |",
        "| --- | --- | " + " | ".join("---:" for _ in budgets) + " | ---: |",
    ]
    for regime in args.regimes.split(","):
        judged = _lists(regime, args.queries)
        for name, options in variants.items():
            means = [
                statistics.fmean(at_calls(judged, q, b, **options) for q in judged.lists)
                for b in budgets
            ]
            cells = " | ".join(f"{m:.3f}" for m in means)
            lines.append(f"| {regime} | {name} | {cells} | {statistics.fmean(means):.3f} |")
            logging.getLogger("frontier_windows").warning("%s", lines[-1])
    return "\n".join(lines)


def window_table(args: argparse.Namespace) -> str:
    variants = tuple(VARIANTS)
    lines = [
        "| regime | window | " + " | ".join(f"T={t}" for t in TOKENS) + " | mean |",
        "| --- | --- | " + " | ".join("---:" for _ in TOKENS) + " | ---: |",
    ]
    for regime in args.regimes.split(","):
        judged = _lists(regime, args.queries)
        for variant in variants:
            means = [
                statistics.fmean(
                    at_tokens(judged, q, t, variant, args.margin) for q in judged.lists
                )
                for t in TOKENS
            ]
            cells = " | ".join(f"{m:.3f}" for m in means)
            lines.append(f"| {regime} | {variant} | {cells} | {statistics.fmean(means):.3f} |")
            logging.getLogger("frontier_windows").warning("%s", lines[-1])
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("question", choices=("passes", "contenders", "window"))
    ap.add_argument("--regimes", default=None)
    ap.add_argument("--budgets", default="12,16,22,26")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--write", action="store_true", help="write docs/benchmarks.md's section")
    args = ap.parse_args()
    logging.basicConfig(format="%(message)s")
    logging.getLogger("permsc_integrations").setLevel(logging.ERROR)
    if args.question == "passes":
        args.regimes = args.regimes or (
            "mild,position-biased,noisy,sticky,very-noisy,sticky-heavy,window-noisy,window-biased"
        )
        table = budget_table(args, "first passes", PASSES)
    elif args.question == "contenders":
        args.regimes = args.regimes or ",".join(REGIMES_ALL)
        table = budget_table(args, "contenders", CONTENDERS)
    else:
        args.regimes = args.regimes or ",".join(["mild", "position-biased", "noisy", *WINDOWED])
        table = window_table(args)
    if args.write:
        write_section(f"frontier windows: {args.question}", _intro(args.question) + table)


def _intro(question: str) -> str:
    if question == "contenders":
        return (
            "## The frontier's later rounds under a budget: how many contenders (issue 39; "
            "benchmarks/frontier_windows.py contenders)\n\nnDCG@10 of `max_calls = B` (window 20, "
            "k = 10, 20 lists, judge seed 0, in process), the ranker's final order, by the items "
            "a later round shows: every item the fit leaves at least a 2 % chance of the top k "
            "(before), or at most the likeliest `Settings.contenders` x k of them (the default: "
            "2, chosen on this table and the real answers: it is no held-out check of itself). "
            "Every regime the judge has; k stays 10 in the k5 and k20 regimes. At B = 8 a later "
            "round is one window of 20: the same items either way.\n\n"
        )
    if question == "passes":
        return (
            "## The frontier's first round: one pass or more (issue 39; "
            "benchmarks/frontier_windows.py passes)\n\nnDCG@10 of `max_calls = B` "
            "(window 20, DL19 BM25 top 100, 20 lists, judge seed 0, in process), the ranker's "
            "final order, by the most passes over the head the first round makes "
            "(`Settings.first_passes`; a budget pays for a second pass where B less its "
            "later rounds' third holds two).\n\n"
        )
    return (
        "## The window at equal tokens, and learning it from one request (issue 39; "
        "benchmarks/frontier_windows.py window)\n\nnDCG@10 under a token budget T (modelled: 140 "
        "tokens a prompt + 88 an item), DL19 BM25 top 100, 20 lists, judge seed 0, in process. "
        "w=20 / w=10: every window that size; 20 then 10: the first round at 20, the later ones "
        "at 10; learned: the first round at 10, then one window of 20 among the second round's, "
        "and the later rounds at 20 where its answer agrees with the first round's answers at "
        "least as well as the 10-item ones' do, less 0.05.\n\n"
    )


if __name__ == "__main__":
    main()
