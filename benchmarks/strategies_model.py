"""Sliding window vs blocks with a real model: the embedded Qwen2.5-Coder-1.5B sorting long
WordSort lists (40 words, generated), window 10, on this machine's CPU.

Each list is ranked by both strategies with the same options (m = 10, window 10, step 5,
Kemeny); the results are appended to a JSONL file as they come (``--out``; a re-run skips the
lists already there), then summarised: Kendall tau of the whole order against alphabetical
order, precision of the top 10, calls and wall time. Writes the "strategies-model" section of
docs/benchmarks.md.

Run: ``.venv/bin/python benchmarks/strategies_model.py --lists 10`` (about 4 minutes a list on
a CPU with native bfloat16; run so far on 8 lists, see docs/strategies.md). A ranking that
fails (a window with no usable answer) scores 0 and keeps its error.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.cli._eval import sorting_max_tokens  # noqa: E402
from permsc_integrations.errors import PermscError  # noqa: E402
from permsc_integrations.eval import kendall_tau_b  # noqa: E402
from permsc_integrations.eval._generators import generate_wordsort  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def rank(strategy: str, example, args: argparse.Namespace) -> dict:
    began = time.perf_counter()
    with PSCRanker(
        f"embedded:{args.model}",
        prompt="wordsort",
        strategy=strategy,
        num_permutations=args.m,
        window_size=10,
        step=5,
        min_successful=1,
        timeout=None,
        max_tokens=sorting_max_tokens(10),
    ) as ranker:
        try:
            result = ranker.rank("", list(example.items))
        except PermscError as exc:  # a window with no usable answer: the list scores 0
            return {
                "list": example.id,
                "strategy": strategy,
                "m": args.m,
                "tau": 0.0,
                "p10": 0.0,
                "calls": exc.usage.calls if exc.usage else 0,
                "seconds": time.perf_counter() - began,
                "error": str(exc)[:200],
            }
    truth = example.truth
    return {
        "list": example.id,
        "strategy": strategy,
        "m": args.m,
        "tau": kendall_tau_b(result.order, example.keys),
        "p10": len(set(result.order[:10]) & set(truth[:10])) / 10,
        "calls": result.usage.calls,
        "seconds": time.perf_counter() - began,
    }


def summary(rows: list[dict]) -> str:
    lines = [
        "| strategy | lists | Kendall tau | P@10 | calls per list | seconds per list |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for strategy in ("sliding", "blocks"):
        mine = [r for r in rows if r["strategy"] == strategy]
        if mine:
            mean = {
                k: statistics.fmean(r[k] for r in mine) for k in ("tau", "p10", "calls", "seconds")
            }
            lines.append(
                f"| {strategy} | {len(mine)} | {mean['tau']:.3f} | {mean['p10']:.2f} | "
                f"{mean['calls']:.0f} | {mean['seconds']:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lists", type=int, default=10)
    ap.add_argument("-m", type=int, default=10)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "strategies-qwen.jsonl")
    args = ap.parse_args()
    data = generate_wordsort(args.lists, seed=7, consecutive=20, random_count=20)
    done = [json.loads(x) for x in args.out.read_text().splitlines()] if args.out.exists() else []
    seen = {(r["list"], r["strategy"]) for r in done}
    with args.out.open("a") as out:
        for example in data.examples:
            for strategy in ("sliding", "blocks"):
                if (example.id, strategy) not in seen:
                    row = rank(strategy, example, args)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    done.append(row)
                    sys.stdout.write(json.dumps(row) + "\n")
                    sys.stdout.flush()
    body = (
        f"The embedded {args.model} sorting {args.lists} generated WordSort lists of 40 "
        f"words (seed 7), window 10, step 5, m = {args.m}, Kemeny; per-list rows in "
        f"`{args.out.resolve().relative_to(ROOT)}`; *calls*: batched generate calls.\n\n"
        + summary(done)
    )
    write_section("strategies-model", body)


if __name__ == "__main__":
    main()
