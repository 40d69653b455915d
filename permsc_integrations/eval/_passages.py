"""Passage ranking with saved samples: one PSC window per query, scored by nDCG@10.

Every query's first-stage top ``n`` (``n`` <= the window) is shown ``m`` times; the first
time in the first-stage order (a single RankGPT pass), then shuffled. Each answer alone is a
single run (missing passages follow in first-stage order, as a reranker would return them);
aggregating the answers is PSC. The answers are saved as they arrive
(:mod:`._samples`: the passages' texts are the list's items, their docids its keys), so a run
resumes and re-scores offline against the qrels.

Example:
    >>> from permsc_integrations.eval._datasets import SortingExample
    >>> ex = SortingExample("q1", ("a", "b", "c"), ("d1", "d2", "d3"), "trec")
    >>> lists = [ListSamples(ex, ((0, 1, 2),), ((2,),), ("partial",), query="q")]
    >>> report = score_passages(lists, {"q1": {"d3": 1}}, aggregators=["borda"])
    >>> report.methods["first-stage"], report.methods["borda"], report.singles
    ((0.5,), (1.0,), ((1.0,),))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from permsc_integrations._calls.limiter import CallLimiter
from permsc_integrations._calls.spending import Meter
from permsc_integrations._options.options import RankingOptions
from permsc_integrations._run.calibration import (
    PLACEHOLDER_QUERY,
    PLACEHOLDERS,
    aestimate_prior,
    labelled_prompt,
)
from permsc_integrations._run.engine import Engine
from permsc_integrations._run.first_token import require_first_token
from permsc_integrations._run.request import RequestRun
from permsc_integrations.aggregators import aggregate
from permsc_integrations.backends.base import Backend
from permsc_integrations.errors import ConfigurationError, InsufficientSamplesError
from permsc_integrations.eval._datasets import SortingExample
from permsc_integrations.eval._report import EvalReport
from permsc_integrations.eval._samples import ListSamples, SampleLog, collected
from permsc_integrations.eval._trec import Qrels, Query
from permsc_integrations.metrics import ndcg_at_k
from permsc_integrations.permutations import cut_blocks, sample_permutations

if TYPE_CHECKING:  # lazy: start-up time; offline scoring never ranks
    from permsc_integrations._ranker.ranker import PSCRanker

__all__ = ["acollect_passages", "score_passages", "ndcg_of"]


def _example(q: Query) -> SortingExample:
    texts = tuple(c.text for c in q.candidates)
    return SortingExample(q.qid, texts, tuple(c.docid for c in q.candidates), "trec")


def _ranker(
    backend: Backend | str, m: int, size: int, ranker_options: Mapping[str, object]
) -> PSCRanker:
    """A ranker of one window of ``size`` passages, ``m`` answers, the first in order."""
    # lazy: start-up time; offline scoring never ranks
    from permsc_integrations._ranker.ranker import PSCRanker

    options = {"window_size": size, "step": size - 1, "min_successful": 1, **ranker_options}
    chosen = RankingOptions.from_kwargs(num_permutations=m, include_identity=True, **options)
    return PSCRanker(backend, options=chosen)


async def _one(
    ranker: PSCRanker, q: Query, m: int, log: SampleLog | None, index: int
) -> ListSamples:
    """The ``m`` answers to query ``q`` (saved to ``log`` as its ``index``-th list)."""
    lists = await _answers(ranker, q, m)
    if log is not None:
        log.write(lists, index)
    return lists


async def _answers(ranker: PSCRanker, q: Query, m: int) -> ListSamples:
    example = _example(q)
    try:
        result = await ranker.arank(q.query, list(example.items), request_id=q.qid)
    except InsufficientSamplesError:
        empty = tuple(() for _ in range(m))
        return ListSamples(example, empty, empty, ("error",) * m, ("",) * m, q.query)
    return collected(example, result.samples, q.query)


Parts = tuple[Engine, Meter | None]


def _parts(ranker: PSCRanker) -> Parts:
    """An engine (and the ``ranker_cap`` meter) over the ranker's options and backend, for
    the rounds drawn outside ``arank``: one query at a time, so a limiter of its own."""
    o = ranker.options
    meter = Meter(o.ranker_cap, "ranker", o.prices) if o.ranker_cap else None
    return Engine.build(o, ranker.backend, limiter=CallLimiter(o.max_concurrency)), meter


async def _blocks(parts: Parts, q: Query, window: int, skip: int) -> ListSamples:
    """The m orders (the first-stage order first) but the first ``skip`` (drawn before), each
    cut into blocks of at most ``window`` passages, one call a block; every block is one
    saved sample (a round of the ranker's request: its limits, seed and events)."""
    example = _example(q)
    texts = list(example.items)
    inside = tuple(range(len(texts)))
    engine, meter = parts
    state = engine.open(q.query, texts, request_id=q.qid, ranker_meter=meter)
    seed = state.seed_for(inside, "blocks")
    m = engine.options.num_permutations
    perms = sample_permutations(len(texts), m, seed=seed, include_identity=True)[skip:]
    shown = [cut_blocks(perm, window) for perm in perms]
    draw = await RequestRun(engine, state).draw(0, inside, shown, top=window)
    return collected(example, draw.samples, q.query)


def _joined(a: ListSamples, b: ListSamples) -> ListSamples:
    """``a``'s answers followed by ``b``'s (a list topped up to a larger m)."""
    return replace(
        a,
        permutations=a.permutations + b.permutations,
        rankings=a.rankings + b.rankings,
        statuses=a.statuses + b.statuses,
        raw_texts=a.raw_texts + b.raw_texts,
        probabilities=a.probabilities + b.probabilities,
        masses=a.masses + b.masses,
        usages=(a.usages or ({},) * len(a.rankings)) + b.usages,
    )


async def _topped_up(
    parts: Parts,
    q: Query,
    m: int,
    window: int,
    have: ListSamples | None,
    log: SampleLog | None,
    index: int,
) -> ListSamples:
    """A query's blocks answers up to m orders: only the orders ``have`` lacks are drawn."""
    per_order = len(cut_blocks(range(len(q.candidates)), window))
    drawn = len(have.rankings) // per_order if have is not None else 0
    if drawn >= m and have is not None:
        return have
    new = await _blocks(parts, q, window, drawn)
    if log is not None:
        log.write(new, index, start=len(have.rankings) if have is not None else 0)
    return new if have is None else _joined(have, new)


async def _record_priors(engine: Engine, log: SampleLog, sizes: set[int]) -> None:
    """Estimate and record the position prior of each block size the file lacks."""
    for size in sorted(sizes - set(log.priors)):
        settings = engine.options.generation
        backend, prompt = require_first_token(engine.backend), labelled_prompt(engine.prompt)
        prior = await aestimate_prior(backend, prompt, size, settings=settings)
        log.write_prior(
            size, prior.probabilities, placeholders=PLACEHOLDERS, query=PLACEHOLDER_QUERY
        )


async def acollect_passages(
    queries: Sequence[Query],
    backend: Backend | str,
    *,
    m: int = 10,
    log: SampleLog | None = None,
    done: Mapping[str, ListSamples] | None = None,
    progress: Callable[[int, int], None] | None = None,
    window: int | None = None,
    **ranker_options: object,
) -> list[ListSamples]:
    """``m`` answers per query (the first in first-stage order), one query after another.

    With ``window`` (first-token runs) each of the m orders is cut into blocks of at most
    ``window`` passages (one block when the list fits), one call and one saved sample a
    block, and a list of ``done`` with fewer orders is topped up to m."""
    n = max((len(q.candidates) for q in queries), default=0)
    if n < 2:
        raise ConfigurationError("passage ranking needs at least two candidates per query")
    size = min(window or n, n)
    ranker = _ranker(backend, m, size, ranker_options)
    parts = _parts(ranker)  # the window mode's rounds, drawn outside arank
    out: list[ListSamples] = []
    try:
        if window is not None and log is not None:
            await _record_priors(parts[0], log, {len(b) for b in cut_blocks(range(n), size)})
        for index, q in enumerate(queries):
            lists = (done or {}).get(q.qid)
            if window is not None:
                lists = await _topped_up(parts, q, m, size, lists, log, index)
            elif lists is None:
                lists = await _one(ranker, q, m, log, index)
            out.append(lists)
            if progress is not None:
                progress(len(out), len(queries))
            await anyio.lowlevel.checkpoint()
    finally:
        await ranker.aclose()
    return out


def _completed(ranking: Sequence[int], n: int) -> list[int]:
    """A partial answer as a run: the passages it names, then the rest in first-stage order."""
    named = list(dict.fromkeys(ranking))
    return named + [i for i in range(n) if i not in set(named)]


def ndcg_of(order: Sequence[int], lists: ListSamples, qrels: Qrels) -> float:
    docids = lists.example.keys
    run = [str(docids[i]) for i in _completed(order, len(docids))]
    return ndcg_at_k(run, qrels.get(lists.example.id, {}), 10)


def _psc(lists: ListSamples, method: str, m: int | None = None) -> list[int]:
    good = [r for r in lists.rankings[:m] if r]
    n = len(lists.example.items)
    return aggregate(good, method=method, n_items=n) if good else list(range(n))


def score_passages(
    lists: Sequence[ListSamples],
    qrels: Qrels,
    *,
    aggregators: Sequence[str] = ("kemeny",),
    m_sweep: Sequence[int] = (),
    config: Mapping[str, object] | None = None,
) -> EvalReport:
    """nDCG@10 per query of the first stage, of every single answer and of each aggregator."""
    judged = [s for s in lists if s.example.id in qrels]
    if not judged:
        raise ConfigurationError("no evaluated query has judgements in the qrels")
    m = min(len(s.rankings) for s in judged)
    singles = tuple(tuple(ndcg_of(s.rankings[k], s, qrels) for s in judged) for k in range(m))
    methods = {
        "first-stage": tuple(ndcg_of((), s, qrels) for s in judged),
        "single pass (first-stage order)": singles[0],
    }
    methods |= {a: tuple(ndcg_of(_psc(s, a), s, qrels) for s in judged) for a in aggregators}
    sweep = {
        k: {
            a: sum(ndcg_of(_psc(s, a, k), s, qrels) for s in judged) / len(judged)
            for a in aggregators
        }
        for k in m_sweep
        if 1 <= k <= m
    }
    statuses = [status for s in judged for status in s.statuses]
    stats = {"answers": {st: statuses.count(st) for st in sorted(set(statuses))}}
    return EvalReport("trec", "ndcg@10", singles, methods, sweep, dict(config or {}, m=m), stats)
