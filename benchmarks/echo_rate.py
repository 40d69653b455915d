"""How often does a model repeat the order it was shown? Count echoes in saved answers.

An answer *echoes* when the items it names appear in exactly the order of its prompt (a
partial answer counts when the items it kept are in prompt order). A model that echoes gives
PSC random permutations to aggregate (docs/reproduction.md). Reads samples files written by
``permsc eval --samples`` (sorting or passages); no model calls.

    python benchmarks/echo_rate.py docs/results/*-qwen.samples.jsonl
"""

from __future__ import annotations

import argparse

from permsc_integrations.eval._samples import read_samples


def echo_rate(path: str) -> tuple[int, int]:
    """``(echoes, parsed answers)`` in one samples file."""
    _, found = read_samples(path)
    parsed = echoes = 0
    for samples in found.values():
        for shown, ranking in zip(samples.permutations, samples.rankings, strict=True):
            if not ranking:
                continue
            parsed += 1
            named = set(ranking)
            echoes += list(ranking) == [i for i in shown if i in named]
    return echoes, parsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("samples", nargs="+")
    args = parser.parse_args()
    for path in args.samples:
        echoes, parsed = echo_rate(path)
        print(f"{path}: {echoes} of {parsed} parsed answers echo ({echoes / parsed:.0%})")  # noqa: T201


if __name__ == "__main__":
    main()
