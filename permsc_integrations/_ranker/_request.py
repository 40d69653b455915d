"""One request of :class:`~permsc_integrations._ranker.ranker.PSCRanker`, once admitted: the
chooser's strategy over the request's plan, from ``request_start`` to ``request_end``, and
its result (each item's chance of the top k computed on the finished samples)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from permsc_integrations._run.engine import Engine
from permsc_integrations._run.request import RequestRun
from permsc_integrations._run.state import RequestState
from permsc_integrations.errors import PermscError
from permsc_integrations.results import RankingResult, scores_from_order
from permsc_integrations.strategies import Choice, Outcome, served_k, top_probability

__all__ = ["run"]


async def run(engine: Engine, state: RequestState, choice: Choice) -> RankingResult:
    """One request from its ``request_start`` to its ``request_end`` event, by the strategy
    the chooser picked, over its plan; an error out of it carries what it spent (a read of
    its meter)."""
    n = len(state.texts)
    await state.emit("request_start", n_items=n)
    try:
        async with RequestRun(engine, state, choice.plan) as req:
            outcome = req.outcome(await choice.strategy(req))
    except Exception as exc:
        spent = state.usage()  # every call the request made, cancelled ones included
        if isinstance(exc, PermscError):
            exc.usage = spent
        await state.emit("request_end", n_items=n, status="error", error=repr(exc), usage=spent)
        raise
    return await _finished(req, await _with_top_probability(req, outcome), choice.name)


async def _with_top_probability(req: RequestRun, outcome: Outcome) -> Outcome:
    """``outcome`` with each item's chance of the top k (:func:`~.strategies.top_probability`
    on the finished samples): the strategy's own, or for a ranking with a k (``top_k``,
    adaptive m's, 10 under ``max_calls``) the list model's, fitted in a worker thread."""
    k, n, given = served_k(req.options), req.plan.n, outcome.top_probability
    if not given and (k is None or n < 2):
        return outcome
    p = await req.offload(lambda: top_probability(outcome.order, req.samples, k or 1, given))
    return replace(outcome, top_probability=p)


async def _finished(req: RequestRun, outcome: Outcome, strategy: str) -> RankingResult:
    """The request's result, once its ``request_end`` event is out."""
    order = outcome.order
    windows, n, usage = req.windows, req.plan.n, req.state.usage()
    confidence = sum(w.confidence for w in windows) / len(windows) if windows else 1.0
    await req.state.emit(
        "request_end",
        n_items=n,
        status="ok",
        confidence=confidence,
        usage=usage,
        stopped=outcome.stopped,
    )
    scores = _scores(order, windows, n)
    return RankingResult(
        order,
        scores,
        tuple(windows),
        confidence,
        usage,
        top_probability=outcome.top_probability,
        head=outcome.head,
        stopped=outcome.stopped,
        ties=outcome.ties,
        strategy=strategy,
    )


def _scores(order: Sequence[int], windows: Sequence[Any], n: int) -> tuple[float, ...]:
    """A probability aggregator's scores when one window ranked every item (first-token
    scoring: each item's mean probability), else :func:`scores_from_order`."""
    if len(windows) == 1 and windows[0].scores and len(windows[0].indices) == n:
        scores = [0.0] * n
        for item, score in zip(windows[0].indices, windows[0].scores, strict=True):
            scores[item] = score
        return tuple(scores)
    return scores_from_order(order)
