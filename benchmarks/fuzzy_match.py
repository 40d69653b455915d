"""Would matching misspelt words help? Re-parse saved WordSort answers with fuzzy matching.

The 1.5B model often misspells a word it sorts ("trigonon" for "trigonum"); the parser drops
what matches no item exactly. This re-parses every saved answer line by line: a line that
names no item exactly is matched to the closest item not yet named (``difflib`` ratio at least
the cutoff, and a unique best, so nothing is invented or guessed between two), then every
aggregator is scored as in ``benchmarks/partial_answers.py`` (every answer votes). No model
calls. Writes the "fuzzy-match" section of docs/benchmarks.md.

    python benchmarks/fuzzy_match.py docs/results/wordsort-qwen.samples.jsonl
"""

from __future__ import annotations

import argparse
import difflib
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402
from partial_answers import psc_tau  # noqa: E402

from permsc_integrations.eval._report import paired_wilcoxon  # noqa: E402
from permsc_integrations.eval._samples import ListSamples, read_samples  # noqa: E402

CUTOFFS = (None, 0.9, 0.8, 0.7)  # None: exact matching only, as the library parses
BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


def closest(word: str, free: Sequence[str], cutoff: float) -> str | None:
    """The one free item closest to ``word`` with a ratio of at least ``cutoff``, if unique."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, word, f).ratio(), f) for f in free), reverse=True
    )
    if not scored or scored[0][0] < cutoff:
        return None
    if len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None
    return scored[0][1]


def reparse(text: str, shown: Sequence[str], cutoff: float | None) -> list[int]:
    """Prompt positions named by the answer's lines, best first; fuzzy above ``cutoff``."""
    keys = [w.casefold() for w in shown]
    lines = [BULLET.sub("", line).strip().rstrip(".").casefold() for line in text.splitlines()]
    lines = [line for line in lines if line]
    exact = {keys.index(line) for line in lines if line in keys}
    ranking: list[int] = []
    for line in lines:
        if line in keys:
            position = keys.index(line)
        elif cutoff is not None:
            free = [k for i, k in enumerate(keys) if i not in exact and i not in ranking]
            match = closest(line, free, cutoff)
            position = keys.index(match) if match is not None else -1
        else:
            position = -1
        if position >= 0 and position not in ranking:
            ranking.append(position)
    return ranking


def reparsed(samples: ListSamples, cutoff: float | None) -> ListSamples:
    """The list with each answer re-parsed, in original indices (empty when nothing matched)."""
    out = []
    for perm, text in zip(samples.permutations, samples.raw_texts, strict=True):
        shown = [samples.example.items[i] for i in perm]
        out.append(tuple(perm[p] for p in reparse(text, shown, cutoff)))
    return replace(samples, rankings=tuple(out))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("samples")
    parser.add_argument("--aggregators", default="kemeny,copeland,borda,rrf")
    parser.add_argument("--section", default="fuzzy-match")
    args = parser.parse_args()
    header, found = read_samples(args.samples)
    lists = list(found.values())
    methods = args.aggregators.split(",")
    same = sum(
        r == saved
        for s in lists
        for r, saved in zip(reparsed(s, None).rankings, s.rankings, strict=True)
    )
    total = sum(len(s.rankings) for s in lists)
    lines = [
        "## Fuzzy matching of misspelt words: measured, not adopted\n",
        f"{len(lists)} lists of `{args.samples}` ({header.get('backend')}, m={header.get('m')}), "
        "every answer re-parsed line by line (no model calls). *exact*: only exact matches, "
        f"which reproduces the saved parse for {same} of {total} answers; a cutoff: a line that "
        "names no item takes the unique closest unnamed item at that `difflib` ratio or above. "
        "Mean Kendall tau per aggregator; *complete*: answers naming every item.\n",
        f"*{methods[0]} vs exact*: lists better / worse, Wilcoxon p.\n",
        "| matching | complete | " + " | ".join(methods) + f" | {methods[0]} vs exact |",
        "|---|---:|" + "---:|" * len(methods) + "---:|",
    ]
    exact: list[float] = []
    for cutoff in CUTOFFS:
        parsed = [reparsed(s, cutoff) for s in lists]
        complete = sum(len(r) == len(s.example.items) for s in parsed for r in s.rankings)
        per_method = {m: [psc_tau(s, m, 0.0)[0] for s in parsed] for m in methods}
        first = per_method[methods[0]]
        exact = exact or first
        better = sum(a > b for a, b in zip(first, exact, strict=True))
        worse = sum(a < b for a, b in zip(first, exact, strict=True))
        test = f"{better} / {worse}, p {paired_wilcoxon(first, exact):.2g}" if cutoff else ""
        cells = [f"{statistics.fmean(t):.3f}" for t in per_method.values()]
        name = "exact" if cutoff is None else f"ratio >= {cutoff}"
        lines.append(f"| {name} | {complete} of {total} | " + " | ".join(cells) + f" | {test} |")
    text = "\n".join(lines)
    write_section(args.section, text)
    print(text)  # noqa: T201


if __name__ == "__main__":
    main()
