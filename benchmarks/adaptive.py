"""Adaptive m, the sign-test rule against the old leave-one-out rule and fixed m, side by side.

(a) The scripted server through the real openai client, one window of 20 items (shuffled per
    list, so that the index tie-break favours no answer), 30 lists per noise level, two noise
    models: *swap* (the true order with each adjacent pair swapped with probability p, top to
    bottom) and the paper's *keep* (``noisy_responder``: a random share ``keep`` of the true
    order stays in place, the rest is shuffled). Each list is ranked once with m = 20; every
    rule then replays that list's samples wave by wave (a stopped run is a prefix of the full
    one, so this is what the engine draws), and the engine itself is run once more with the
    default rule to check that it stops where the replay does.
(b) Saved answers of the embedded 1.5B model (``docs/results/*sort*-qwen.samples.jsonl``),
    replayed the same way (no model calls).

Run: ``.venv/bin/python benchmarks/adaptive.py`` (a few minutes). Writes the "adaptive"
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker, aggregate  # noqa: E402
from permsc_integrations.eval import kendall_tau_b  # noqa: E402
from permsc_integrations.eval._report import bootstrap_ci  # noqa: E402
from permsc_integrations.eval._samples import read_samples  # noqa: E402
from permsc_integrations.metrics import kendall_distance, kendall_tau  # noqa: E402
from permsc_integrations.strategies._adaptive import Adaptive, waves  # noqa: E402
from permsc_integrations.testing import (  # noqa: E402
    ChatRequest,  # noqa: E402
    ScriptedOpenAIServer,
    noisy_responder,
)
from permsc_integrations.testing._responders import shown_passages  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CAP = 20
Rule = Callable[[list[tuple[int, ...]], list[tuple[int, ...]], int], bool]  # shown, good, n
Stats = dict[tuple[str, str], dict[str, float]]  # (level, rule) -> calls, top3, tau
DEFAULT = "**sign 0.9 + zone 0.5 (default)**"
OLD = "old: leave-one-out 0.1"
BEFORE = "sign 0.9 alone (zone=None; the default before)"


def leave_one_out(tolerance: float = 0.1) -> Rule:
    """The rule before issue 25: stop when dropping any one sample moves the Kemeny
    consensus by at most ``tolerance`` (share of pairs swapped)."""

    def stable(_: list[tuple[int, ...]], good: list[tuple[int, ...]], n: int) -> bool:
        if len(good) < 2:
            return False
        full = aggregate(good, method="kemeny", n_items=n)
        pairs = n * (n - 1) // 2
        return all(
            kendall_distance(aggregate(good[:k] + good[k + 1 :], n_items=n), full)
            <= tolerance * pairs
            for k in range(len(good))
        )

    return stable


def sign(policy: Adaptive) -> Rule:
    return lambda shown, good, n: policy.stable(good, n_items=n, aggregator="kemeny", shown=shown)


# label, cap, rule (None: fixed m)
RULES: list[tuple[str, int, Rule | None]] = [
    ("m=4", 4, None),
    ("m=10", 10, None),
    ("m=20", 20, None),
    (OLD, CAP, leave_one_out()),
    ("sign 0.8", CAP, sign(Adaptive(confidence=0.8, zone=None))),
    (BEFORE, CAP, sign(Adaptive(zone=None))),
    ("sign 0.95", CAP, sign(Adaptive(confidence=0.95, zone=None))),
    (DEFAULT, CAP, sign(Adaptive())),
    ("sign 0.9 + zone 0.25", CAP, sign(Adaptive(zone=0.25))),
    ("sign 0.9, top 3", CAP, sign(Adaptive(top_k=3, zone=None))),
    ("sign 0.9 + zone 0.5, top 3", CAP, sign(Adaptive(top_k=3))),
]


def replay(
    shown: Sequence[Sequence[int]],
    rankings: Sequence[tuple[int, ...]],
    n: int,
    rule: Rule | None,
    cap: int,
) -> tuple[int, int, list[int]]:
    """(samples drawn, waves, consensus) when the samples arrive in waves of 4 (first 4)."""
    policy = Adaptive() if rule else None
    drawn, count = cap, 0
    for _, end in waves(policy, cap):
        drawn, count = end, count + 1
        pairs = [
            (tuple(p), tuple(r)) for p, r in zip(shown[:end], rankings[:end], strict=True) if r
        ]
        good = [r for _, r in pairs]
        seen = [p for p, _ in pairs]
        if rule and end < cap and len(good) >= max(1, end // 2) and rule(seen, good, n):
            break
    good = [tuple(r) for r in rankings[:drawn] if r]
    return drawn, count, aggregate(good, method="kemeny", n_items=n) if good else list(range(n))


def swap_responder(noise: float, seed: int = 11) -> Callable[[ChatRequest], str]:
    """The true order (longest first) with each adjacent pair swapped with probability
    ``noise``, top to bottom; seeded by the prompt."""

    def respond(request: ChatRequest) -> str:
        shown = shown_passages(request.messages)
        rng = random.Random(f"{seed}\x00{request.text}")
        order = sorted(range(len(shown)), key=lambda p: -len(shown[p]))
        for i in range(len(order) - 1):
            if rng.random() < noise:
                order[i], order[i + 1] = order[i + 1], order[i]
        return " > ".join(f"[{p + 1}]" for p in order)

    return respond


def scripted_lists(lists: int) -> list[list[str]]:
    rng = random.Random(5)
    return [[f"item {'x' * (k + 1)}" for k in rng.sample(range(20), 20)] for _ in range(lists)]


def scripted(
    label: str, responder: Callable[[ChatRequest], str], lists: int, stats: Stats
) -> list[str]:
    all_items = scripted_lists(lists)
    truths = [sorted(range(20), key=lambda i, it=it: -len(it[i])) for it in all_items]
    with ScriptedOpenAIServer(responder) as server:
        url = {"base_url": server.base_url}
        with PSCRanker("openai:m", num_permutations=CAP, backend_options=url) as r:
            full = [r.rank(f"q{q}", items) for q, items in enumerate(all_items)]
        with PSCRanker("openai:m", num_permutations=CAP, adaptive=True, backend_options=url) as r:
            engine = [r.rank(f"q{q}", items) for q, items in enumerate(all_items)]
    samples = [[s.ranking for s in res.samples] for res in full]
    shown = [[s.permutation for s in res.samples] for res in full]
    rows, default = [], None
    for name, cap, rule in RULES:
        runs = [replay(p, s, 20, rule, cap) for p, s in zip(shown, samples, strict=True)]
        rows.append(_scripted_row(label, name, runs, truths, stats))
        if name == DEFAULT:
            default = runs
    assert default is not None
    same = sum(
        len(e.samples) == d and tuple(e.order) == tuple(o)
        for e, (d, _, o) in zip(engine, default, strict=True)
    )
    rows.append(
        f"| {label} | engine, default rule: same stop and order as the replay | "
        f"{same} of {lists} lists | | | | | |"
    )
    return rows


def _scripted_row(
    label: str,
    name: str,
    runs: list[tuple[int, int, list[int]]],
    truths: list[list[int]],
    stats: Stats,
) -> str:
    pairs = [(o, t) for (_, _, o), t in zip(runs, truths, strict=True)]
    top3 = sum(list(o[:3]) == t[:3] for o, t in pairs)
    p3, p10 = (
        statistics.fmean(len(set(o[:k]) & set(t[:k])) / k for o, t in pairs) for k in (3, 10)
    )
    tau = statistics.fmean(kendall_tau(o, t) for o, t in pairs)
    calls = statistics.fmean(d for d, _, _ in runs)
    rounds = statistics.fmean(w for _, w, _ in runs)
    stats[label, name] = {"calls": calls, "top3": top3, "tau": tau}
    return (
        f"| {label} | {name} | {calls:.1f} | {rounds:.1f} | {top3} | {p3:.3f} | {p10:.3f} | "
        f"{tau:.3f} |"
    )


def offline(path: Path, stats: Stats) -> list[str]:
    _, lists = read_samples(path)
    name = f"{path.name.replace('.samples.jsonl', '')} ({len(lists)} lists)"
    runs = {
        label: [
            replay(s.permutations, s.rankings, len(s.example.items), rule, cap)
            for s in lists.values()
        ]
        for label, cap, rule in RULES
    }
    keys = [s.example.keys for s in lists.values()]
    base = [kendall_tau_b(tuple(o), k) for (_, _, o), k in zip(runs["m=20"], keys, strict=True)]
    rows = []
    for label, got in runs.items():
        taus = [kendall_tau_b(tuple(o), k) for (_, _, o), k in zip(got, keys, strict=True)]
        agree = statistics.fmean(
            kendall_tau(o, f) for (_, _, o), (_, _, f) in zip(got, runs["m=20"], strict=True)
        )
        low, high = bootstrap_ci(taus)
        calls = statistics.fmean(d for d, _, _ in got)
        stats[name, label] = {"calls": calls, "tau": statistics.fmean(taus)}
        rows.append(
            f"| {name} | {label} | {calls:.1f} | "
            f"{statistics.fmean(taus):.3f} ({low:.3f}..{high:.3f}) | "
            f"{statistics.fmean(taus) - statistics.fmean(base):+.3f} | {agree:.3f} |"
        )
    return rows


def targets(stats: Stats, rule: str, lists: int) -> list[str]:
    """Issue 25's targets for ``rule``, met or not, with the figures."""

    def get(level: str, name: str, what: str) -> float:
        return stats[level, name][what]

    def mark(ok: bool) -> str:
        return "met" if ok else "**not met**"

    quiet = [get(lv, rule, "calls") for lv in ("swap 0.0", "keep 1.0")]
    more = get("swap 0.3", rule, "calls") > get("swap 0.0", rule, "calls")
    top3, top3_20 = get("swap 0.3", rule, "top3"), get("swap 0.3", "m=20", "top3")
    levels = sorted({lv for lv, _ in stats})
    drops = {lv: get(lv, rule, "tau") - get(lv, "m=20", "tau") for lv in levels}
    worst = min(drops, key=drops.__getitem__)
    cheap = [lv for lv in levels if get(lv, rule, "calls") < CAP - 0.05]
    return [
        f"- `{rule.strip('*')}`: noiseless model <= 8 calls a list: "
        f"{' and '.join(f'{c:.1f}' for c in quiet)} ({mark(max(quiet) <= 8)}); "
        f"swap 0.3 draws more than swap 0: {get('swap 0.3', rule, 'calls'):.1f} vs "
        f"{get('swap 0.0', rule, 'calls'):.1f} ({mark(more)}), top 3 right on {top3:.0f} of "
        f"{lists} vs {top3_20:.0f} for m = 20 ({mark(top3 >= top3_20 - 1)}); no level or saved set "
        f"more than 0.02 tau below m = 20: worst {drops[worst]:+.3f} ({worst}) "
        f"({mark(drops[worst] >= -0.02)}); fewer than {CAP} calls on "
        f"{', '.join(cheap) or 'none'}.",
    ]


def check_cost(repeats: int = 5) -> list[str]:
    """The stop check's time a wave (``Adaptive.stable``), the sign test alone against the
    default (the zone rule fits the list model), side by side on the same answers: swap-0.3
    orders of shuffled windows, where the sign test does not stop (so the zone rule runs)."""
    rng = random.Random(0)
    lines = ["| items | samples | sign test alone (ms) | with the zone (ms) | ratio |"]
    lines.append("| ---: | ---: | ---: | ---: | ---: |")
    for n, m in ((10, 8), (20, 8), (20, 20), (50, 20)):
        shown = [tuple(rng.sample(range(n), n)) for _ in range(m)]
        answers = []
        for _ in shown:
            order = list(range(n))
            for i in range(n - 1):
                if rng.random() < 0.3:
                    order[i], order[i + 1] = order[i + 1], order[i]
            answers.append(tuple(order))
        ms = []
        for policy in (Adaptive(zone=None), Adaptive()):
            start = time.perf_counter()
            for _ in range(repeats):
                policy.stable(answers, n_items=n, aggregator="kemeny", shown=shown)
            ms.append((time.perf_counter() - start) / repeats * 1000)
        lines.append(f"| {n} | {m} | {ms[0]:.1f} | {ms[1]:.1f} | {ms[1] / ms[0]:.0f}x |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lists", type=int, default=30, help="scripted lists per noise level")
    ap.add_argument(
        "samples",
        nargs="*",
        type=Path,
        default=sorted((ROOT / "docs" / "results").glob("*sort*-qwen.samples.jsonl")),
    )
    args = ap.parse_args()
    body = [
        "## Adaptive m: stop on evidence (issue 25)",
        "",
        f"Adaptive m (first wave 4, waves of 4, cap {CAP}) by rule, against fixed m; Kemeny "
        "throughout. `sign C`: `Adaptive(confidence=C)`, every adjacent pair of the consensus "
        "won by a margin a one-sided sign test calls real, at family level 1 - C (Holm). "
        "`old`: the leave-one-out rule this replaced (tolerance 0.1).",
        "",
        f"(a) Scripted server, one window of 20 items, {args.lists} lists per noise level; "
        "top-3 right: lists whose top 3 is the true top 3 in order:",
        "",
        "| noise | rule | calls per list | waves (x L) | top-3 right | P@3 | P@10 | "
        "Kendall tau to the truth |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    stats: Stats = {}
    for p in (0.0, 0.1, 0.2, 0.3, 0.5):
        body += scripted(f"swap {p:.1f}", swap_responder(p), args.lists, stats)
    for keep in (1.0, 0.8, 0.6, 0.4, 0.2):
        responder = noisy_responder(len, keep=keep, seed=11)
        body += scripted(f"keep {keep:.1f}", responder, args.lists, stats)
    body += [
        "",
        "(b) Saved answers of the embedded 1.5B model, replayed (95% bootstrap CI; change: "
        "mean tau minus m = 20's; agreement: mean Kendall tau to the m = 20 consensus):",
        "",
        "| samples | rule | calls per list | Kendall tau (95% CI) | change | agreement |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for path in args.samples:
        body += offline(path, stats)
    body += ["", "Targets of issue 25:", ""]
    body += targets(stats, DEFAULT, args.lists) + targets(stats, BEFORE, args.lists)
    body += targets(stats, OLD, args.lists)
    body += [
        "",
        "The stop check's cost a wave, in process (mean of 5; a model call takes seconds):",
        "",
    ]
    body += check_cost()
    body += [
        "",
        "Reading: the sign test alone stops only where the samples support every pair that "
        "matters, and the 1.5B model leaves a pair it splits about evenly in nearly every "
        "20-word list, so alone it saved no calls on wordsort-qwen. The zone rule (issue 39) "
        "stops once the list model settles every pair up to its indifference zone and the "
        "consensus held over the last wave: about a third of the calls saved on both WordSort "
        "sets at no measurable loss of tau, and swap 0.1-0.2 and keep 0.8 stop sooner at "
        "about the same quality (swap 0.2: top 3 right on 29 lists of 30, against 30). What "
        "got worse: it stops a model that swaps neighbours with "
        "probability 0.3-0.5 at 8 calls, as soon as a noiseless one, with its top 3 right "
        "less often than m = 20 (issue 25's top-3 target is not met) and tau up to 0.02 "
        "lower; with `top_k` set the zone reads the gaps near the cut and the head stays "
        "right. A consensus required to hold over two waves met issue 25's targets but saved "
        "only a fifth on the real answers (19-22 %, measured once, not kept). `zone=None` "
        "restores the sign test alone. The old rule stopped early on noisy models too, and "
        "lost more than a tenth of tau there.",
    ]
    write_section("adaptive", "\n".join(body))
    sys.stdout.write("\n".join(body) + "\n")


if __name__ == "__main__":
    main()
