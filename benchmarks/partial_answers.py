"""Should a partial answer vote? Re-aggregate saved real answers with a coverage floor.

Reads a samples file written by ``permsc eval --samples`` (no model calls). For each floor
``c`` (the ``min_coverage`` option: a partial answer must rank at least ``c`` of a list's items
to count), every aggregator's mean Kendall tau over the lists, with how many answers vote.
Writes the "partial-answers" section of docs/benchmarks.md.

    python benchmarks/partial_answers.py docs/results/wordsort-qwen.samples.jsonl
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations import aggregate  # noqa: E402
from permsc_integrations.eval import kendall_tau_b  # noqa: E402
from permsc_integrations.eval._samples import ListSamples, read_samples  # noqa: E402

FLOORS = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0)


def psc_tau(samples: ListSamples, method: str, floor: float) -> tuple[float, int]:
    """Tau of the aggregate of the answers ranking at least ``floor`` of the items, and how many
    answers voted (no voter: the list scores 0, as an unparseable single answer does)."""
    n = len(samples.example.items)
    votes = [r for r in samples.rankings if r and len(r) >= math.ceil(floor * n)]
    if not votes:
        return 0.0, 0
    order = aggregate(votes, method=method, n_items=n)
    return kendall_tau_b(order, samples.example.keys), len(votes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("samples")
    parser.add_argument("--aggregators", default="kemeny,copeland,borda,rrf")
    parser.add_argument("--section", default="partial-answers")
    args = parser.parse_args()
    header, found = read_samples(args.samples)
    lists = list(found.values())
    methods = args.aggregators.split(",")
    lines = [
        "## Partial answers: does a coverage floor help? (`min_coverage`)\n",
        f"{len(lists)} lists of `{args.samples}` ({header.get('backend')}, m={header.get('m')}), "
        "re-aggregated offline: only answers ranking at least the given share of a list's items "
        "vote. Mean Kendall tau per aggregator; *votes*: answers counted, of all answers.\n",
        "| min_coverage | votes | " + " | ".join(methods) + " |",
        "|---:|---:|" + "---:|" * len(methods),
    ]
    total = sum(len(s.rankings) for s in lists)
    for floor in FLOORS:
        cells, votes = [], 0
        for method in methods:
            scored = [psc_tau(s, method, floor) for s in lists]
            cells.append(f"{sum(t for t, _ in scored) / len(lists):.3f}")
            votes = sum(v for _, v in scored)
        lines.append(f"| {floor:.1f} | {votes} of {total} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    write_section(args.section, text)
    print(text)  # noqa: T201


if __name__ == "__main__":
    main()
