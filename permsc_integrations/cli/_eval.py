"""``permsc eval``: single-pass vs PSC on the paper's tasks, on TREC data, or offline runs.

Example:
    $ permsc eval mathsort --backend embedded -m 20 --limit 10 --bias-map bias.png --json out.json
    $ permsc eval trec --candidates dl19.bm25.top100.jsonl --qrels qrels.txt --backend openai:MODEL
    $ permsc eval --runs a.txt b.txt c.txt --qrels qrels.dl19-passage.txt --markdown table.md
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from permsc_integrations._calls.bridge import run_sync
from permsc_integrations.aggregators import get
from permsc_integrations.cli._common import (
    add_backend_arguments,
    add_ranking_arguments,
    backend_spec,
    build_backend,
    call_limits,
)
from permsc_integrations.cli._eval_output import emit_reports, progress, samples_log
from permsc_integrations.cli._eval_trec import (
    first_token_offline,
    offline_runs,
    passages_offline,
    trec,
)
from permsc_integrations.errors import ConfigurationError

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations._options.keywords import RankingKeywords
    from permsc_integrations.backends.base import Backend
    from permsc_integrations.cli._common import Subparsers
    from permsc_integrations.eval import EvalReport, ListSamples, RunRecord, SortingDataset

__all__ = [
    "add_parser",
    "run",
    "sorting_max_tokens",
    "sorting_config",
    "load_dataset",
    "RANKING_FLAGS",
]

TASKS = ("mathsort", "wordsort", "gsm8ksort", "trec")


RANKING_FLAGS = (
    "num_permutations",
    "temperature",
    "seed",
    "max_concurrency",
    "max_words",
    "window_size",
    "step",
    "scoring",
    "max_calls",
)
"""The ranking options ``permsc eval`` takes as flags: ``permsc rank``'s flags (names, help,
types and defaults from :class:`~permsc_integrations.RankingOptions`), parsed with
their declared defaults filled in; ``--temperature`` takes one value or more."""

USE = """how eval uses the ranking flags (declared once; the same as in 'permsc rank'):
  -m                  shuffled answers per list (sorting; trec with --samples: per query,
                      the first in first-stage order) or per window (trec)
  --temperature       one or more: a run per temperature (--samples holds one)
  --window-size/--step
                      trec: the paper's set-up, RankGPT's sliding windows back to front (the
                      one departure from the ranker's defaults, which use blocks:
                      permsc_integrations.eval._runner.TREC_SETUP); trec --samples: one
                      window of --depth passages, and with --scoring first_token the block
                      size each order is cut into; sorting: one window per list
  --max-words         trec --samples: passage truncation in words
  --max-calls         model calls per list (sorting) or query (trec) at most
"""


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "eval",
        help="measure single-pass vs PSC (sorting tasks, TREC, or existing runs)",
        description="Evaluate single-pass ranking vs PSC over the same samples.",
        epilog=USE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task", nargs="?", choices=TASKS, help="task (omit with --runs)")
    parser.add_argument(
        "--data", help="sorting data file or folder (default ../shared/data/perm-sc)"
    )
    parser.add_argument(
        "--generate", type=int, metavar="N", help="mathsort/wordsort: N fresh lists"
    )
    parser.add_argument("--limit", type=int, help="evaluate only the first N lists / queries")
    parser.add_argument(
        "--m-sweep", help="comma-separated m values to re-aggregate (e.g. 1,5,10,20)"
    )
    parser.add_argument("--aggregators", help="comma-separated (default: eval.runner.AGGREGATORS)")
    parser.add_argument("--candidates", help="trec: JSONL candidates {qid, query, candidates}")
    parser.add_argument("--qrels", help="TREC qrels (trec task and --runs)")
    parser.add_argument("--depth", type=int, default=100, help="trec: candidates per query")
    parser.add_argument("--runs", nargs="+", help="offline: TREC run files to aggregate per query")
    parser.add_argument(
        "--first-stage", help="offline: the first-stage run the runs reranked (tie-break)"
    )
    parser.add_argument("--write-runs", help="folder for the produced TREC runs")
    parser.add_argument("--bias-map", help="sorting: heatmap PNG (a CSV is written beside it)")
    parser.add_argument(
        "--samples", help="sorting: save every raw answer to this JSONL file as it arrives"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the --samples file (same configuration); start it if it does not exist",
    )
    parser.add_argument(
        "--from-samples", metavar="FILE", help="sorting: re-score a samples file, no model calls"
    )
    parser.add_argument("--sweep-png", help="plot the m sweep (score against m) as a PNG")
    parser.add_argument("--json", help="write the results as JSON")
    parser.add_argument("--markdown", help="write the results as a markdown table")
    parser.add_argument("--no-progress", action="store_true")
    add_ranking_arguments(parser, RANKING_FLAGS, filled=True, several={"temperature"})
    add_backend_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def load_dataset(args: argparse.Namespace) -> SortingDataset:
    """The sorting lists the flags name: --generate N fresh ones, or --data's (--limit)."""
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import generate_mathsort, generate_wordsort, load_sorting

    if args.generate:
        make: dict[str, Callable[..., SortingDataset]] = {
            "mathsort": generate_mathsort,
            "wordsort": generate_wordsort,
        }
        if args.task not in make:
            raise ConfigurationError("--generate works for mathsort and wordsort")
        return make[args.task](args.generate, seed=args.seed)
    return load_sorting(args.task, args.data).head(args.limit)


def _score(
    args: argparse.Namespace, lists: list[ListSamples], task: str, config: Mapping[str, object]
) -> EvalReport:
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import score_sorting

    sweep = [int(k) for k in args.m_sweep.split(",")] if args.m_sweep else []
    return score_sorting(
        lists, aggregators=args.aggregators.split(","), m_sweep=sweep, task=task, config=config
    )


def sorting_config(
    args: argparse.Namespace, dataset: SortingDataset, backend_name: str, temperature: float
) -> RunRecord:
    """The ``run`` record of a sorting samples file: what ``--resume`` compares."""
    task = dataset.examples[0].task
    config: RunRecord = {
        "task": task,
        "dataset": dataset.name,
        "backend": backend_name,
        "m": args.num_permutations,
        "seed": args.seed,
        "temperature": temperature,
        "prompt": task,
    }
    if args.scoring == "first_token":
        config |= {"scoring": "first_token", "prompt": "first_token"}
    return config


def _one_temperature(
    args: argparse.Namespace,
    dataset: SortingDataset,
    backend: Backend,
    temperature: float,
    options: RankingKeywords,
) -> tuple[EvalReport, list[ListSamples]]:
    """Collect (saving and resuming with --samples) and score one temperature."""
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import acollect_samples

    config = sorting_config(args, dataset, backend.name, temperature)
    log, done = samples_log(args, config)
    try:
        lists = run_sync(
            acollect_samples,
            dataset,
            backend,
            m=args.num_permutations,
            seed=args.seed,
            temperature=temperature,
            max_concurrency=args.max_concurrency,
            progress=progress(args, f"{dataset.name} T={temperature}"),
            log=log,
            done=done,
            **options,
        )
    finally:
        if log is not None:
            log.close()
    return _score(args, lists, f"{dataset.name} (T={temperature})", config), lists


def _observations(
    lists: list[ListSamples], n: int
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(permutation, ranking) of every parsed answer on the longest lists (for the bias map)."""
    return [
        (p, r)
        for s in lists
        for p, r in zip(s.permutations, s.rankings, strict=True)
        if r and len(p) == n
    ]


def _from_samples(args: argparse.Namespace) -> int:
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import read_samples

    header, found = read_samples(args.from_samples)
    if header.get("scoring") == "first_token":  # lists being topped up count with what they have
        found = read_samples(args.from_samples, partial=True)[1]
    lists = list(found.values())
    if not lists:
        raise ConfigurationError(f"{args.from_samples} holds no complete list")
    if header.get("scoring") == "first_token":
        return first_token_offline(args, header, lists)
    if header.get("task") == "trec":
        return passages_offline(args, header, lists)
    task = f"{header.get('dataset', header.get('task', '?'))} (T={header.get('temperature')})"
    report = _score(args, lists, task, {k: v for k, v in header.items() if k != "type"})
    _bias_map(args, lists, header.get("backend", "?"))
    emit_reports(args, [report])
    return 0


def _bias_map(args: argparse.Namespace, lists: list[ListSamples], backend_name: str) -> None:
    if not args.bias_map:
        return
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import bias_map

    n = max(len(s.example.items) for s in lists)
    bias = bias_map(_observations(lists, n), n)
    name = lists[0].example.task
    bias.to_png(args.bias_map, title=f"{name}, {backend_name}: reversal rate")
    bias.to_csv(Path(args.bias_map).with_suffix(".csv"))


def _shared(args: argparse.Namespace) -> RankingKeywords:
    """The ranking flags every task passes to its rankers as they are."""
    return {"scoring": args.scoring, "max_calls": args.max_calls}


def sorting_max_tokens(n_items: int) -> int:
    """A local model's answer cap for a sorting list of ``n_items`` (about 10 tokens an item)."""
    return 12 + 10 * n_items


def _sorting(args: argparse.Namespace) -> int:
    dataset = load_dataset(args)
    spec = backend_spec(args)
    backend = build_backend(args)
    n = max(len(e.items) for e in dataset.examples)
    options: RankingKeywords = {**call_limits(args, spec, sorting_max_tokens(n)), **_shared(args)}
    reports, collected = [], []
    try:
        for temperature in args.temperature:
            report, lists = _one_temperature(args, dataset, backend, temperature, options)
            reports.append(report)
            collected += lists
    finally:
        run_sync(backend.aclose)
    _bias_map(args, collected, backend.name)
    emit_reports(args, reports)
    return 0


def compared(args: argparse.Namespace) -> str:
    """The aggregators an evaluation compares: ``--aggregators``, or the evaluation's own
    (:data:`permsc_integrations.eval._runner.AGGREGATORS`)."""
    if args.aggregators is not None:
        return str(args.aggregators)
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import AGGREGATORS

    return ",".join(AGGREGATORS)


def run(args: argparse.Namespace) -> int:
    """Dispatch to the offline, sorting or TREC evaluation."""
    args.aggregators = compared(args)
    for name in args.aggregators.split(","):
        get(name)  # an unknown name fails now, not after every model call
    if args.runs:
        return offline_runs(args)
    if args.from_samples:
        return _from_samples(args)
    if args.task is None:
        raise ConfigurationError("name a task (mathsort, wordsort, gsm8ksort, trec) or pass --runs")
    return trec(args) if args.task == "trec" else _sorting(args)
