"""What a new user meets in the first hour (issue 26), through the real openai client and the
loopback server: spending caps, option typos, masked secrets and reprs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.permsc import PSCRerank

from permsc_integrations.errors import ConfigurationError, SpendingCapError

pytestmark = pytest.mark.timeout(60)


def spec(server: Any, **options: Any) -> PSCRerank:
    return PSCRerank(
        backend="openai:scripted", backend_options={"base_url": server.base_url}, **options
    )


def nodes(kit: Any) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=text), score=0.5) for text, _ in kit.DOCS]


def test_the_ranker_cap_is_the_reranks_and_survives_an_option_change(kit, server) -> None:
    before = server.request_count
    rerank = spec(
        server, num_permutations=4, ranker_cap="calls=6", prices="1,2", top_n=2, max_concurrency=1
    )
    query = QueryBundle("q")
    first = rerank.postprocess_nodes(nodes(kit), query)
    assert first[0].node.metadata["psc"]["usage"]["cost"] > 0
    rerank.top_n = 3  # rebuilds the core ranker: the cap is not refilled
    with pytest.raises(SpendingCapError) as caught:  # 4 more calls needed, 2 left: not started
        rerank.postprocess_nodes(nodes(kit), query)
    assert (caught.value.scope, caught.value.limit, caught.value.needed) == ("ranker", "calls", 4)
    assert server.request_count - before == 4 and caught.value.spent.calls == 4
    rerank.close()


def test_concurrent_reranks_under_a_ranker_cap_rank_what_the_cap_pays_for(kit, server) -> None:
    # 5 nodes in windows of 2 at m = 4: three blocks, then one window of two (its 2 orders):
    # 14 calls a rerank
    rerank = spec(server, num_permutations=4, window_size=2, ranker_cap="calls=32", top_n=1)
    before = server.request_count

    async def four() -> list[Any]:
        reranks = [rerank.apostprocess_nodes(nodes(kit), QueryBundle("q")) for _ in range(4)]
        return await asyncio.gather(*reranks, return_exceptions=True)

    outcomes = asyncio.run(four())
    ranked = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, SpendingCapError)]
    # before: the four started at once, their first rounds spent the cap, none finished
    assert len(ranked) == 2 and len(refused) == 2 and server.request_count - before == 28
    assert all(r[0].node.get_content() == kit.oracle_texts(1)[0] for r in ranked)
    assert all(e.needed == 14 and e.usage is not None and e.usage.calls == 0 for e in refused)
    rerank.close()


def test_a_typo_in_backend_options_fails_at_construction_with_a_suggestion(server) -> None:
    with pytest.raises(ConfigurationError, match=r"'base_ulr' for the openai backend.*'base_url'"):
        PSCRerank(backend="openai:scripted", backend_options={"base_ulr": server.base_url})


def test_an_unknown_attribute_set_later_is_refused_with_a_suggestion(server) -> None:
    rerank = spec(server, num_permutations=2)
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        rerank.num_permutation = 3
    with pytest.raises(ConfigurationError, match="did you mean 'top_n'"):
        rerank.top_m = 3
    assert rerank.num_permutations == 2
    rerank.close()


def test_from_dict_without_the_secrets_is_refused_not_sent_masked(server) -> None:
    url = f"http://user:pw@127.0.0.1:{server.port}/v1"
    rerank = PSCRerank(backend="openai:m", backend_options={"base_url": url, "api_key": "sk-live"})
    data = rerank.to_dict()
    assert "sk-live" not in str(data) and "pw@" not in str(data)
    before = server.request_count
    with pytest.raises(ConfigurationError, match="masked placeholder"):
        PSCRerank.from_dict(data)
    again = PSCRerank.from_dict(data, backend_options={"base_url": url, "api_key": "sk-live"})
    assert again.backend_options["api_key"] == "sk-live"
    assert server.request_count == before
    rerank.close()
    again.close()


def test_repr_shows_only_what_identifies_the_configuration(kit, server) -> None:
    llm = kit.openai_like(server)
    llm.api_key = "sk-live"
    rerank = PSCRerank(llm=llm, num_permutations=3)
    for text in (repr(rerank), str(rerank)):
        assert "OpenAILike(model='scripted-ranker')" in text and "num_permutations=3" in text
        for internal in ("callback_manager", "object at", "sk-live", "aggregator=", "function"):
            assert internal not in text
