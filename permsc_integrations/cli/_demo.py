"""``permsc demo``: PSC on a small shipped example, showing every sampled ranking.

Runs on the default backend: the embedded Qwen2.5-Coder-1.5B (offline, CPU) unless an OpenAI
key or base URL is set. A 1.5B model disagrees with itself from one shuffle to the next: the
consensus is steadier than any one sample, which is what the demo shows.

Example:
    $ permsc demo            # about 40 s on 2 quiet bfloat16 CPU cores, model load included
    $ permsc demo --backend openai:gpt-4o-mini -m 10
"""

from __future__ import annotations

import argparse
import time
from importlib.resources import files
from typing import TYPE_CHECKING

from permsc_integrations._calls.bridge import run_sync
from permsc_integrations.backends.base import BatchBackend
from permsc_integrations.cli._common import (
    Query,
    add_backend_arguments,
    add_ranking_arguments,
    answer_cap,
    backend_spec,
    build_backend,
    call_limits,
    parse_line,
    ranker_options,
    report,
    say,
)
from permsc_integrations.results import RankingResult, Sample

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations.cli._common import Subparsers

__all__ = ["add_parser", "run", "demo_query"]

DEMO_PERMUTATIONS = 6


DEMO_FLAGS = ("num_permutations", "aggregator", "prompt", "scoring", "seed", "max_calls")
"""The ranking options the demo takes (from the declaration); the rest keep their defaults."""


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("demo", help="rank a small shipped example and show each sample")
    # the demo's one departure from the declared defaults: fewer shuffles, for a CPU model
    add_ranking_arguments(parser, DEMO_FLAGS, defaults={"num_permutations": DEMO_PERMUTATIONS})
    add_backend_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def demo_query() -> Query:
    """The shipped example (``permsc_integrations/data/demo.jsonl``)."""
    text = files("permsc_integrations").joinpath("data/demo.jsonl").read_text(encoding="utf-8")
    return parse_line(text.splitlines()[0], 1)


def _label(query: Query, ranking: tuple[int, ...]) -> str:
    return " > ".join(query.docids[i] for i in ranking) or "(nothing)"


def _sample_line(number: int, query: Query, sample: Sample) -> str:
    head = f"  {number:>2}. [{sample.status.value:<7}]"
    if not sample.ok:
        reason = sample.error or "no ranking"
        return f"{head} failed: {reason.splitlines()[0][:120]} | raw: {sample.raw_text[:80]!r}"
    shown = f"{len(sample.ranking)} of {len(query.docids)}"
    return f"{head} {_label(query, sample.ranking)}  ({shown} items)"


def _print_result(query: Query, result: RankingResult, spec: str, m: int, seconds: float) -> None:
    say(f"Query: {query.query}")
    say(f"Backend: {spec}; m={m} permutations; {seconds:.1f} s\n")
    say("Original order:")
    for k, docid in enumerate(query.docids):
        say(f"  {k + 1}. {docid}  {query.texts[k][:90]}")
    say("\nSampled rankings, mapped back to the original items (best first):")
    for n, sample in enumerate(result.samples, start=1):
        say(_sample_line(n, query, sample))
    say("\nAggregated ranking:")
    for r, i in enumerate(result.order, start=1):
        say(f"  {r}. {query.docids[i]}  {query.texts[i][:90]}")
    samples = result.samples
    full = sum(s.status.value == "ok" for s in samples)
    partial = sum(s.status.value == "partial" for s in samples)
    say(
        f"\nSamples parsed: {full + partial} of {len(samples)} ({full} full, {partial} partial); "
        f"{len(samples) - full - partial} failed. Agreement with the consensus (mean Kendall "
        f"tau): {result.confidence:.2f}. {calls_line(result)}, prompt tokens: "
        f"{result.usage.prompt_tokens}."
    )


def calls_line(result: RankingResult) -> str:
    """What the model was asked: its calls, one a prompt it answered, batched or not (asks,
    re-asks and retries; cache hits left out), the batches that carried them where fewer,
    and the retries apart.

    >>> from permsc_integrations.results import ParseStatus, Usage, WindowResult
    >>> def ranked(calls, asks):
    ...     samples = tuple(Sample((0,), (0,), "", ParseStatus.OK, attempts=a) for a in asks)
    ...     window = WindowResult(0, (0,), (0,), samples, 1.0)
    ...     return calls_line(RankingResult((0,), (1.0,), (window,), usage=Usage(calls=calls)))
    >>> for calls, asks in [(6, [1] * 6), (7, [1] * 6)]:
    ...     print(ranked(calls, asks))
    Model calls: 6
    Model calls: 7 (6 prompts, retries included)
    """
    calls, batches = result.usage.calls, result.usage.batches
    prompts = sum(s.attempts for s in result.samples) - result.usage.cached_calls
    carried = f" in {batches} batch{'es' * (batches > 1)}" if 0 < batches < calls else ""
    if calls > prompts:
        return f"Model calls: {calls}{carried} ({prompts} prompts, retries included)"
    return f"Model calls: {calls}{carried}"


def run(args: argparse.Namespace) -> int:
    # lazy: start-up time of every permsc command
    from permsc_integrations._ranker.ranker import PSCRanker

    query = demo_query()
    spec = backend_spec(args)
    options = ranker_options(args, spec)
    options.update(call_limits(args, spec, answer_cap(len(query.texts))))
    options["min_successful"] = 1
    backend = build_backend(args)
    try:
        ranker = PSCRanker(backend, **options)
        batched = " (the model loads first, then answers them in one batch)"
        report(
            f"ranking {len(query.texts)} passages in {args.num_permutations} shuffled prompts "
            f"on {backend.name}{batched if isinstance(backend, BatchBackend) else ''} ..."
        )
        started = time.perf_counter()
        result = run_sync(ranker.arank, query.query, list(query.texts))
        seconds = time.perf_counter() - started
    finally:
        run_sync(backend.aclose)
    _print_result(query, result, backend.name, args.num_permutations, seconds)
    if backend.name == "embedded:smollm2-135m":
        say(
            "\nNote: the embedded SmolLM2-135M shows the pipeline end to end but ranks poorly; "
            "the default embedded model (qwen2.5-coder-1.5b) or --backend with a stronger model "
            "ranks (see docs/local.md)."
        )
    return 0
