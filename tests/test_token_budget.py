"""``max_total_tokens`` and ``max_cost``: a request plans the calls its budget pays for and
stops at the budget in the tokens the backend reports; too small a budget is refused before
any call; a cost budget needs prices.

Through the real ``openai`` client and a real loopback server that reports each call's
tokens (whitespace words of the prompt and the answer).
"""

from __future__ import annotations

import pytest

from permsc_integrations import ConfigurationError, RankingOptions, SpendingCap
from permsc_integrations._calls.spending import Meter, charged
from permsc_integrations._options.spend import within_spend
from permsc_integrations.errors import BudgetSpentError
from permsc_integrations.results import Usage
from permsc_integrations.testing import best_first
from permsc_integrations.testing._responders import shown_passages

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(300)


def docs(n: int, words: int = 1) -> list[str]:
    """``n`` passages with distinct grades (``doc <grade>``), shuffled, padded to ``words``
    one-letter words each (a tokenizer that counts a word where characters / 4 count half)."""
    pad = " x" * (words - 1)
    return [f"doc {(k * 37) % 131}{pad}" for k in range(n)]


def graded(request) -> str:
    order = best_first(shown_passages(request.messages))
    return " > ".join(f"[{p + 1}]" for p in order)


def test_a_token_budget_plans_the_calls_it_pays_for(scripted_server) -> None:
    """The plan's estimate (characters / 4) is above what this server counts (a word a
    token): after the first round the request spends at the rate it measured, and uses the
    budget, not only what the estimate said it would pay for."""
    server = scripted_server(graded)
    texts, query = docs(100), "which grade is highest?"
    with server.ranker(max_total_tokens=20_000) as r:
        result = r.rank(query, texts)
        planned = within_spend(r.options, lambda s: r._engine.prompt.render(query, s), texts)
    with server.ranker() as whole:
        assert whole.options.plan(100).calls.high == 120  # unbudgeted: 5 blocks x m = 20
    assert planned.max_calls is not None and 4 < planned.max_calls < 120
    assert result.usage.calls == server.request_count > planned.max_calls
    assert 0.8 * 20_000 <= result.usage.total_tokens <= 20_000
    assert sorted(result.order) == list(range(100))
    best = sorted(range(100), key=lambda i: -int(texts[i].split()[1]))[:10]
    assert set(result.order[:10]) == set(best)  # an oracle model: the true top 10


def test_a_budget_that_pays_for_the_plan_changes_nothing(scripted_server) -> None:
    server = scripted_server(graded)
    runs = []
    for budget in (None, 10_000_000):
        server.reset()
        with server.ranker(num_permutations=3, max_total_tokens=budget) as r:
            result = r.rank("which grade is highest?", docs(40))
        runs.append((result.order, result.usage.calls, result.stopped, result.head))
    assert runs[0] == runs[1] and runs[0][2] == "complete"


def test_the_meter_stops_at_the_budget_where_the_tokenizer_counts_more(scripted_server) -> None:
    """The server counts a token a word; the plan counts characters / 4, half of that for
    these passages: the plan asks for more calls than the budget pays for, and the meter
    stops the request at the budget (one call at a time: no call in flight to estimate)."""
    server = scripted_server(graded)
    texts, query, budget = docs(60, words=200), "which grade is highest?", 30_000
    with server.ranker(max_total_tokens=budget, request_concurrency=1) as r:
        result = r.rank(query, texts)
        planned = within_spend(r.options, lambda s: r._engine.prompt.render(query, s), texts)
    assert planned.max_calls is not None and result.usage.calls < planned.max_calls
    assert result.usage.total_tokens <= budget < result.usage.total_tokens + 5_000
    assert result.stopped == "budget"
    assert sorted(result.order) == list(range(60))


def test_a_budget_below_one_call_is_refused_before_any_call(scripted_server) -> None:
    server = scripted_server(graded)
    with server.ranker(max_total_tokens=50) as r:
        with pytest.raises(ConfigurationError, match=r"max_total_tokens=50 does not pay for one"):
            r.rank("which grade is highest?", docs(30))
    assert server.request_count == 0


def test_a_cost_budget_needs_prices_and_plans_like_tokens(scripted_server) -> None:
    with pytest.raises(ConfigurationError, match="max_cost needs prices"):
        RankingOptions(max_cost=0.01)
    with pytest.raises(ConfigurationError, match="max_cost"):
        RankingOptions(max_cost=0, prices="1,1")
    server = scripted_server(graded)
    texts, query = docs(100), "which grade is highest?"
    # 1 per million prompt and completion tokens: 0.02 is 20,000 tokens
    with server.ranker(max_cost=0.02, prices="1,1") as r:
        by_cost = within_spend(r.options, lambda s: r._engine.prompt.render(query, s), texts)
        result = r.rank(query, texts)
    with server.ranker(max_total_tokens=20_000) as r:
        by_tokens = within_spend(r.options, lambda s: r._engine.prompt.render(query, s), texts)
    assert by_cost.max_calls == by_tokens.max_calls
    assert result.usage.cost is not None and result.usage.cost <= 0.02


def test_max_calls_below_the_token_budget_stays(scripted_server) -> None:
    server = scripted_server(graded)
    with server.ranker(max_total_tokens=1_000_000, max_calls=7) as r:
        result = r.rank("which grade is highest?", docs(100))
    assert result.usage.calls == server.request_count <= 7


def test_the_meter_refuses_past_the_budget_and_measures_what_it_affords() -> None:
    """The request's meter, alone: a call is refused once what was spent and its estimate
    (the largest call so far) would pass the budget; ``affordable`` is the calls spent plus
    what is left at their mean tokens, at most a cap, and becomes the meter's call budget."""
    meter = Meter(None, "request", budget=10, spend=SpendingCap(tokens=1000))
    for _ in range(4):  # 250 tokens each: the fourth reaches the budget exactly
        with charged([meter], prompt_chars=400) as reported:
            reported.append(Usage(prompt_tokens=200, completion_tokens=50))
    with pytest.raises(BudgetSpentError, match=r"max_total_tokens=1000 spent"):
        with charged([meter], prompt_chars=400):
            pass
    assert (meter.spent.calls, meter.spent.total_tokens, meter.refused) == (4, 1000, 1)
    wide = Meter(None, "request", budget=2, spend=SpendingCap(tokens=1000))
    assert wide.affordable() is None  # nothing reported yet
    with charged([wide], prompt_chars=400) as reported:
        reported.append(Usage(prompt_tokens=150, completion_tokens=50))
    assert (wide.affordable(), wide.budget) == (5, 5)  # 1 spent + 800 left at 200 a call
    assert (wide.affordable(cap=3), wide.budget) == (3, 3)
