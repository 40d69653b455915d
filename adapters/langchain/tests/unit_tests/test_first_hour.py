"""What a new user meets in the first hour (issue 26), through the real openai client and the
loopback server: spending caps, option typos, masked secrets and reprs."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from langchain_permsc import PSCReranker

from permsc_integrations.errors import (
    ConfigurationError,
    MissingDependencyError,
    SpendingCapError,
)
from permsc_integrations.testing import ScriptedOpenAIServer

pytestmark = pytest.mark.timeout(60)


def spec(server: ScriptedOpenAIServer, **options: Any) -> PSCReranker:
    return PSCReranker(
        backend="openai:scripted", backend_options={"base_url": server.base_url}, **options
    )


def test_the_ranker_cap_is_the_rerankers_and_survives_an_option_change(corpus, server) -> None:
    reranker = spec(
        server, num_permutations=4, ranker_cap="calls=6", prices="1,2", top_n=2, max_concurrency=1
    )
    first = reranker.compress_documents(corpus.documents(), "q")
    assert first[0].metadata["psc"]["usage"]["cost"] > 0  # priced usage in the metadata
    reranker.top_n = 3  # rebuilds the core ranker: the cap is not refilled
    with pytest.raises(SpendingCapError) as caught:  # 4 more calls needed, 2 left: not started
        asyncio.run(reranker.acompress_documents(corpus.documents(), "q"))
    assert (caught.value.scope, caught.value.limit, caught.value.needed) == ("ranker", "calls", 4)
    assert server.request_count == 4 and caught.value.spent.calls == 4
    reranker.close()


@pytest.mark.parametrize("way", ["batch", "abatch"])
def test_batch_under_a_ranker_cap_ranks_what_the_cap_pays_for(corpus, server, way) -> None:
    # 8 documents in windows of 4 at m = 4: two blocks, then one window: 12 calls a query
    reranker = spec(server, num_permutations=4, window_size=4, ranker_cap="calls=24")
    inputs = [{"query": "q", "documents": corpus.documents()}] * 4
    if way == "batch":
        outcomes = reranker.batch(inputs, return_exceptions=True)
    else:
        outcomes = asyncio.run(reranker.abatch(inputs, return_exceptions=True))
    ranked = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, SpendingCapError)]
    # before: the four started at once, their first rounds spent the cap, none finished
    assert len(ranked) == 2 and len(refused) == 2 and server.request_count == 24
    best = corpus.expected_order(corpus.texts)[0]
    assert all(docs[0].page_content == best for docs in ranked)
    assert all(e.needed == 12 and e.usage is not None and e.usage.calls == 0 for e in refused)
    reranker.close()


def test_a_request_cap_stops_one_rerank(corpus, server) -> None:
    reranker = spec(server, num_permutations=4, request_cap="calls=2", max_concurrency=1)
    with pytest.raises(SpendingCapError) as caught:
        reranker.invoke({"query": "q", "documents": corpus.documents()})
    assert caught.value.scope == "request" and server.request_count == 2
    assert caught.value.usage is not None and caught.value.usage.calls == 2
    reranker.close()


def test_a_typo_in_backend_options_fails_at_construction_with_a_suggestion(server) -> None:
    with pytest.raises(ConfigurationError, match=r"'base_ulr' for the openai backend.*'base_url'"):
        PSCReranker(backend="openai:scripted", backend_options={"base_ulr": server.base_url})
    assert server.request_count == 0


@pytest.mark.parametrize(
    ("hidden", "backend", "options", "install"),
    [
        ("openai", "openai:gpt-4o-mini", {}, "permsc-integrations[openai]"),
        ("torch", "embedded", {}, "permsc-integrations[embedded]"),  # torch and the model
        ("llama_cpp", "embedded", {"engine": "llamacpp"}, "permsc-integrations[llamacpp]"),
    ],
)
def test_a_spec_whose_extra_is_missing_is_refused_at_construction(
    monkeypatch, hidden, backend, options, install
) -> None:
    """A bare install (no openai extra) built a reranker on "openai:..." and failed only at
    its first call; the missing package is found (not imported) as the reranker is built."""
    monkeypatch.setitem(sys.modules, hidden, None)  # as if not installed
    with pytest.raises(MissingDependencyError) as caught:
        PSCReranker(backend=backend, backend_options=options)
    assert f"pip install '{install}'" in str(caught.value)


def test_an_unknown_attribute_set_later_is_refused_with_a_suggestion(server) -> None:
    reranker = spec(server, num_permutations=2)
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        reranker.num_permutation = 3
    with pytest.raises(ConfigurationError, match=r"'base_ulr'.*did you mean 'base_url'"):
        reranker.backend_options = {"base_ulr": server.base_url}
    assert reranker.num_permutations == 2 and reranker.backend_options == {
        "base_url": server.base_url
    }
    reranker.close()


def test_a_dumped_reranker_with_masked_secrets_is_refused(server) -> None:
    reranker = PSCReranker(
        backend="openai:m", backend_options={"base_url": server.base_url, "api_key": "sk-live"}
    )
    dumped = reranker.model_dump()
    assert dumped["backend_options"]["api_key"] == "***"
    with pytest.raises(ConfigurationError, match="api_key holds the masked placeholder"):
        PSCReranker(**dumped)
    reranker.close()


def test_repr_shows_only_what_identifies_the_configuration(server) -> None:
    model = ChatOpenAI(
        model="gpt-4o-mini", base_url="http://u:pw@h/v1", api_key="sk-live", max_retries=0
    )
    reranker = PSCReranker(backend=model, num_permutations=3)
    for text in (repr(reranker), str(reranker)):
        assert "ChatOpenAI(model_name='gpt-4o-mini')" in text and "num_permutations=3" in text
        for internal in ("client", "object at", "profile", "sk-live", "pw", "aggregator="):
            assert internal not in text
    keyed = PSCReranker(
        backend="openai:m", backend_options={"base_url": server.base_url, "api_key": "sk-1"}
    )
    spec_text = repr(keyed)
    assert "'api_key': '***'" in spec_text and "sk-1" not in spec_text
