"""The paper's Proposition 2.1, simulated over HTTP: with noisy, position-biased answers the
PSC result approaches the true order as the number of permutations m grows."""

from __future__ import annotations

import random
import statistics

import anyio
import pytest

from permsc_integrations import PSCRanker
from permsc_integrations._ranker.ranker import RankRequest
from permsc_integrations.backends.openai import OpenAIBackend
from permsc_integrations.metrics import kendall_tau
from permsc_integrations.testing import best_first, grade, noisy_responder

pytestmark = pytest.mark.timeout(60)

N_LISTS, N_ITEMS, MS = 8, 10, (1, 5, 20)


def lists() -> list[RankRequest]:
    out = []
    for q in range(N_LISTS):
        grades = random.Random(q).sample(range(100), N_ITEMS)
        out.append(RankRequest(f"q{q}", [f"item {k} of list {q}, grade {g}"
                                         for k, g in enumerate(grades)], id=q))
    return out


async def mean_tau(base_url: str, m: int) -> float:
    backend = OpenAIBackend("noisy", base_url=base_url)
    taus = []
    async with PSCRanker(backend, num_permutations=m, max_concurrency=32, seed=m) as ranker:
        async for result in ranker.arank_many(lists()):
            taus.append(kendall_tau(result.order, best_first(list(result.request.items))))
    await backend.aclose()
    return statistics.fmean(taus)


def test_psc_approaches_the_true_order_as_m_grows(scripted_server):
    responder = noisy_responder(grade, keep=0.4, position_bias=1.5, seed=3)
    server = scripted_server(responder)

    async def sweep() -> dict[int, float]:
        return {m: await mean_tau(server.base_url, m) for m in MS}

    taus = anyio.run(sweep)
    assert server.request_count == N_LISTS * sum(MS)
    assert taus[1] < taus[5] < taus[20], taus
    assert taus[20] - taus[1] > 0.25, taus  # a large gain, not noise
    assert taus[20] > 0.85, taus  # close to the true order
