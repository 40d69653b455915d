"""Issue 31's stop rule replayed on a real model's saved answers: calls saved, tau lost.

docs/results/wordsort-qwen.samples.jsonl holds the embedded 1.5B model's 20 shuffled answers
to each of 65 WordSort lists. Each list is replayed in waves of 4 (the same prefix a live run
would draw): after each wave the list model (``strategies._frontier.fit_list``)
is fitted to the answers so far and the stop rule (:func:`permsc_integrations.strategies._frontier.
unsettled`, the whole order: WordSort has no top k) decides; the ranking is the model's order
at the stop. Against it: fixed m = 20 (Kemeny), the model's order at m = 20, and adaptive m
(``Adaptive()``: the sign test with the zone rule beside it, the default; ``zone=None``: the
sign test alone, the default before). Kendall tau against the true alphabetical order.
No model calls.

    python benchmarks/frontier_replay.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adaptive  # noqa: E402  (its replay: the engine's waves and stop, sample by sample)
from _report import write_section  # noqa: E402

from permsc_integrations.aggregators import aggregate, get  # noqa: E402
from permsc_integrations.eval._samples import read_samples  # noqa: E402
from permsc_integrations.metrics import kendall_tau  # noqa: E402
from permsc_integrations.strategies._adaptive import Adaptive  # noqa: E402
from permsc_integrations.strategies._frontier import Answer, fit_list, unsettled  # noqa: E402
from permsc_integrations.strategies._frontier.rounds import final_order  # noqa: E402

KEMENY = get("kemeny")

SAMPLES = Path(__file__).resolve().parents[1] / "docs" / "results" / "wordsort-qwen.samples.jsonl"


def replay(
    shown, rankings, n: int, zone: float, confidence: float
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(samples drawn, the model's order, the ranker's order) under the stop rule, waves of 4
    up to all; the ranker's order is :func:`final_order` (Kemeny over the answers drawn, the
    model breaking its ties), what a budgeted or adaptive ranking returns."""
    m = len(rankings)
    for end in range(4, m + 1, 4):
        answers = [
            Answer(tuple(s), tuple(r))
            for s, r in zip(shown[:end], rankings[:end], strict=True)
            if r
        ]
        fit = fit_list(n, answers)
        if not unsettled(fit, zone=zone, confidence=confidence) or end >= m:
            model = fit.order()
            return end, model, tuple(final_order(KEMENY, answers, model))
    return m, tuple(range(n)), tuple(range(n))


ADAPTIVE = {
    "adaptive m, sign test alone (zone=None; the default before)": Adaptive(zone=None),
    "adaptive m, sign test + zone 0.5 (the default)": Adaptive(),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=Path, default=SAMPLES)
    ap.add_argument("--zones", default="0.25,0.5,1.0")
    ap.add_argument("--confidence", type=float, default=0.9)
    args = ap.parse_args()
    _, lists = read_samples(args.samples)
    rows: dict[str, list[tuple[int, float]]] = {}
    for s in lists.values():
        n, truth, rankings = len(s.example.items), s.example.truth, [tuple(r) for r in s.rankings]
        full = tuple(aggregate([r for r in rankings if r], method="kemeny", n_items=n))
        rows.setdefault("fixed m = 20, Kemeny", []).append(
            (len(rankings), kendall_tau(full, truth))
        )
        model = fit_list(
            n, [Answer(tuple(p), r) for p, r in zip(s.permutations, rankings, strict=True) if r]
        )
        rows.setdefault("fixed m = 20, list model", []).append(
            (20, kendall_tau(model.order(), truth))
        )
        answers = [Answer(tuple(p), r) for p, r in zip(s.permutations, rankings, strict=True) if r]
        rows.setdefault(
            "fixed m = 20, the ranker's order (Kemeny; the model orders uncompared pairs)", []
        ).append((20, kendall_tau(final_order(KEMENY, answers, model.order()), truth)))
        shown = [tuple(p) for p in s.permutations]
        for label, policy in ADAPTIVE.items():
            used, _, order = adaptive.replay(
                shown, rankings, n, adaptive.sign(policy), len(rankings)
            )
            rows.setdefault(label, []).append((used, kendall_tau(order, truth)))
        for zone in (float(z) for z in args.zones.split(",")):
            used, order, ranker = replay(s.permutations, rankings, n, zone, args.confidence)
            name = f"frontier stop, zone {zone} x spread, {args.confidence}"
            rows.setdefault(f"{name}, list model", []).append((used, kendall_tau(order, truth)))
            rows.setdefault(f"{name}, the ranker's order", []).append(
                (used, kendall_tau(ranker, truth))
            )
    base = statistics.fmean(t for _, t in rows["fixed m = 20, Kemeny"])
    lines = [
        f"{len(lists)} WordSort lists, the embedded Qwen2.5-Coder-1.5B's saved answers "
        f"({args.samples.name}, m = 20, waves of 4); Kendall tau against the true order, "
        "means over lists.",
        "",
        "| rule | calls per list | saved | Kendall tau | tau lost vs m = 20 Kemeny |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, found in rows.items():
        calls, tau = statistics.fmean(c for c, _ in found), statistics.fmean(t for _, t in found)
        lines.append(
            f"| {name} | {calls:.1f} | {1 - calls / 20:.0%} | {tau:.3f} | {base - tau:+.3f} |"
        )
    print("\n".join(lines))  # noqa: T201
    write_section(
        "frontier-replay",
        "## Frontier stop rule on real answers (issue 31, item 8)\n\n" + "\n".join(lines),
    )


if __name__ == "__main__":
    main()
