"""Spending caps through the real openai client and a real loopback server (issue 26, point 9):
no call is sent past a cap, the error says which cap and carries the usage; a ranker's cap is
shared by every thread and event loop; prices give usage a cost."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from permsc_integrations import PSCRanker, SpendingCap, SpendingCapError
from permsc_integrations._calls.cache import MemoryCache
from permsc_integrations._calls.caps import Prices
from permsc_integrations.cli import main
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.testing import oracle_responder

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(60)

ORACLE = oracle_responder(lambda text: text.count("gold"))
ITEMS = ["gold gold", "tin", "gold", "iron"]


def test_a_request_cap_on_calls_stops_sending_and_says_which_cap(scripted_server) -> None:
    server = scripted_server(ORACLE)
    with server.ranker(num_permutations=6, request_cap="calls=3") as r:
        with pytest.raises(SpendingCapError) as caught:
            r.rank("gold?", ITEMS)
        assert r.rank("gold?", ITEMS[:1]).usage.calls == 0  # one item needs no call
    error = caught.value
    # all six were started at once: the fourth was refused, the window failed and the three
    # in flight were cancelled (counted as spent: a provider may have received them)
    assert server.request_count <= 3
    assert (error.scope, error.limit, error.cap) == ("request", "calls", 3)
    assert error.usage is not None and error.usage.calls == 3 and error.spent.calls == 3
    assert "request_cap calls=3" in str(error)


def test_a_token_cap_counts_what_the_server_reported(scripted_server) -> None:
    server = scripted_server(ORACLE)
    with server.ranker(num_permutations=1, max_concurrency=1) as r:
        one = r.rank("gold?", ITEMS).usage.total_tokens  # one call's tokens
    cap = SpendingCap(tokens=int(2.5 * one))
    with server.ranker(num_permutations=6, max_concurrency=1, request_cap=cap) as r:
        with pytest.raises(SpendingCapError) as caught:
            r.rank("gold?", ITEMS)
    assert server.request_count == 1 + 2  # the third call would pass 2.5 calls' tokens
    assert caught.value.limit == "tokens" and caught.value.spent.total_tokens == 2 * one


def test_the_ranker_cap_is_shared_by_threads_and_event_loops(scripted_server) -> None:
    server = scripted_server(ORACLE)
    outcomes: list[object] = []
    # one slot: a call is charged once it holds it, so none is cancelled after charging
    with server.ranker(num_permutations=4, ranker_cap="calls=10", max_concurrency=1) as r:

        def sync_rank() -> None:
            try:
                outcomes.append(r.rank("gold?", ITEMS))
            except SpendingCapError as exc:
                outcomes.append(exc)

        def own_loop() -> None:
            try:
                outcomes.append(asyncio.run(r.arank("gold?", ITEMS)))
            except SpendingCapError as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=t) for t in (sync_rank, own_loop) * 3]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # 24 calls wanted, 10 allowed: two requests of 4 fit, the others are not started
        assert r.spent is not None and r.spent.calls == 8
        with pytest.raises(SpendingCapError) as later:  # spent for good
            r.rank("gold?", ITEMS)
    assert server.request_count == 8
    errors = [o for o in outcomes if isinstance(o, SpendingCapError)]
    assert len(outcomes) == 6 and len(errors) == 4
    assert {(e.scope, e.limit, e.needed) for e in errors} == {("ranker", "calls", 4)}
    assert later.value.usage is not None and later.value.usage.calls == 0


def test_prices_give_usage_a_cost_and_a_cost_cap_stops_calls(scripted_server) -> None:
    server = scripted_server(ORACLE)
    prices = Prices(prompt=2.0, completion=10.0)
    with server.ranker(num_permutations=2, prices=prices) as r:
        usage = r.rank("gold?", ITEMS).usage
    expected = (usage.prompt_tokens * 2.0 + usage.completion_tokens * 10.0) / 1e6
    assert usage.cost == pytest.approx(expected) and usage.cost > 0
    per_call = usage.cost / 2
    cap = f"cost={per_call * 3.5!r}"
    with server.ranker(num_permutations=8, max_concurrency=1, request_cap=cap, prices="2,10") as r:
        with pytest.raises(SpendingCapError) as caught:
            r.rank("gold?", ITEMS)
    assert server.request_count == 2 + 3
    assert caught.value.limit == "cost" and caught.value.spent.cost == pytest.approx(3 * per_call)


def test_cap_values_are_checked_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="needs prices"):
        PSCRanker("openai:m", request_cap="cost=1")
    with pytest.raises(ConfigurationError, match="calls=N"):
        PSCRanker("openai:m", ranker_cap="call=3")
    with pytest.raises(ConfigurationError, match="calls must be a int > 0"):
        SpendingCap(calls=0)
    with pytest.raises(ConfigurationError, match="PROMPT,COMPLETION"):
        PSCRanker("openai:m", prices="0.15")


def _queries(tmp_path: Path) -> Path:
    path = tmp_path / "queries.jsonl"
    rows = [{"qid": f"q{k}", "query": "gold?", "items": ITEMS} for k in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _long_queries(tmp_path: Path, count: int) -> Path:
    """``count`` queries of 30 items: at m = 4, two blocks then one window, 12 calls each."""
    path = tmp_path / "long.jsonl"
    items = [f"{'gold ' * k}item {k}" for k in range(30)]
    rows = [{"qid": f"q{k}", "query": "gold?", "items": items} for k in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_capped_run_ranks_what_the_cap_pays_for_and_resume_ranks_the_rest(
    scripted_server, tmp_path, capsys
) -> None:
    server = scripted_server(ORACLE)
    path, out = _long_queries(tmp_path, 4), tmp_path / "ranked.jsonl"
    flags = ["-m", "4", "--ranker-cap", "calls=24", "--prices", "1,2"]
    assert main(["estimate", "-i", str(path), *flags]) == 0
    assert "calls=24: allows about 2 of 4 queries" in capsys.readouterr().out
    remote = ["--backend", "openai:m", "--base-url", server.base_url, "--no-progress", *flags]
    args = ["rank", "-i", str(path), "-o", str(out), *remote]
    assert main(args) == 2  # all four sent at once (the default concurrency)
    err = capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    # before: every query's first round started at once, spent the 24 calls, none finished
    assert server.request_count == 24 and len(records) == 2
    assert err.count("2 queries were not started") == 1 and "--resume" in err
    assert "failed:" not in err  # the two left out are one line, not two failures
    # the summary too: it said "ranked 2 of 4 queries; 0 bad lines, 2 failed"
    assert "ranked 2 of 4 queries; 0 bad lines, 0 failed, 2 not started" in err, err
    for record in records:
        usage = record["usage"]
        assert usage["calls"] == 12 and usage["cost"] == pytest.approx(
            (usage["prompt_tokens"] + 2 * usage["completion_tokens"]) / 1e6
        )
    assert main([*args, "--resume"]) == 0  # the other two, under a fresh cap
    assert server.request_count == 48  # what one uncapped run costs: nothing paid twice
    assert sorted(json.loads(line)["qid"] for line in out.read_text().splitlines()) == [
        "q0", "q1", "q2", "q3"
    ]  # fmt: skip


def test_rank_many_under_a_ranker_cap_starts_only_what_it_can_finish(scripted_server) -> None:
    server = scripted_server(ORACLE)
    items = [f"{'gold ' * k}item {k}" for k in range(30)]
    with server.ranker(num_permutations=4, ranker_cap="calls=30") as r:
        outcomes = r.rank_many([("gold?", items)] * 5, return_exceptions=True)
        assert r.spent is not None and r.spent.calls == 24
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, SpendingCapError)]
    assert len(done) == 2 and len(refused) == 3 and server.request_count == 24
    assert all(o.order[0] == 29 for o in done)
    for error in refused:  # refused before any call: nothing spent, the plan's need named
        assert error.needed == 12 and error.usage is not None and error.usage.calls == 0
        assert "was not started: its plan needs 12 calls" in str(error)


def test_a_request_that_needs_less_than_its_plan_leaves_room_for_the_next(
    scripted_server,
) -> None:
    server = scripted_server(ORACLE)
    items = [f"{'gold ' * k}item {k}" for k in range(30)]
    cache = MemoryCache()
    with server.ranker(num_permutations=4, cache=cache) as r:
        r.rank("gold?", items)  # 12 calls, answers cached
    with server.ranker(num_permutations=4, ranker_cap="calls=12", cache=cache) as r:
        outcomes = r.rank_many([("gold?", items)] * 3 + [("other?", items)])
        assert r.spent is not None and r.spent.calls == 12
    # each cached request held 12 calls, used none and gave them back: all four ranked
    assert len(outcomes) == 4 and server.request_count == 24


def test_a_token_cap_admits_by_the_estimate(scripted_server) -> None:
    server = scripted_server(ORACLE)
    items = [f"{'gold ' * k}item {k}" for k in range(30)]
    with server.ranker(num_permutations=4, ranker_cap="tokens=100") as r:
        with pytest.raises(SpendingCapError) as caught:
            r.rank("gold?", items)
    assert server.request_count == 0 and caught.value.limit == "tokens"
    assert caught.value.needed is not None and caught.value.needed > 100


def test_estimate_says_what_a_cap_would_allow(tmp_path, capsys) -> None:
    path = _queries(tmp_path)
    args = ["estimate", "-i", str(path), "-m", "4", "--prices", "1,2"]
    assert main([*args, "--request-cap", "calls=3", "--ranker-cap", "calls=9", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["calls"] == 12 and got["cost"] > 0
    assert got["request_cap"] == {"cap": "calls=3", "queries_stopped": 3}
    assert got["ranker_cap"] == {"cap": "calls=9", "queries_allowed": 2}
    assert main([*args, "--ranker-cap", "calls=12"]) == 0
    assert "ranker cap:        calls=12: allows about 3 of 3 queries" in capsys.readouterr().out
