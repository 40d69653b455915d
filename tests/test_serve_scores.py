"""``permsc serve``'s opt-in ``relevance_score = "top_probability"``: each document's chance of
the top k, over HTTP (a real ``permsc serve`` process), from the flags or a TOML file."""

from __future__ import annotations

import httpx
import pytest

from permsc_integrations import ConfigurationError, PSCRanker
from permsc_integrations.serve import ModelConfig, load_models
from permsc_integrations.serve.scoring import SCALES, top_probability_scores

pytest.importorskip("uvicorn")
pytestmark = pytest.mark.timeout(120)


def test_served_scores_are_the_rankings_top_probabilities(
    scripted_server, serve_process, serve_case
) -> None:
    upstream = scripted_server(serve_case.responder)
    flags = ("-m", "4", "--top-k", "3", "--relevance-score", "top_probability")
    proc = serve_process(*serve_case.flags(upstream, *flags))
    body = {"model": "permsc", "query": serve_case.query, "documents": list(serve_case.docs)}
    answer = httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=60).json()
    backend_options = {"base_url": upstream.base_url, "api_key": "sk-test-upstream"}
    options = {"num_permutations": 4, "top_k": 3}
    with PSCRanker("openai:scripted", backend_options=backend_options, **options) as ranker:
        direct = ranker.rank(serve_case.query, list(serve_case.docs))
    expected = top_probability_scores(direct)
    got = [(r["index"], r["relevance_score"]) for r in answer["results"]]
    assert got == [(i, expected[i]) for i in direct.order]
    scores = [score for _, score in got]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    assert sum(direct.top_probability) == pytest.approx(3.0, abs=0.05)
    assert scores[0] > 0.5 > scores[-1]  # a scale a caller can threshold, unlike the rank


def test_the_toml_key_and_its_checks(tmp_path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(
        '[models.budget]\nbackend = "openai:m"\nmax_calls = 12\n'
        'relevance_score = "top_probability"\n'
        '[models.plain]\nbackend = "openai:m"\n'
    )
    budget, plain = load_models(path)
    assert (budget.relevance_score, plain.relevance_score) == ("top_probability", "win_share")
    assert set(SCALES) == {"win_share", "top_probability"}
    with pytest.raises(ConfigurationError, match="set top_k"):  # no k: no chance of the top k
        ModelConfig("x", "openai:m", relevance_score="top_probability")
    with pytest.raises(ConfigurationError, match="did you mean 'top_probability'"):
        ModelConfig("x", "openai:m", {"top_k": 5}, relevance_score="top_probabilty")


def test_the_flag_offers_every_scale() -> None:
    from permsc_integrations.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["serve", "--relevance-score", "top_probability", "--top-k", "2"])
    assert args.relevance_score == "top_probability"
    sub = next(a for a in parser._actions if a.dest == "command")
    (flag,) = [a for a in sub.choices["serve"]._actions if a.dest == "relevance_score"]
    assert tuple(flag.choices) == tuple(SCALES) and flag.default == "win_share"
