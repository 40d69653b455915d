"""Spending caps through the real openai client and a real loopback server (issue 26, point 9):
no call is sent past a cap, the error says which cap and carries the usage; a ranker's cap is
shared by every thread and event loop; prices give usage a cost."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path

import pytest

from permsc_integrations import PSCRanker, SpendingCap, SpendingCapError
from permsc_integrations.cli import main
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.spending import Prices
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
        assert r.spent is not None and r.spent.calls == 10
        with pytest.raises(SpendingCapError) as later:  # spent for good
            r.rank("gold?", ITEMS)
    assert server.request_count == 10
    errors = [o for o in outcomes if isinstance(o, SpendingCapError)]
    assert len(outcomes) == 6 and len(errors) >= 4  # 24 calls wanted, 10 allowed
    assert {(e.scope, e.limit) for e in errors} == {("ranker", "calls")}
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


def test_the_command_line_caps_a_run_and_prices_its_records(scripted_server, tmp_path, capsys):
    server = scripted_server(ORACLE)
    path, out = _queries(tmp_path), tmp_path / "ranked.jsonl"
    remote = ["--backend", "openai:m", "--base-url", server.base_url, "-m", "4"]
    code = main(
        [
            "rank",
            "-i",
            str(path),
            "-o",
            str(out),
            *remote,
            "--ranker-cap",
            "calls=6",
            "--concurrency",
            "1",
            "--prices",
            "1,2",
        ]  # fmt: skip
    )
    err = capsys.readouterr().err
    assert code == 2 and server.request_count == 6  # 12 calls wanted, 6 allowed
    assert err.count("ranker_cap calls=6 reached") == 1  # reported once, the rest cancelled
    assert re.search(r"the other \d queries were not ranked .*--resume", err)
    assert re.search(r"ranked \d of 3 queries; 0 bad lines, \d failed", err)
    for record in map(json.loads, out.read_text().splitlines()):  # at most one query ranked
        usage = record["usage"]
        assert usage["cost"] == pytest.approx(
            (usage["prompt_tokens"] + 2 * usage["completion_tokens"]) / 1e6
        )


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
