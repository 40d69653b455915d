"""Real rerank clients against a real ``permsc serve``: the same order as ``PSCRanker``.

The clients (the ``serve-test`` extra) are test-only dependencies; each test skips cleanly
when its client is not installed. Ends with schemathesis fuzzing /openapi.json: no answer
may be a server error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("pydantic")


@pytest.fixture(scope="module")
def served(module_serve_process, serve_case) -> Iterator[tuple[Any, Any, list[str]]]:
    """One server for the module's clients, and the order PSCRanker gives the same list
    against the same upstream."""
    from permsc_integrations.testing import ScriptedOpenAIServer

    with ScriptedOpenAIServer(serve_case.responder) as upstream:
        flags = serve_case.flags(upstream, "-m", "6")
        proc = module_serve_process(*flags, env={"PERMSC_API_KEYS": serve_case.key})
        order = serve_case.direct_order(upstream, num_permutations=6)
        yield proc, upstream, [serve_case.docs[i] for i in order]
        proc.stop()


def test_cohere_client_v2(served, serve_case) -> None:
    cohere = pytest.importorskip("cohere")
    proc, _, expected = served
    client = cohere.ClientV2(api_key=serve_case.key, base_url=proc.url)
    answer = client.rerank(
        model="permsc", query=serve_case.query, documents=list(serve_case.docs), top_n=5
    )
    assert [serve_case.docs[r.index] for r in answer.results] == expected[:5]
    assert answer.meta.billed_units.search_units == 1
    with pytest.raises(cohere.errors.UnauthorizedError):
        cohere.ClientV2(api_key="wrong-key-x", base_url=proc.url).rerank(
            model="permsc", query=serve_case.query, documents=list(serve_case.docs)
        )


async def test_cohere_async_client_v2(served, serve_case) -> None:
    cohere = pytest.importorskip("cohere")
    proc, _, expected = served
    client = cohere.AsyncClientV2(api_key=serve_case.key, base_url=proc.url)
    answer = await client.rerank(
        model="permsc", query=serve_case.query, documents=list(serve_case.docs)
    )
    assert [serve_case.docs[r.index] for r in answer.results] == expected


def test_langchain_cohere_rerank(served, serve_case) -> None:
    pytest.importorskip("langchain_cohere")
    from langchain_cohere import CohereRerank
    from langchain_core.documents import Document

    proc, _, expected = served
    reranker = CohereRerank(
        model="permsc", base_url=proc.url, cohere_api_key=serve_case.key, top_n=8
    )
    docs = [Document(page_content=d, metadata={"k": k}) for k, d in enumerate(serve_case.docs)]
    ranked = reranker.compress_documents(docs, serve_case.query)
    assert [d.page_content for d in ranked] == expected
    scores = [d.metadata["relevance_score"] for d in ranked]
    assert scores == sorted(scores, reverse=True)


def test_llama_index_cohere_rerank(served, serve_case) -> None:
    pytest.importorskip("llama_index.postprocessor.cohere_rerank")
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.cohere_rerank import CohereRerank

    proc, _, expected = served
    reranker = CohereRerank(model="permsc", api_key=serve_case.key, base_url=proc.url, top_n=4)
    nodes = [NodeWithScore(node=TextNode(text=d), score=0.0) for d in serve_case.docs]
    ranked = reranker.postprocess_nodes(nodes, query_bundle=QueryBundle(serve_case.query))
    assert [n.node.get_content() for n in ranked] == expected[:4]


def test_haystack_cohere_ranker(served, serve_case, monkeypatch) -> None:
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    pytest.importorskip("haystack_integrations.components.rankers.cohere")
    from haystack import Document
    from haystack.utils import Secret
    from haystack_integrations.components.rankers.cohere import CohereRanker

    proc, _, expected = served
    ranker = CohereRanker(
        model="permsc", api_key=Secret.from_token(serve_case.key), api_base_url=proc.url, top_k=8
    )
    ranked = ranker.run(
        query=serve_case.query, documents=[Document(content=d) for d in serve_case.docs]
    )
    assert [d.content for d in ranked["documents"]] == expected


@pytest.fixture
def litellm(monkeypatch) -> Any:
    """LiteLLM, imported offline: its model cost map from the package, not fetched."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return pytest.importorskip("litellm")


def _answered(proc: Any, serve_case: Any, route: str) -> float:
    """How many requests ``route`` answered 200 so far (the server's metrics)."""
    import httpx

    text = httpx.get(f"{proc.url}/metrics", headers=serve_case.auth).text
    line = f'permsc_serve_requests_total{{model="permsc",route="{route}",status="200"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0][len(line) :]) if found else 0.0


def test_litellm_rerank(served, serve_case, litellm) -> None:
    proc, _, expected = served
    before = _answered(proc, serve_case, "/v2/rerank")
    answer = litellm.rerank(
        model="cohere/permsc",
        api_base=proc.url,
        api_key=serve_case.key,
        query=serve_case.query,
        documents=list(serve_case.docs),
        top_n=5,
    )
    assert [serve_case.docs[r["index"]] for r in answer.results] == expected[:5]
    assert _answered(proc, serve_case, "/v2/rerank") == before + 1  # the path LiteLLM appends


async def test_litellm_proxy_entry_of_the_docs(served, serve_case, litellm, monkeypatch) -> None:
    """docs/serve.md's LiteLLM proxy entry, read as the proxy reads it, through the Router that
    serves its ``/rerank``."""
    yaml = pytest.importorskip("yaml")
    proc, _, expected = served
    text = (Path(__file__).resolve().parents[1] / "docs" / "serve.md").read_text()
    entry = re.search(r"```yaml\n(model_list:.*?)```", text, re.S)
    assert entry is not None, "docs/serve.md has no LiteLLM model_list"
    config = yaml.safe_load(entry.group(1).replace("http://127.0.0.1:8080", proc.url))
    monkeypatch.setenv("PERMSC_CLIENT_KEY", serve_case.key)
    router = litellm.Router(model_list=config["model_list"])
    name = config["model_list"][0]["model_name"]
    answer = await router.arerank(
        model=name, query=serve_case.query, documents=list(serve_case.docs), top_n=8
    )
    assert [serve_case.docs[r["index"]] for r in answer.results] == expected


def test_fuzzing_the_openapi_document_finds_no_server_error(
    scripted_server, serve_process, serve_case
):
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings
    from schemathesis.generation.modes import GenerationMode

    upstream = scripted_server(serve_case.responder)
    flags = serve_case.flags(upstream, "-m", "2", "--max-documents", "12")
    proc = serve_process(*flags, env={"PERMSC_API_KEYS": serve_case.key})
    schema = schemathesis.openapi.from_url(f"{proc.url}/openapi.json")
    failures: list[str] = []
    statuses: list[int] = []
    for found in schema.get_all_operations():
        operation = found.ok()
        modes = [GenerationMode.POSITIVE]
        if operation.method.upper() == "POST":  # a GET here takes nothing to get wrong
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:
            strategy = operation.as_strategy(mode, headers=serve_case.auth)

            @settings(
                max_examples=int(os.environ.get("PERMSC_FUZZ_EXAMPLES", "15")),
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=strategy)
            def check(case: Any) -> None:
                response = case.call(base_url=proc.url, timeout=30)
                statuses.append(response.status_code)
                if response.status_code >= 500:
                    failures.append(f"{case.method} {case.path}: {response.status_code}")

            check()
    assert len(statuses) > 60 and 200 in statuses and 400 in statuses
    assert not failures, failures[:5]
