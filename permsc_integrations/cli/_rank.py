"""``permsc rank``: rerank every query of a JSONL file, queries concurrently.

Example:
    $ permsc rank --input queries.jsonl --output ranked.jsonl -m 20
    $ permsc rank --input dl19.jsonl --format trec --output run.txt --backend openai:gpt-4o-mini
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from permsc_integrations._calls.bridge import run_sync
from permsc_integrations.cli._common import (
    Query,
    add_backend_arguments,
    add_ranking_arguments,
    backend_spec,
    build_backend,
    one_line,
    ranker_options,
    read_input,
    report,
)
from permsc_integrations.cli._rank_input import DuplicateQidError, check_qids
from permsc_integrations.cli._rank_output import InputOrder, OutputFile, Render, Writer
from permsc_integrations.cli._rank_progress import Progress
from permsc_integrations.cli._rank_ray import rank_queries_on_ray
from permsc_integrations.cli._rank_records import to_json, to_trec
from permsc_integrations.cli._rank_resume import Block, ResumeError, written
from permsc_integrations.errors import ConfigurationError, SpendingCapError
from permsc_integrations.results import RankingResult

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations._options.keywords import RankingKeywords
    from permsc_integrations._options.options import RankingOptions
    from permsc_integrations._ranker.ranker import PSCRanker
    from permsc_integrations.cli._common import Subparsers

__all__ = [
    "add_parser",
    "run",
    "to_json",
    "to_trec",
    "planned_samples",
    "check_qids",
    "DuplicateQidError",
    "ResumeError",
]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "rank",
        help="rerank the candidates of every query in a JSONL file",
        description="Rerank {qid, query, candidates: [{docid, text}]} (or {query, items}) lines.",
    )
    _add_files(parser)
    _add_ray_arguments(parser)
    add_ranking_arguments(parser)
    parser.add_argument(
        "--kemeny-time-limit",
        type=float,
        metavar="SECONDS",
        help="Kemeny's time per aggregation (default: 1); past it the ranking is the best "
        "found, with a warning that says how close it is proven to be",
    )
    add_backend_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def _add_files(parser: argparse.ArgumentParser) -> None:
    """Input, output and its format, the cache, progress, --resume."""
    parser.add_argument(
        "--input", "-i", required=True, help="JSONL or Parquet (.parquet) file ('-': stdin JSONL)"
    )
    parser.add_argument("--output", "-o", default="-", help="output file (default: stdout)")
    parser.add_argument(
        "--format",
        choices=("jsonl", "trec"),
        default="jsonl",
        help="jsonl records or a TREC run (qid Q0 docid rank score tag)",
    )
    parser.add_argument("--tag", default="permsc", help="run tag of the TREC format")
    parser.add_argument("--cache", help="SQLite response cache file (reused across runs)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--progress-every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="when stderr is not a terminal (logs, CI): a one-line progress report at most "
        "this often (default: 10)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the records --output holds for this input's queries (refused if it holds "
        "another input's) and rank the rest (ray: those ranked in OUTPUT.journal without a "
        "call)",
    )


def _add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: this process; ray: Ray actors (docs/scale.md)",
    )
    parser.add_argument(
        "--ray-address",
        help="a Ray cluster to join (default: RAY_ADDRESS, else a Ray started here for the job)",
    )
    parser.add_argument("--actors", type=int, default=2, help="ray: actors sharing the budget")
    parser.add_argument(
        "--ray-capacity-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="ray: stop with an error once no actor could run for this long (default: 60; "
        "more where an autoscaler adds nodes)",
    )


def planned_samples(queries: list[Query], options: RankingOptions) -> int:
    """The progress bar's total: the calls the strategy plans for every query (the most,
    under adaptive m; re-asks and retries come on top)."""
    return sum(options.plan(len(q.texts)).calls.high for q in queries)


def _render(args: argparse.Namespace) -> Render:
    if args.format == "trec":
        return lambda q, r: to_trec(q, r, args.tag)
    return lambda q, r: json.dumps(to_json(q, r), ensure_ascii=False) + "\n"


@dataclass(frozen=True, slots=True)
class Unranked:
    """The queries a run did not rank: ``failed`` (started, and failed), ``not_started``
    (left out by ``--ranker-cap``: nothing spent, ``--resume`` ranks them)."""

    failed: int = 0
    not_started: int = 0


async def _rank_all(
    ranker: PSCRanker, queries: list[Query], writer: Writer, progress: Progress
) -> Unranked:
    """Rank every query; those it did not rank. Under ``--ranker-cap`` a query starts only
    when the cap can pay for its plan (:mod:`._calls.admission`): those it leaves out spend
    nothing and are reported together, with the way to rank them."""
    # lazy: start-up time of every permsc command
    from permsc_integrations._ranker.ranker import RankRequest

    failed, refused = 0, []
    requests = [RankRequest(q.query, q.texts, id=k) for k, q in enumerate(queries)]
    outcomes = cast(  # an async generator, which arank_many's annotation does not say
        "AsyncGenerator[RankingResult | BaseException, None]",
        ranker.arank_many(requests, on_event=progress.on_event, return_exceptions=True),
    )
    async with contextlib.aclosing(outcomes):
        async for outcome in outcomes:
            request: RankRequest = getattr(outcome, "request")  # noqa: B009 - set on both kinds
            position = cast(int, request.id)  # this command numbers its requests
            if isinstance(outcome, SpendingCapError) and outcome.needed is not None:
                refused.append(outcome)
                writer.put(position, None)
            elif isinstance(outcome, BaseException):
                failed += 1
                report(f"query {queries[position].qid} failed: {one_line(outcome)}")
                writer.put(position, None)
            else:
                writer.put(position, writer.render(queries[position], outcome))
            progress.query_done()
    if refused:
        _report_refused(refused)
    return Unranked(failed, len(refused))


def _report_refused(refused: list[SpendingCapError]) -> None:
    first = refused[0]
    needed = sum(e.needed or 0 for e in refused)
    report(
        f"ranker_cap {first.limit}={first.cap:g}: {len(refused)} queries were not started (the "
        f"cap had too little left for their plans, ~{needed:g} {first.limit} in all; nothing "
        "was spent on them); rerun with --resume to rank them: what is in --output is kept"
    )


def _ranker(args: argparse.Namespace, opts: RankingKeywords) -> PSCRanker:
    # lazy: start-up time of every permsc command
    from permsc_integrations._ranker.ranker import PSCRanker

    cache = None
    if args.cache:
        # lazy: start-up time of every permsc command
        from permsc_integrations._calls.cache import SQLiteCache

        cache = SQLiteCache(args.cache)
    backend = build_backend(args)
    try:
        given: RankingKeywords = {**opts, "cache": cache}
        ranker = PSCRanker(backend, **given)
    except BaseException:
        run_sync(backend.aclose)
        raise
    return ranker


def _earlier(args: argparse.Namespace, loaded: list[Query]) -> list[Block]:
    """What ``--resume`` keeps of ``--output``: the records written for this input
    (:mod:`._rank_resume`: anything else there stops the run before a call)."""
    if not args.resume:
        return []
    if args.output == "-":
        raise ConfigurationError("--resume continues an --output file: name it")
    return written(Path(args.output), args.format, loaded)


@contextmanager
def _output(
    args: argparse.Namespace, loaded: list[Query], queries: list[Query], earlier: list[Block]
) -> Iterator[Writer]:
    """stdout in input order, or ``--output`` as queries finish (:mod:`._rank_output`)."""
    if args.output == "-":
        yield InputOrder(sys.stdout, _render(args))
        return
    at = {q.qid: k for k, q in enumerate(loaded)}
    positions = [at[q.qid] for q in queries]
    path, render = Path(args.output), _render(args)
    with OutputFile(path, render, positions, earlier, append=args.resume) as writer:
        yield writer


def run(args: argparse.Namespace) -> int:
    """Rank every good line; exit 2 if any line or query failed (after doing the rest)."""
    loaded, bad = read_input(args.input)
    if not loaded:  # before --resume or --output touch anything
        raise _nothing_to_rank(args, bad)
    check_qids(loaded, args.input)
    earlier = _earlier(args, loaded)
    done = {loaded[block.position].qid for block in earlier}
    queries = [q for q in loaded if q.qid not in done]
    if done:
        report(f"resuming: {len(done)} queries already in {args.output}")
    left = Unranked()
    with _output(args, loaded, queries, earlier) as writer:
        if queries:
            opts = _with_kemeny_time(args, ranker_options(args, backend_spec(args)))
            engine = _rank_on_ray if args.engine == "ray" else _rank_here
            left = engine(args, opts, queries, writer)
    total, failed = len(queries) + bad, left.failed
    if bad or failed or left.not_started:
        waiting = f", {left.not_started} not started" if left.not_started else ""
        ranked = len(queries) - failed - left.not_started
        report(f"ranked {ranked} of {total} queries; {bad} bad lines, {failed} failed{waiting}")
        return 2
    return 0


def _with_kemeny_time(args: argparse.Namespace, opts: RankingKeywords) -> RankingKeywords:
    """``--kemeny-time-limit``: the Kemeny aggregator with that time limit."""
    if args.kemeny_time_limit is None:
        return opts
    if not args.kemeny_time_limit > 0:
        raise ConfigurationError(f"--kemeny-time-limit must be > 0, got {args.kemeny_time_limit}")
    if opts["aggregator"] != "kemeny":
        raise ConfigurationError("--kemeny-time-limit is for --aggregator kemeny (the default)")
    # lazy: start-up time of every permsc command
    from permsc_integrations.aggregators.kemeny import kemeny_with

    return {**opts, "aggregator": kemeny_with(time_limit=args.kemeny_time_limit)}


def _nothing_to_rank(args: argparse.Namespace, bad: int) -> ConfigurationError:
    """An empty or all-bad input fails the run; an earlier run's ``--output`` is left as it
    was, and the message says so (it is not this run's)."""
    why = f"all {bad} lines are bad (reported above)" if bad else "it is empty"
    kept = ""
    if args.output != "-" and Path(args.output).exists():
        kept = f"; {args.output} was not written: it still holds an earlier run's output"
    return ConfigurationError(f"nothing to rank in {args.input}: {why}{kept}")


def _rank_here(
    args: argparse.Namespace, opts: RankingKeywords, queries: list[Query], writer: Writer
) -> Unranked:
    ranker = _ranker(args, opts)
    planned = planned_samples(queries, ranker.options)
    progress = Progress(queries, planned, not args.no_progress, args.progress_every)
    try:
        return run_sync(_rank_all, ranker, queries, writer, progress)
    finally:
        progress.close()
        run_sync(ranker.backend.aclose)


def _rank_on_ray(
    args: argparse.Namespace, opts: RankingKeywords, queries: list[Query], writer: Writer
) -> Unranked:
    """The same records through Ray actors (permsc_integrations.ray._rows), written as they
    finish; every row to OUTPUT.journal as it finishes (cli/_rank_journal.py)."""
    # lazy: start-up time of every permsc command
    from permsc_integrations._options.options import RankingOptions

    planned = planned_samples(queries, RankingOptions.from_kwargs(**opts))
    progress = Progress(queries, planned, not args.no_progress, args.progress_every)
    try:
        return Unranked(rank_queries_on_ray(args, opts, queries, writer, progress.row_done))
    finally:
        progress.close()
