"""First-token scoring end to end on served backends: PSCRanker(scoring="first_token") over
the real openai client and the scripted server's logprobs, and through both adapters."""

from __future__ import annotations

import json

import pytest

from permsc_integrations.cli import main
from permsc_integrations.errors import LogprobsUnavailableError
from permsc_integrations.metrics import kendall_tau
from permsc_integrations.testing import Reply, first_token_responder

pytestmark = pytest.mark.timeout(60)

ITEMS = [f"passage {i} about goldfish" + " and tanks" * i for i in range(8)]
TRUTH = list(range(7, -1, -1))  # more "tanks", more relevant


def relevance(text: str) -> float:
    return 0.5 * text.count("tanks")


def test_a_served_model_s_logprobs_rank_the_window(scripted_server):
    server = scripted_server(first_token_responder(relevance))
    result = server.ranker(scoring="first_token", num_permutations=5, window_size=8).rank(
        "goldfish", ITEMS
    )
    assert list(result.order) == TRUTH
    assert result.usage.calls == 5 == server.request_count
    assert result.usage.completion_tokens == 5  # one output token a call
    for request in server.requests:
        body = request.body
        assert (body["max_tokens"], body["logprobs"], body["top_logprobs"]) == (1, True, 20)


def test_psc_averages_out_a_primacy_bias_that_fools_one_pass(scripted_server):
    """A model that favours what it reads first: one shuffled pass keeps that bias; PSC's
    shuffles put each item in many positions and recover the true order."""
    server = scripted_server(first_token_responder(relevance, position_bias=2.0))
    single = server.ranker(scoring="first_token", num_permutations=1, window_size=8).rank(
        "goldfish", ITEMS
    )
    psc = server.ranker(scoring="first_token", num_permutations=20, window_size=8).rank(
        "goldfish", ITEMS
    )
    assert kendall_tau(single.order, TRUTH) < 0.9 and list(psc.order) == TRUTH


def test_a_server_without_logprobs_fails_the_ranking_with_the_typed_error(scripted_server):
    server = scripted_server(lambda request: Reply("A"))
    with pytest.raises(LogprobsUnavailableError, match='scoring="generate"'):
        server.ranker(scoring="first_token", num_permutations=4, window_size=8).rank(
            "goldfish", ITEMS
        )
    assert 1 <= server.request_count <= 4  # fatal: never retried


def test_permsc_rank_scoring_first_token_on_a_served_model(scripted_server, tmp_path):
    grades = {"q1": [3, 9, 1, 7, 5], "q2": [2, 8, 6, 4]}
    lines = [
        {
            "qid": qid,
            "query": f"goldfish {qid}",
            "candidates": [{"docid": f"{qid}-{k}", "text": f"grade {g}"} for k, g in enumerate(gs)],
        }
        for qid, gs in grades.items()
    ]
    queries, out = tmp_path / "queries.jsonl", tmp_path / "ranked.jsonl"
    queries.write_text("".join(json.dumps(line) + "\n" for line in lines))
    server = scripted_server(first_token_responder(lambda text: float(text.split()[-1])))
    args = ["rank", "-i", str(queries), "-o", str(out), "-m", "3", "--scoring", "first_token"]
    assert main([*args, "--backend", "openai:scripted", "--base-url", server.base_url]) == 0
    for record in map(json.loads, out.read_text().splitlines()):
        gs = grades[record["qid"]]
        expected = [f"{record['qid']}-{k}" for k in sorted(range(len(gs)), key=lambda k: -gs[k])]
        assert [e["docid"] for e in record["ranking"]] == expected
        assert record["usage"]["calls"] == 3 and record["usage"]["completion_tokens"] == 3
    assert server.request_count == 6
