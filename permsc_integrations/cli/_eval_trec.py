"""``permsc eval`` on passage ranking: TREC runs aggregated offline, PSC with the sliding
window, and one window per query with every answer saved (``--samples``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from permsc_integrations._calls.bridge import run_sync
from permsc_integrations.cli._common import answer_cap, backend_spec, build_backend, call_limits
from permsc_integrations.cli._eval_output import emit_reports, progress, samples_log
from permsc_integrations.errors import ConfigurationError

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations._options.keywords import RankingKeywords
    from permsc_integrations.eval import ListSamples, Qrels, Query, Run, RunRecord

__all__ = ["offline_runs", "trec", "passages_offline", "first_token_offline", "passages_config"]


def _write_runs(args: argparse.Namespace, runs: Mapping[str, Run]) -> None:
    if not args.write_runs:
        return
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import write_run

    folder = Path(args.write_runs)
    folder.mkdir(parents=True, exist_ok=True)
    for name, run in runs.items():
        write_run(run, folder / f"{name}.txt", tag=name)


def offline_runs(args: argparse.Namespace) -> int:
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import aggregate_runs, read_qrels, read_run

    if not args.qrels:
        raise ConfigurationError("--runs needs --qrels to score against")
    runs: dict[str, Run] = {}
    for number, path in enumerate(args.runs, 1):
        name = Path(path).stem
        runs[name if name not in runs else f"{name}-{number}"] = read_run(path)
    first_stage = read_run(args.first_stage) if args.first_stage else None
    report, merged = aggregate_runs(
        runs,
        read_qrels(args.qrels),
        aggregators=args.aggregators.split(","),
        first_stage=first_stage,
        progress=progress(args, "aggregating"),
    )
    _write_runs(args, merged)
    emit_reports(args, [report])
    return 0


def passages_offline(args: argparse.Namespace, header: RunRecord, lists: list[ListSamples]) -> int:
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import read_qrels, score_passages

    if not args.qrels:
        raise ConfigurationError("re-scoring passage samples needs --qrels")
    sweep = [int(k) for k in args.m_sweep.split(",")] if args.m_sweep else []
    config = {k: v for k, v in header.items() if k != "type"}
    report = score_passages(
        lists,
        read_qrels(args.qrels),
        aggregators=args.aggregators.split(","),
        m_sweep=sweep,
        config=config,
    )
    emit_reports(args, [report])
    return 0


def first_token_offline(
    args: argparse.Namespace, header: RunRecord, lists: list[ListSamples]
) -> int:
    """Score a first-token samples file (:mod:`.eval._first_token`): nDCG@10 against the
    qrels for passages, Kendall tau for sorting lists."""
    # lazy: start-up time of every permsc command
    from permsc_integrations import eval as evaluation

    passages = header.get("task") == "trec"
    if passages:
        if not args.qrels:
            raise ConfigurationError("re-scoring passage samples needs --qrels")
        qrels = evaluation.read_qrels(args.qrels)
        lists = [s for s in lists if s.example.id in qrels]

        def metric(order: Sequence[int], s: ListSamples) -> float:
            return evaluation.ndcg_of(order, s, qrels)
    else:

        def metric(order: Sequence[int], s: ListSamples) -> float:
            return evaluation.kendall_tau_b(list(order), s.example.keys)

    n = max(len(s.example.items) for s in lists)
    table = evaluation.score_first_token(
        lists,
        metric,
        metric_name="ndcg@10" if passages else "kendall_tau",
        priors=evaluation.read_priors(args.from_samples),
        window=int(header.get("window") or n),
        passages=passages,
        m_values=[int(k) for k in args.m_sweep.split(",")] if args.m_sweep else (1, 5, 10),
        aggregators=args.aggregators.split(","),
        config={k: v for k, v in header.items() if k != "type"},
    )
    markdown = table.to_markdown(scale=100.0 if passages else 1.0, digits=2 if passages else 3)
    sys.stdout.write(markdown)
    if args.markdown:
        Path(args.markdown).write_text(markdown, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(table.to_dict(), indent=2) + "\n")
    return 0


def passages_config(args: argparse.Namespace, backend_name: str) -> RunRecord:
    """The ``run`` record of a passages samples file: what ``--resume`` compares (with
    first-token scoring, ``window``: the block size each order is cut into)."""
    config: RunRecord = {
        "task": "trec",
        "dataset": Path(args.candidates).name,
        "backend": backend_name,
        "m": args.num_permutations,
        "seed": args.seed,
        "temperature": args.temperature[0],
        "prompt": "rankgpt",
        "depth": args.depth,
        "max_words": args.max_words,
    }
    if args.scoring == "first_token":
        window = min(args.window_size, args.depth)
        config |= {"scoring": args.scoring, "prompt": "first_token", "window": window}
    return config


def _passages(args: argparse.Namespace, queries: list[Query], qrels: Qrels) -> int:
    """One window per query, every answer saved to --samples (resumable)."""
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import acollect_passages, score_passages

    backend = build_backend(args)
    config = passages_config(args, backend.name)
    log, done = samples_log(args, config)
    spec = backend_spec(args)
    try:
        lists = run_sync(
            acollect_passages,
            queries,
            backend,
            m=args.num_permutations,
            log=log,
            done=done,
            progress=progress(args, "queries"),
            seed=args.seed,
            temperature=args.temperature[0],
            max_words=args.max_words,
            max_concurrency=args.max_concurrency,
            **call_limits(args, spec, answer_cap(args.depth)),
            scoring=args.scoring,
            window=config.get("window"),
        )
    finally:
        if log is not None:
            log.close()
        run_sync(backend.aclose)
    sweep = [int(k) for k in args.m_sweep.split(",")] if args.m_sweep else []
    aggregators = args.aggregators.split(",")
    emit_reports(
        args, [score_passages(lists, qrels, aggregators=aggregators, m_sweep=sweep, config=config)]
    )
    return 0


def trec(args: argparse.Namespace) -> int:
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import aevaluate_trec, read_candidates, read_qrels

    if not (args.candidates and args.qrels):
        raise ConfigurationError("the trec task needs --candidates and --qrels")
    queries = read_candidates(args.candidates, depth=args.depth)[: args.limit]
    if args.samples:
        return _passages(args, queries, read_qrels(args.qrels))
    spec = backend_spec(args)
    backend = build_backend(args)
    options: RankingKeywords = {
        **call_limits(args, spec, answer_cap(args.window_size)),
        "scoring": args.scoring,
        "max_calls": args.max_calls,
    }
    try:
        report, runs = run_sync(
            aevaluate_trec,
            queries,
            read_qrels(args.qrels),
            backend,
            m=args.num_permutations,
            window_size=args.window_size,
            step=args.step,
            temperature=args.temperature[0],
            seed=args.seed,
            max_words=args.max_words,
            aggregator=args.aggregators.split(",")[0],
            max_concurrency=args.max_concurrency,
            progress=progress(args, "queries"),
            **options,
        )
    finally:
        run_sync(backend.aclose)
    _write_runs(args, runs)
    emit_reports(args, [report])
    return 0
