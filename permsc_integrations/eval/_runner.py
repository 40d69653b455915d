"""Measure whether PSC helps a model: single-pass runs vs PSC over the *same* samples.

Sorting tasks: every list is shown ``m`` times, each time shuffled (one PSC window). Each
answer alone is a single-pass run (run ``k`` = the ``k``-th shuffle of every list, so the
report gives the median and max over ``m`` runs, as the paper's tables); aggregating the
answers is PSC. Every aggregator is scored on the same answers, and a sweep over ``m``
aggregates the first ``m`` answers. Metric: Kendall tau against the tie-aware truth
(:func:`~permsc_integrations.eval._datasets.kendall_tau_b`).

Passages: nDCG@10 (trec_eval semantics) of the first stage, of a single RankGPT pass over
the first-stage order (``num_permutations=1``, identity order), and of PSC with the
sliding window; or, offline, of several existing runs and their aggregates.

Example:
    >>> from permsc_integrations import Completion
    >>> from permsc_integrations.eval._generators import generate_mathsort
    >>> class Sorter:  # an in-process backend that sorts perfectly
    ...     name = "sorter"
    ...     async def acomplete(self, messages, settings):
    ...         text = messages[-1]["content"].split(": ", 1)[1].split(".\\n")[0]
    ...         items = sorted(text.split(", "), key=lambda e: eval(e))
    ...         return Completion(text=", ".join(items))
    ...     async def aclose(self): pass
    >>> report = evaluate_sorting(generate_mathsort(2, seed=0), Sorter(), m=3)
    >>> report.single_median, report.mean("kemeny")
    (1.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import anyio

from permsc_integrations._calls.bridge import run_sync
from permsc_integrations._options.options import RankingOptions
from permsc_integrations._ranker.ranker import DEFAULT_MAX_CONCURRENCY
from permsc_integrations.aggregators import aggregate
from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends.base import Backend
from permsc_integrations.errors import ConfigurationError, InsufficientSamplesError
from permsc_integrations.eval._datasets import SortingDataset, SortingExample, kendall_tau_b
from permsc_integrations.eval._report import EvalReport
from permsc_integrations.eval._samples import ListSamples, SampleLog, collected
from permsc_integrations.eval._trec import Qrels, Query, Run
from permsc_integrations.metrics import ndcg_at_k

if TYPE_CHECKING:  # lazy: start-up time; offline scoring never ranks
    from permsc_integrations._ranker.ranker import PSCRanker

__all__ = [
    "ListSamples",
    "AGGREGATORS",
    "TREC_SETUP",
    "acollect_samples",
    "score_sorting",
    "aevaluate_sorting",
    "evaluate_sorting",
    "score_runs",
    "aggregate_runs",
    "aevaluate_trec",
    "ndcg10",
]

AGGREGATORS = ("kemeny", "rrf", "borda", "copeland")
TREC_SETUP: Mapping[str, object] = MappingProxyType({"strategy": "sliding"})
"""Where :func:`aevaluate_trec` (and so ``permsc eval trec``) departs from the defaults of
:class:`~permsc_integrations.RankingOptions`: the paper's set-up, RankGPT's sliding
windows back to front, not the ranker's blocks. The declared ``window_size`` (20) and ``step``
(10) are the paper's. Options passed to it win."""
Progress = Callable[[int, int], None]
"""``progress(done, total)`` after each list (or query)."""


def _ranker(backend: Backend | str, task: str, n: int, m: int, **options: object) -> PSCRanker:
    # lazy: start-up time; offline scoring never ranks
    from permsc_integrations._ranker.ranker import PSCRanker

    chosen = RankingOptions.from_kwargs(
        num_permutations=m,
        prompt=task,
        window_size=max(n, 2),
        step=max(n, 2) - 1,
        min_successful=1,
        aggregator="borda",
        **options,
    )
    return PSCRanker(backend, options=chosen)


async def _one(ranker: PSCRanker, example: SortingExample, m: int) -> ListSamples:
    try:
        result = await ranker.arank("", list(example.items), request_id=example.id)
    except InsufficientSamplesError:
        empty = tuple(() for _ in range(m))
        return ListSamples(example, empty, empty, tuple("error" for _ in range(m)))
    return collected(example, result.samples)


async def acollect_samples(
    dataset: SortingDataset,
    backend: Backend | str,
    *,
    m: int = 20,
    seed: int = 0,
    temperature: float = 0.0,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    progress: Progress | None = None,
    log: SampleLog | None = None,
    done: Mapping[str, ListSamples] | None = None,
    **ranker_options: object,
) -> list[ListSamples]:
    """Ask the model for ``m`` shuffled answers per list, all lists concurrently.

    Each list's answers go to ``log`` as soon as they are in; lists found in ``done`` (a
    resumed samples file) are not asked again.
    """
    if not dataset.examples:
        raise ConfigurationError(f"dataset {dataset.name!r} has no examples to evaluate")
    task = dataset.examples[0].task
    n = max(len(e.items) for e in dataset.examples)
    out: dict[int, ListSamples] = {
        i: done[e.id] for i, e in enumerate(dataset.examples) if done and e.id in done
    }
    settings = {"seed": seed, "temperature": temperature, "max_concurrency": max_concurrency}
    ranker = _ranker(backend, task, n, m, **settings, **ranker_options)
    try:
        await _ask_all(ranker, dataset.examples, m, out, log, progress)
    finally:
        await ranker.aclose()
    return [out[i] for i in range(len(dataset.examples))]


async def _ask_all(
    ranker: PSCRanker,
    examples: Sequence[SortingExample],
    m: int,
    out: dict[int, ListSamples],
    log: SampleLog | None,
    progress: Progress | None,
) -> None:
    """The answers to every list not yet in ``out``, all lists concurrently, into ``out``
    (and ``log``) as each list's are in."""

    async def run(index: int, example: SortingExample) -> None:
        out[index] = await _one(ranker, example, m)
        if log is not None:
            log.write(out[index], index)
        if progress is not None:
            progress(len(out), len(examples))

    async with anyio.create_task_group() as group:
        for index, example in enumerate(examples):
            if index not in out:
                group.start_soon(run, index, example)


def _psc(samples: ListSamples, method: str, m: int | None = None) -> tuple[int, ...]:
    rankings = [r for r in samples.rankings[:m] if r]
    if not rankings:
        return ()
    return tuple(aggregate(rankings, method=method, n_items=len(samples.example.items)))


def score_sorting(
    lists: Sequence[ListSamples],
    *,
    aggregators: Sequence[str] = AGGREGATORS,
    m_sweep: Sequence[int] = (),
    task: str = "",
    config: Mapping[str, object] | None = None,
) -> EvalReport:
    """Score single runs and every aggregator on the same samples (see module docs)."""
    if not lists:
        raise ConfigurationError("nothing to score: no lists were evaluated")
    m = min(len(s.rankings) for s in lists)
    tau = kendall_tau_b
    singles = tuple(tuple(tau(s.rankings[k], s.example.keys) for s in lists) for k in range(m))
    methods = {a: tuple(tau(_psc(s, a), s.example.keys) for s in lists) for a in aggregators}
    sweep = {
        k: {
            a: sum(tau(_psc(s, a, k), s.example.keys) for s in lists) / len(lists)
            for a in aggregators
        }
        for k in m_sweep
        if 1 <= k <= m
    }
    statuses = [status for s in lists for status in s.statuses]
    stats = {status: statuses.count(status) for status in sorted(set(statuses))}
    return EvalReport(
        task or lists[0].example.task,
        "kendall_tau",
        singles,
        methods,
        sweep,
        dict(config or {}, m=m),
        {"answers": stats},
    )


async def aevaluate_sorting(
    dataset: SortingDataset,
    backend: Backend | str,
    *,
    m: int = 20,
    seed: int = 0,
    temperature: float = 0.0,
    aggregators: Sequence[str] = AGGREGATORS,
    m_sweep: Sequence[int] = (),
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    progress: Progress | None = None,
    **ranker_options: Any,
) -> EvalReport:
    """Collect ``m`` shuffled answers per list and score single runs vs PSC (``ranker_options``:
    :func:`acollect_samples`' other keywords, ``log`` and ``done``, or ranker options)."""
    lists = await acollect_samples(
        dataset,
        backend,
        m=m,
        seed=seed,
        temperature=temperature,
        max_concurrency=max_concurrency,
        progress=progress,
        **ranker_options,
    )
    name = backend if isinstance(backend, str) else backend.name
    config = {"backend": name, "temperature": temperature, "seed": seed, "dataset": dataset.name}
    report = score_sorting(
        lists, aggregators=aggregators, m_sweep=m_sweep, task=dataset.name, config=config
    )
    return EvalReport(
        report.task,
        report.metric,
        report.singles,
        report.methods,
        report.sweep,
        report.config,
        {**report.stats, "dataset": dict(dataset.stats)},
    )


def evaluate_sorting(
    dataset: SortingDataset, backend: Backend | str, **options: object
) -> EvalReport:
    """Sync :func:`aevaluate_sorting` (through the one bridge)."""
    return run_sync(aevaluate_sorting, dataset, backend, **options)


def ndcg10(run: Run, qrels: Qrels, qid: str) -> float:
    """nDCG@10 of one query with trec_eval semantics (``metrics.ndcg_at_k``)."""

    return float(ndcg_at_k(run[qid], qrels.get(qid, {}), 10))


def score_runs(runs: Mapping[str, Run], qrels: Qrels) -> dict[str, tuple[float, ...]]:
    """nDCG@10 per judged query (sorted qids) for each named run."""
    qids = sorted(q for q in qrels if any(q in run for run in runs.values()))
    return {
        name: tuple(ndcg10(run, qrels, q) if q in run else 0.0 for q in qids)
        for name, run in runs.items()
    }


def _aggregate_query(
    orders: Sequence[Sequence[str]], method: str, first: Sequence[str] = ()
) -> list[str]:
    docids: dict[str, int] = {}
    for order in (first, *orders):
        for docid in order:
            docids.setdefault(docid, len(docids))
    names = list(docids)
    rankings = [[docids[d] for d in order] for order in orders]
    return [names[i] for i in aggregate(rankings, method=method, n_items=len(names))]


def aggregate_runs(
    runs: Mapping[str, Run],
    qrels: Qrels,
    *,
    aggregators: Sequence[str] = AGGREGATORS,
    first_stage: Run | None = None,
    progress: Progress | None = None,
) -> tuple[EvalReport, dict[str, Run]]:
    """Aggregate several runs per query with each method; score all against ``qrels``.

    Returns the report (each input run is a single run) and the aggregated runs. Ties
    break by the ``first_stage`` order (e.g. the BM25 run the runs reranked), else by
    first appearance in the first run.
    """
    if len(runs) < 2:
        raise ConfigurationError("aggregate_runs needs at least two runs")
    qids = sorted(set().union(*runs.values()))
    merged: dict[str, Run] = {}
    for method in aggregators:
        merged[method] = {}
        for done, qid in enumerate(qids, 1):
            orders = [r[qid] for r in runs.values() if qid in r]
            merged[method][qid] = _aggregate_query(orders, method, (first_stage or {}).get(qid, ()))
            if progress is not None:
                progress(done, len(qids))
    singles = score_runs(runs, qrels)
    report = EvalReport(
        "trec-runs",
        "ndcg@10",
        tuple(singles.values()),
        score_runs(merged, qrels),
        config={"runs": list(runs)},
        stats={"queries": len(next(iter(singles.values())))},
    )
    return report, merged


async def _rerank(ranker: PSCRanker, queries: Sequence[Query], progress: Progress | None) -> Run:
    """Every query through ``ranker``, concurrently (the ranker's limiter caps the calls)."""
    run: Run = {}

    async def one(q: Query) -> None:
        result = await ranker.arank(q.query, [c.text for c in q.candidates], request_id=q.qid)
        run[q.qid] = [q.candidates[i].docid for i in result.order]
        if progress is not None:
            progress(len(run), len(queries))

    async with anyio.create_task_group() as group:
        for q in queries:
            group.start_soon(one, q)
    return {q.qid: run[q.qid] for q in queries}


def _trec_rankers(
    backend: Backend, m: int, aggregator: str, options: Mapping[str, object]
) -> tuple[PSCRanker, PSCRanker]:
    """One RankGPT pass over the first-stage order, and PSC with ``m`` and ``aggregator``."""
    # lazy: start-up time; offline scoring never ranks
    from permsc_integrations._ranker.ranker import PSCRanker

    once = RankingOptions.from_kwargs(num_permutations=1, include_identity=True, **options)
    psc = RankingOptions.from_kwargs(num_permutations=m, aggregator=aggregator, **options)
    return PSCRanker(backend, options=once), PSCRanker(backend, options=psc)


async def aevaluate_trec(
    queries: Sequence[Query],
    qrels: Qrels,
    backend: Backend | str,
    *,
    m: int = 20,
    aggregator: str = "kemeny",
    progress: Progress | None = None,
    **ranker_options: object,
) -> tuple[EvalReport, dict[str, Run]]:
    """First stage vs one RankGPT pass (first-stage order) vs PSC, nDCG@10 per query.

    ``ranker_options`` go to both :class:`~permsc_integrations.PSCRanker` s
    (``window_size=20, step=10, temperature, seed, max_concurrency, ...``).
    """
    owned = isinstance(backend, str)
    backend = resolve_backend(backend)
    options = {**TREC_SETUP, **ranker_options}
    single, psc = _trec_rankers(backend, m, aggregator, options)
    runs: dict[str, Run] = {
        "first-stage": {q.qid: [c.docid for c in q.candidates] for q in queries}
    }
    try:
        runs["single"] = await _rerank(single, queries, progress)
        runs[f"psc-{aggregator}"] = await _rerank(psc, queries, progress)
    finally:
        await single.aclose()
        await psc.aclose()
        if owned:
            await backend.aclose()
    scores = score_runs(runs, qrels)
    config = {"m": m, "aggregator": aggregator, "backend": backend.name, **options}
    methods = {k: v for k, v in scores.items() if k != "single"}
    stats = {"queries": len(queries)}
    single_pass = (scores["single"],)
    return EvalReport("trec", "ndcg@10", single_pass, methods, config=config, stats=stats), runs
