"""The paper's Proposition 2.1, simulated over HTTP: with noisy, position-biased answers the
PSC result approaches the true order as the number of permutations m grows."""

from __future__ import annotations

import random
import re
import statistics

import anyio
import pytest

from permsc_integrations import PSCRanker
from permsc_integrations.backends.openai import OpenAIBackend
from permsc_integrations.metrics import kendall_tau
from permsc_integrations.ranker import RankRequest
from permsc_integrations.testing import noisy_responder

pytestmark = pytest.mark.timeout(60)

N_LISTS, N_ITEMS, MS = 8, 10, (1, 5, 20)


def grade(text: str) -> int:
    return int(re.search(r"grade (\d+)", text).group(1))


def lists() -> list[RankRequest]:
    out = []
    for q in range(N_LISTS):
        grades = random.Random(q).sample(range(100), N_ITEMS)
        out.append(RankRequest(f"q{q}", [f"item {k} of list {q}, grade {g}"
                                         for k, g in enumerate(grades)], id=q))
    return out


def truth(items: list[str]) -> list[int]:
    return sorted(range(len(items)), key=lambda i: -grade(items[i]))


async def mean_tau(base_url: str, m: int) -> float:
    backend = OpenAIBackend("noisy", base_url=base_url)
    taus = []
    async with PSCRanker(backend, num_permutations=m, max_concurrency=32, seed=m) as ranker:
        async for result in ranker.arank_many(lists()):
            taus.append(kendall_tau(result.order, truth(list(result.request.items))))
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
