"""The frontier policy (issue 31): the list model, the stop rule and the budgeted rounds,
run against the simulated judge's scoring core (a real model of the phenomena, in process)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from permsc_integrations.metrics import kendall_tau
from permsc_integrations.strategies._frontier.model import Answer, ListFit, fit_list, is_copy
from permsc_integrations.strategies._frontier.policy import Frontier, Settings
from permsc_integrations.strategies._frontier.stopping import ties, unsettled
from permsc_integrations.testing import REGIMES, JudgeParams, SimulatedJudge, hidden_keys

pytestmark = pytest.mark.timeout(120)


def judged_list(params: JudgeParams, grades: list[int], seed: int = 0):
    judge = SimulatedJudge(params, seed=seed)
    keys = [
        hidden_keys(t)[0] for t in judge.documents([f"d{i}" for i in range(len(grades))], grades)
    ]

    def ask(window: tuple[int, ...]) -> Answer:
        positions, _ = judge.judge([keys[i] for i in window], str(window))
        return Answer(window, tuple(window[p] for p in positions))

    return ask


def drive(policy: Frontier, ask) -> Frontier:
    while (windows := policy.next_round()) is not None:
        policy.observe([ask(w) for w in windows])
    return policy


def test_the_model_corrects_a_position_bias_and_ignores_echoes() -> None:
    """Every answer puts the first shown items first (primacy twice a grade): a plain vote
    would follow the positions, the model reads them as a position effect."""
    grades = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]
    ask = judged_list(JudgeParams(noise=0.3, doc_error=0.0, primacy=2.0, recency=0.0), grades)
    rng = random.Random(1)
    answers = [ask(tuple(rng.sample(range(12), 12))) for _ in range(12)]
    fit = fit_list(12, answers)
    truth = sorted(range(12), key=lambda i: -grades[i])
    assert kendall_tau(fit.order(), truth) > 0.75
    effect = fit.position @ np.polynomial.legendre.legvander(np.array([-1.0, 1.0]), 4)[:, 1:].T
    assert effect[0] > effect[1] + 1.0, "the first place is favoured"
    echoes = [Answer(a.shown, a.shown) for a in answers]
    assert all(is_copy(a) for a in echoes)
    assert fit_list(12, echoes).order() == tuple(range(12)), "echoes say nothing: input order"


def test_without_answers_the_first_stage_order_stands() -> None:
    fit = fit_list(30, [])
    assert fit.order() == tuple(range(30))
    assert math.isclose(fit.top_probabilities(10).sum(), 10.0)


def certain(means: list[float], sd: float) -> ListFit:
    n = len(means)
    return ListFit(np.array(means), np.eye(n) * sd**2, np.zeros(4), 0.0, 1.0, np.ones(n, bool))


def test_the_stop_rule_certifies_clear_orders_and_settles_near_even_pairs_as_ties() -> None:
    assert unsettled(certain([4.0, 3.0, 2.0, 1.0], 0.1)) == []
    assert unsettled(certain([4.0, 3.0, 2.0, 1.0], 1.0)) != []
    near = certain([4.0, 2.05, 2.0, 0.0], 0.1)
    assert unsettled(near, top_k=3) == [] and ties(near, top_k=3) == [(1, 2)]
    blurred = certain([4.0, 2.05, 2.0, 0.0], 0.4)
    assert (1, 2) in unsettled(blurred), "a near tie with wide posteriors is not settled"


@pytest.mark.parametrize("n", [1, 2, 7, 20, 45, 100, 130])
@pytest.mark.parametrize("budget", [1, 2, 3, 4, 6, 9, 13, 26, 40])
def test_a_budget_is_never_exceeded_and_rounds_stay_few(n: int, budget: int) -> None:
    ask = judged_list(
        REGIMES["noisy"], [random.Random(i).choice([0, 0, 1, 2, 3]) for i in range(n)]
    )
    policy = drive(Frontier(n, Settings(budget=budget, seed=n)), ask)
    result = policy.result()
    assert result.calls == sum(1 for _ in policy.answers) <= budget
    assert result.rounds <= 4 and sorted(result.order) == list(range(n))
    if n > 1 and math.factorial(min(n, 10)) >= budget:
        assert result.calls == budget or result.stopped == "exhausted"
    if result.head < n:
        assert result.order[result.head :] == tuple(range(result.head, n)), "the tail as input"
        assert all(max(a.shown) < result.head for a in policy.answers)


def test_a_budget_below_one_pass_ranks_the_head_it_can_afford() -> None:
    ask = judged_list(REGIMES["mild"], [0] * 90 + [3] * 10)
    result = drive(Frontier(100, Settings(budget=4)), ask).result()
    assert result.head == 60 and result.calls == 4 and result.rounds == 2
    assert result.order[60:] == tuple(range(60, 100))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_small_lists_never_repeat_a_prompt(n: int) -> None:
    ask = judged_list(REGIMES["noisy"], [3, 1, 0, 2][:n])
    for settings in (Settings(budget=30), Settings(budget=None, cap=20, zone=0.0)):
        policy = drive(Frontier(n, settings), ask)
        shown = [a.shown for a in policy.answers]
        assert len(shown) == len(set(shown)) <= math.factorial(n)


def test_adaptive_stops_early_on_a_clear_top_and_says_which_ties_it_settled() -> None:
    grades = [0] * 85 + [1] * 5 + [2] * 5 + [3] * 5
    random.Random(3).shuffle(grades)
    policy = drive(
        Frontier(100, Settings(budget=None, cap=120)), judged_list(REGIMES["mild"], grades)
    )
    result = policy.result()
    assert result.stopped == "certified" and result.calls <= 60
    top = [grades[i] for i in result.order[:10]]
    assert top[:5] == [3] * 5 and sorted(top[5:], reverse=True) == [2] * 5
    across = [(a, b) for a, b in result.ties if grades[a] != grades[b]]
    assert result.ties and len(across) <= 1, "ties are near-even pairs: within a grade"
    assert 0 < result.top_probability[result.order[0]] <= 1.0


def test_adaptive_top_k_on_fine_grades_does_not_settle_neighbouring_grades_as_ties() -> None:
    """Grades 0-10 (issue 39): the whole list's spread is many grades wide, so a zone scaled
    to it counted neighbouring grades at the k-th place as ties and stopped with 7 of 10
    places right; scaled to the contenders' spread it goes on until they are ordered."""
    counts = {10: 2, 9: 3, 8: 6, 7: 8, 6: 6, 5: 5, 4: 5, 3: 5, 2: 20, 1: 20, 0: 20}
    grades = [g for g, c in counts.items() for _ in range(c)]
    random.Random(0).shuffle(grades)
    ideal = sorted(grades, reverse=True)[:10]
    params = REGIMES["mild"].but(gain=1 / 3, doc_error=0.0)  # a grade: a third of a unit
    right = 0
    for seed in range(3):
        policy = Frontier(100, Settings(k=10, seed=seed))
        result = drive(policy, judged_list(params, grades, seed=seed)).result()
        assert result.stopped == "certified" and result.calls < 120, "it still stops early"
        top = [grades[i] for i in result.order[:10]]
        right += sum(a == b for a, b in zip(top, ideal, strict=True))
    assert right >= 28, f"{right} of 30 top-10 places hold the ideal grade"


def test_a_budget_of_two_passes_beside_its_later_share_shows_every_item_twice_at_first() -> None:
    ask = judged_list(REGIMES["noisy"], [random.Random(i).choice([0, 1, 2, 3]) for i in range(100)])
    for budget, passes in ((12, 1), (16, 2), (40, 2)):
        policy = Frontier(100, Settings(budget=budget, first_passes=2, seed=budget))
        first = policy.next_round()
        assert first is not None and policy.planned()[0] == len(first) == 5 * passes
        seen = [item for window in first for item in window]
        assert sorted(seen) == sorted(list(range(100)) * passes), "each item once a pass"
        policy.observe([ask(w) for w in first])
        result = drive(policy, ask).result()
        assert result.calls == budget == sum(policy.planned())
    single = Frontier(100, Settings(budget=16)).next_round()  # one pass: the default
    assert single is not None and len(single) == 5


def test_a_budgets_later_rounds_show_only_the_likeliest_contenders() -> None:
    grades = [random.Random(i).choice([0, 1, 2, 2, 3, 3]) for i in range(60)]
    ask = judged_list(REGIMES["noisy"], grades)

    def later_pools(contenders: int | None) -> list[int]:
        policy = Frontier(60, Settings(budget=22, window=10, contenders=contenders, seed=1))
        policy.observe([ask(w) for w in policy.next_round() or ()])  # the first round: all
        pools = []
        while (windows := policy.next_round()) is not None:
            pools.append(len({item for window in windows for item in window}))
            policy.observe([ask(w) for w in windows])
        assert policy.result().calls == 22
        return pools

    capped, wide = later_pools(2), later_pools(None)
    assert capped and max(capped) <= 20, "at most 2 x k distinct items a later round"
    assert max(wide) > 20, "without the cap the plausible pool is wider (the cap changes it)"
