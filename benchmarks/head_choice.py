"""Which consensus picks a blocks round's head: the quick one, or the round's own Kemeny.

The blocks strategy's head round ranks the top ``window_size`` items of the first round.
By default a quick consensus picks them (Kemeny's local search, milliseconds) and the head
round starts at once; ``Blocks(head_by="kemeny")`` waits for the round's exact Kemeny (up
to its ``time_limit``, about 1 s at n = 100) and takes its head. This measures what each
choice gives, on the same answers: the noise model of benchmarks/strategies.py
(``noisy_responder``, position bias 0.5) at two noise levels, in process and with no
latency (quality only; the wall-time side is benchmarks/strategies.py). ``RRF`` is the
screening round's choice, for comparison.

Run: ``.venv/bin/python benchmarks/head_choice.py`` (about 6 minutes on 2 cores).
Writes the "head-choice" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402
from strategies import items, quality, relevance  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.backends.base import Completion  # noqa: E402
from permsc_integrations.strategies import Blocks  # noqa: E402
from permsc_integrations.testing import (
    ChatRequest,  # noqa: E402
    noisy_responder,  # noqa: E402
)

CHOICES = {"quick (default)": None, "Kemeny (waits)": "kemeny", "RRF": "rrf"}


class NoisyModel:
    """The noise model as an in-process backend."""

    name = "noisy"

    def __init__(self, keep: float) -> None:
        self.answer = noisy_responder(relevance, keep=keep, position_bias=0.5, seed=3)

    async def acomplete(self, messages: Any, settings: Any) -> Completion:
        return Completion(text=self.answer(ChatRequest(0, "m", tuple(messages))).text)

    async def aclose(self) -> None:
        pass


def cell(keep: float, m: int, n: int, lists: int) -> dict[str, Any]:
    """Every choice on the same lists: mean quality, and the heads each one picked."""
    out: dict[str, Any] = {}
    texts = items(n)
    truth = sorted(range(n), key=lambda i: -relevance(texts[i]))
    for label, head_by in CHOICES.items():
        rows, heads = [], []
        model, strategy = NoisyModel(keep), Blocks(head_by=head_by)
        with PSCRanker(model, num_permutations=m, window_size=20, strategy=strategy) as r:
            for q in range(lists):
                result = r.rank(f"query {q}", texts)
                p20 = len(set(result.order[:20]) & set(truth[:20])) / 20
                rows.append((*quality(result.order, texts), p20))
                heads.append(frozenset(result.windows[-1].indices))
        out[label] = ([statistics.fmean(col) for col in zip(*rows, strict=True)], heads)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lists", type=int, default=30)
    ap.add_argument("--n", type=int, default=100)
    args = ap.parse_args()
    cells = [(keep, m) for keep in (0.7, 0.4) for m in (20, 10, 5)]
    keeps, ms = [keep for keep, _ in cells], [m for _, m in cells]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(cell, keeps, ms, [args.n] * 6, [args.lists] * 6))
    lines = [
        f"n = {args.n}, window 20 (a first round of blocks, then one head window); "
        f"{args.lists} lists per cell; noise model position_bias=0.5 at two levels of `keep` "
        "(the share of each answer kept in true order: 0.7 is benchmarks/strategies.py's). "
        "Heads differ: lists where that choice's head held other items than Kemeny's. "
        "P@20: the true top 20 in the answer's top 20 (the head round's items).",
        "",
        "| keep | m | head picked by | heads differ | Kendall tau | P@10 | P@20 | nDCG@10 |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (keep, m), out in zip(cells, results, strict=True):
        exact = out["Kemeny (waits)"][1]
        for label, (means, heads) in out.items():
            differ = sum(a != b for a, b in zip(heads, exact, strict=True))
            tau, p10, ndcg, p20 = means
            lines.append(
                f"| {keep} | {m} | {label} | {differ}/{len(heads)} | {tau:.3f} | {p10:.3f} | "
                f"{p20:.3f} | {ndcg:.3f} |"
            )
            sys.stdout.write(lines[-1] + "\n")
    write_section("head-choice", "\n".join(lines))


if __name__ == "__main__":
    main()
