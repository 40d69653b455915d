"""``max_calls``: a request never sends more than its budget, whatever the faults, and still
returns a ranking; the strategies plan within it; a budget below one pass ranks the head.

Through the real ``openai`` client and a real loopback server that counts what it receives.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections import Counter

import pytest

from permsc_integrations import (
    ConfigurationError,
    InsufficientSamplesError,
    PermscError,
    PSCRanker,
    RankingOptions,
    RetryPolicy,
)
from permsc_integrations._run.sampling import REASK
from permsc_integrations.results import ParseStatus
from permsc_integrations.testing import Fault, Reply, best_first
from permsc_integrations.testing._responders import shown_passages

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(600)

QUICK = RetryPolicy(initial_backoff=0.01, max_backoff=0.02, jitter=0.0, max_total_time=30.0)


class Flaky:
    """A model that ranks ``doc <grade>`` passages by grade, except the first time it sees a
    prompt, when (by the prompt's hash) it is rate limited (429), fails (500), answers too late
    (a timeout), answers nothing readable (a re-ask follows) or ranks half the passages; a
    retry, or a re-ask, of that prompt is answered well."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, request):
        reask = REASK.split(".")[0] in request.text
        with self.lock:
            self.seen[request.text] += 1
            again = self.seen[request.text] > 1 or reask
        order = best_first(shown_passages(request.messages))
        good = " > ".join(f"[{p + 1}]" for p in order)
        bucket = int(hashlib.sha256(request.text.encode()).hexdigest()[:8], 16) % 100
        if again or bucket >= 40:
            return good
        if bucket < 8:
            return Fault.status(429, retry_after=0.01)
        if bucket < 16:
            return Fault.status(500)
        if bucket < 19:
            return Reply(good, delay=2.0)  # the client gave up at 1 s: retried
        if bucket < 29:
            return "I would rather not say."
        return " > ".join(f"[{p + 1}]" for p in order[: max(1, len(order) // 2)])


def _admitted(server, calls: int, deadline: float = 10.0) -> None:
    """Wait (to a deadline) until the server has read ``calls`` requests: a call the client
    gave up on (its 1 s timeout) may reach the server's handler after the ranking ended."""
    end = time.monotonic() + deadline
    while server.request_count < calls and time.monotonic() < end:
        time.sleep(0.01)
    while server.in_flight and time.monotonic() < end:
        time.sleep(0.01)


def docs(n: int) -> list[str]:
    return [f"doc {(k * 37) % 131}" for k in range(n)]  # distinct grades, shuffled


def ranker(server, **options) -> PSCRanker:
    # 1 s: a good answer under a loaded machine is never cut; the slow ones (2 s) always are
    return server.ranker(retry=QUICK, timeout=1.0, max_words=5, aggregator="borda", **options)


def budget_cases() -> list[tuple[int, int, str]]:
    rng = random.Random(31)
    edges = [(1, 1, "blocks"), (2, 1, "blocks"), (2, 1, "sliding"), (130, 1, "blocks")]
    edges += [(130, 40, "blocks"), (130, 40, "sliding"), (21, 2, "blocks"), (21, 2, "sliding")]
    drawn = [
        (rng.randint(1, 130), rng.randint(1, 40), strategy)
        for strategy in ("blocks", "sliding")
        for _ in range(11)
    ]
    return edges + drawn


@pytest.mark.slow  # a sweep of 26 cases (25 s)
def test_the_budget_is_never_exceeded_under_faults_reasks_and_partial_answers(
    scripted_server,
) -> None:
    server = scripted_server(Flaky())
    wrong, failed = [], 0
    for n, budget, strategy in budget_cases():
        server.reset()
        where = f"n={n} max_calls={budget} {strategy}"
        with ranker(server, max_calls=budget, strategy=strategy) as r:
            try:
                result = r.rank("which grade is highest?", docs(n))
            except InsufficientSamplesError:  # a round whose every call failed: no ranking
                failed += 1
                if server.request_count > budget:
                    wrong.append(f"{where}: the server got {server.request_count} calls")
                continue
        _admitted(server, result.usage.calls)
        if server.request_count > budget or result.usage.calls > budget:
            wrong.append(f"{where}: the server got {server.request_count} calls")
        # every call the server got is counted (a call the client gave up on before its body
        # was sent, on a loaded machine, is counted and never reaches the server)
        if result.usage.calls < server.request_count:
            wrong.append(f"{where}: usage {result.usage.calls}, server {server.request_count}")
        if sorted(result.order) != list(range(n)):
            wrong.append(f"{where}: not a ranking of the {n} items: {result.order}")
    assert wrong == [] and failed < len(budget_cases()) // 4


def test_the_faults_happen_and_a_spent_budget_ends_retries_and_reasks_as_failures(
    scripted_server,
) -> None:
    server = scripted_server(Flaky())
    with ranker(server, num_permutations=20) as r:  # no budget: every fault, then an answer
        free = r.rank("which grade is highest?", docs(40))
    reasked = [s for s in free.samples if s.attempts > 1]
    assert free.usage.retries > 0 and reasked and not free.failures
    assert any(s.status is ParseStatus.PARTIAL for s in free.samples)
    server.reset()
    server.responder = Flaky()
    with ranker(server, max_calls=7) as r:  # one window: 7 shuffles, their faults on top
        result = r.rank("which grade is highest?", docs(10))
    statuses = Counter(s.status for s in result.samples)
    _admitted(server, result.usage.calls)
    assert server.request_count == result.usage.calls == 7 and result.stopped == "budget"
    # a fault whose retry or re-ask the budget refused is a failure (the reason noted); a
    # sample is "skipped" only when nothing of it was sent (a retry took its call first)
    skipped = [s for s in result.samples if s.status is ParseStatus.SKIPPED]
    assert all(s.usage.calls == 0 for s in skipped) and statuses[ParseStatus.ERROR] + statuses[
        ParseStatus.INVALID
    ] == len(result.failures)
    assert all(
        "not sent" in f"{s.error} {getattr(s.exception, '__notes__', '')}" for s in result.failures
    )
    assert result.failures or skipped  # the budget cut something: 7 calls, faults on top
    assert sorted(result.order) == list(range(10))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "12"])
def test_a_budget_below_one_or_not_an_int_is_refused(bad) -> None:
    with pytest.raises(ConfigurationError, match="max_calls must be an int >= 1"):
        RankingOptions(max_calls=bad)
    with pytest.raises(ConfigurationError, match="max_calls"):
        PSCRanker("openai:m", max_calls=bad)


@pytest.mark.parametrize(("strategy", "budget", "head"), [("blocks", 4, 60), ("sliding", 4, 50)])
def test_a_budget_below_one_pass_ranks_the_head_and_keeps_the_tail(
    scripted_server, strategy, budget, head
) -> None:
    server = scripted_server(Flaky())
    with ranker(server, max_calls=budget, strategy=strategy) as r:
        result = r.rank("which grade is highest?", docs(100))
        plan = r.options.plan(100)
    assert (result.head, result.stopped) == (head, "budget")
    assert result.order[head:] == tuple(range(head, 100))  # the tail in input order
    assert sorted(result.order[:head]) == list(range(head))
    assert server.request_count <= budget and plan.calls.high == budget
    shown = {
        int(text.split()[-1])
        for request in server.requests
        for text in shown_passages(request.messages)
    }
    assert shown <= {(k * 37) % 131 for k in range(head)}  # nothing of the tail was shown


def test_a_budget_that_pays_for_the_plan_changes_nothing(scripted_server) -> None:
    server = scripted_server(Flaky())
    orders = []
    for budget in (None, 120, 500):
        server.reset()
        server.responder = Flaky()  # the same faults each time
        with ranker(server, max_calls=budget, num_permutations=4) as r:
            result = r.rank("which grade is highest?", docs(50))
        _admitted(server, result.usage.calls)
        orders.append((result.order, server.request_count, result.stopped, result.head))
    assert orders[0] == orders[1] == orders[2] and orders[0][2:] == ("complete", 50)


def _outage(kind: str):
    """A model that never answers well: every call fails (500) or answers prose."""
    if kind == "500":
        return lambda request: Fault.status(500)
    return lambda request: "I would rather not say."


@pytest.mark.parametrize("kind", ["500", "prose"])
@pytest.mark.parametrize(
    ("n", "budget", "strategy"),
    [(30, 6, "blocks"), (10, 4, "blocks"), (30, 6, "sliding"), (100, 2, "blocks")],
)
def test_an_outage_under_a_budget_fails_as_it_does_without_one(
    scripted_server, kind, n, budget, strategy
) -> None:
    server = scripted_server(_outage(kind))
    errors = []
    for max_calls in (None, budget):
        server.reset()
        with ranker(server, max_calls=max_calls, strategy=strategy) as r:
            with pytest.raises(PermscError) as caught:
                r.rank("which grade is highest?", docs(n))
        errors.append(type(caught.value))
        if max_calls is not None:
            assert server.request_count <= max_calls
    assert errors[0] is errors[1], errors  # the same typed error, budget or not


def test_an_unreachable_server_under_a_budget_fails_with_the_connection_error(
    scripted_server,
) -> None:
    server = scripted_server(lambda request: "[1] > [2]")
    url = server.base_url
    server.stop()  # nothing listens there now
    errors = []
    for max_calls in (None, 5):
        with PSCRanker(
            "openai:m",
            backend_options={"base_url": url, "api_key": "k"},
            retry=QUICK,
            timeout=0.3,
            max_calls=max_calls,
        ) as r:
            with pytest.raises(PermscError, match="connection to .* failed") as caught:
                r.rank("which grade is highest?", docs(30))
        errors.append(type(caught.value))
    assert errors[0] is errors[1]


def test_a_sample_sent_and_failed_is_a_failure_when_the_budget_refuses_its_retry(
    scripted_server,
) -> None:
    seen = []
    lock = threading.Lock()

    def first_two_500(request):  # the first two calls fail; the budget refuses their retries
        with lock:
            seen.append(request.text)
            first = len(seen) <= 2
        if first:
            return Fault.status(500)
        order = best_first(shown_passages(request.messages))
        return " > ".join(f"[{p + 1}]" for p in order)

    server = scripted_server(first_two_500)
    with ranker(server, max_calls=6, num_permutations=6) as r:
        result = r.rank("which grade is highest?", docs(8))
    statuses = Counter(s.status for s in result.samples)
    assert server.request_count == 6
    assert statuses[ParseStatus.ERROR] == len(result.failures) == 2  # sent, failed: failures
    assert statuses[ParseStatus.SKIPPED] == 0  # every sample was sent
    assert all("retry was not sent" in str(s.exception.__notes__) for s in result.failures)


def _good(request):
    order = best_first(shown_passages(request.messages))
    return " > ".join(f"[{p + 1}]" for p in order)


def test_stopped_says_what_decided_the_calls(scripted_server) -> None:
    server = scripted_server(_good)
    with ranker(server, num_permutations=20) as r:
        few = r.rank("which grade is highest?", docs(3))  # 3! = 6 orders < m = 20
        whole = r.rank("which grade is highest?", docs(6))
    with ranker(server, num_permutations=20, max_calls=7) as r:
        cut = r.rank("which grade is highest?", docs(6))  # the budget asks 7 of 20 shuffles
    assert (few.stopped, few.usage.calls) == ("exhausted", 6)
    assert (whole.stopped, whole.usage.calls) == ("complete", 20)
    assert (cut.stopped, cut.usage.calls) == ("budget", 7)


def test_items_never_shown_have_no_top_probability_and_it_falls_along_the_order(
    scripted_server,
) -> None:
    server = scripted_server(_good)
    with ranker(server, max_calls=4, top_k=10) as r:
        result = r.rank("which grade is highest?", docs(100))
    shown = {i for s in result.samples if s.ok for i in s.permutation}
    p = result.top_probability
    assert result.head == 60 and len(shown) == 60
    assert [i for i in range(100) if p[i] is None] == sorted(set(range(100)) - shown)
    along = [p[i] for i in result.order if p[i] is not None]
    assert along == sorted(along, reverse=True) and along[0] > 0.5
