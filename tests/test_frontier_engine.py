"""The frontier policy wired into the ranker (issue 31): adaptive m that stops when the top k
is certified and reports ties, no identical prompts, the top-k probabilities, the rounds'
events. Against the simulated judge behind a real loopback server (the real openai client),
or the scripted server.
"""

from __future__ import annotations

import random

import pytest

from permsc_integrations.testing import REGIMES, SimulatedJudge, oracle_responder

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(300)


def judged(regime: str, grades: list[int], seed: int = 0, **params):
    """A judge of ``regime`` serving documents of ``grades`` (shuffled by ``seed``)."""
    judge = SimulatedJudge(REGIMES[regime].but(**params) if params else REGIMES[regime], seed=seed)
    shuffled = list(grades)
    random.Random(seed).shuffle(shuffled)
    texts = judge.documents([f"passage {k}" for k in range(len(shuffled))], shuffled, group="q")
    return judge, texts, shuffled


def rank_served(judge: SimulatedJudge, texts: list[str], **options):
    with judge.serve() as server, server.ranker(max_concurrency=64, **options) as ranker:
        result = ranker.rank("which passage is most relevant?", texts)
        return result, ranker.options.plan(len(texts)), server.request_count


def test_adaptive_with_top_k_stops_early_on_a_clear_top_within_its_cap() -> None:
    judge, texts, grades = judged("mild", [3] * 3 + [2] * 4 + [1] * 10 + [0] * 83)
    result, plan, received = rank_served(judge, texts, adaptive=True, top_k=10)
    assert plan.calls.high == 120  # the cap: blocks at m = 20
    assert received == result.usage.calls <= 60 and result.stopped == "certified"
    assert result.usage.saved_calls == 120 - result.usage.calls
    assert sorted(grades[i] for i in result.order[:7]) == [2, 2, 2, 2, 3, 3, 3]
    assert 2 <= len(result.windows) <= len(plan.rounds)


def test_true_ties_are_settled_and_reported_not_sampled_to_the_cap() -> None:
    judge, texts, grades = judged("mild", [3] * 4 + [1] * 16 + [0] * 80, seed=1, doc_error=0.0)
    result, plan, _ = rank_served(judge, texts, adaptive=True, top_k=4)
    assert result.stopped == "certified" and result.usage.calls < plan.calls.high
    assert result.ties and all(grades[a] == grades[b] == 3 for a, b in result.ties)
    assert {i for pair in result.ties for i in pair} <= set(result.order[:4])


def test_adaptive_without_top_k_ranks_the_whole_order_as_before() -> None:
    judge, texts, _ = judged("mild", [3] * 3 + [1] * 10 + [0] * 47)
    result, plan, _ = rank_served(judge, texts, adaptive=True)
    assert str(plan.calls) == "16..80" and len(result.windows) == len(plan.rounds) == 2
    assert result.stopped == "complete" and result.top_probability == () and result.ties == ()


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize(
    "options",
    [{}, {"strategy": "sliding"}, {"adaptive": "2,2"}, {"include_identity": True}],
    ids=["blocks", "sliding", "adaptive", "identity"],
)
def test_a_short_list_is_asked_each_order_once(scripted_server, n, options) -> None:
    server = scripted_server(oracle_responder(lambda text: -int(text.split()[-1])))
    with server.ranker(num_permutations=20, **options) as ranker:
        result = ranker.rank("q", [f"item {k}" for k in range(n)])
    prompts = [request.text for request in server.requests]
    assert len(prompts) == len(set(prompts)) == result.usage.calls <= {2: 2, 3: 6, 4: 24}[n]
    assert result.order == tuple(range(n))
    if "adaptive" not in options:
        assert len(prompts) == {2: 2, 3: 6, 4: 20}[n]  # min(m, n!)
        assert str(ranker.options.plan(n).calls) == str(len(prompts))


def test_top_probability_is_the_chance_of_the_top_k() -> None:
    judge, texts, grades = judged("position-biased", [3] * 2 + [2] * 3 + [1] * 10 + [0] * 45)
    frontier, _, _ = rank_served(judge, texts, max_calls=9, top_k=5)
    fixed, _, _ = rank_served(judge, texts, num_permutations=4, top_k=5)
    unranked, _, _ = rank_served(judge, texts, num_permutations=2)
    for result in (frontier, fixed):
        p = result.top_probability
        assert len(p) == 60 and all(0.0 <= x <= 1.0 for x in p)
        assert sum(p) == pytest.approx(5.0, abs=0.05)
        best = [p[i] for i in range(60) if grades[i] >= 2]  # the five best: likely
        assert sum(best) / 5 > 0.6 and max(p[i] for i in range(60) if grades[i] == 0) < 0.2
    assert unranked.top_probability == ()  # no k: no probability of the top k


def test_each_frontier_round_reports_its_window_and_wave() -> None:
    judge, texts, _ = judged("noisy", [3] * 3 + [1] * 10 + [0] * 67)
    events = []
    result, plan, received = rank_served(judge, texts, max_calls=15, on_event=events.append)
    assert [str(r.calls) for r in plan.rounds] == ["4", "4", "4", "3"]
    kinds = [(e.kind, e.window) for e in events if e.kind in ("window_start", "window_end")]
    assert kinds == [(k, w) for w in range(4) for k in ("window_start", "window_end")]
    waves = [e for e in events if e.kind == "wave_end"]
    assert [(e.window, e.detail["stopped"]) for e in waves] == [
        (0, False),
        (1, False),
        (2, False),
        (3, True),
    ]
    assert waves[-1].detail["why"] == "budget" and waves[-1].detail["samples"] == 15
    ended = [e for e in events if e.kind == "sample_end"]
    assert len(ended) == received == result.usage.calls == 15
    assert {e.total for e in events if e.kind == "window_start"} == {4}  # the plan's rounds
    assert result.stopped == "budget" and result.head == 80 and len(result.windows) == 4
