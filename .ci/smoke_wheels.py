"""Rank through the installed wheels against the project's test server, as a user would.

``.ci/run`` builds the four wheels, installs them into a fresh virtual environment with no
pins and no editable installs (so pip resolves today's releases, as it does for a user), and
runs this script with ``python -I`` from outside the checkout, once per step:

``core``        ``permsc-integrations[openai,testing]`` alone: exact Kemeny (HiGHS is a core
                dependency), ``PSCRanker("openai:...")``,
                sync and async (the openai SDK that resolves for the core alone, 3.x today,
                is built on httpx2 and brings no ``httpx``);
``adapters``    the three adapter wheels added: LangChain's ``PSCReranker``, LlamaIndex's
                ``PSCRerank`` and Haystack's ``PSCRanker`` rank through the core's openai
                backend;
``frameworks``  their model extras added: ``ChatOpenAI``, ``OpenAILike`` and Haystack's
                ``OpenAIChatGenerator`` (Haystack's own) as the model.

Every ranking is checked against the true order of a scripted server
(:class:`permsc_integrations.testing.ScriptedOpenAIServer` with an oracle responder). Each
check prints one ``ok``/``FAIL`` line; a failure prints its traceback and exits 1.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

QUERY = "which animal lives longest?"
RELEVANCE = {  # passage -> true relevance; shown to the model in shuffled orders
    "Mayflies live for about a day.": 1.0,
    "Tortoises can live for more than 150 years.": 5.0,
    "Dogs live for 10 to 13 years.": 3.0,
    "Bowhead whales can live for over 200 years.": 6.0,
    "Mice live for about two years.": 2.0,
}
PASSAGES = list(RELEVANCE)
BEST_FIRST = sorted(PASSAGES, key=lambda text: -RELEVANCE[text])
TOP_N = 3
SHOWN = (
    "openai",
    "httpx",
    "httpx2",
    "anyio",
    "tenacity",
    "numpy",
    "highspy",
    "langchain-core",
    "langchain-openai",
    "llama-index-core",
    "llama-index-llms-openai-like",
    "haystack-ai",
)


def installed() -> str:
    found = []
    for name in SHOWN:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


def check_installed_not_checkout() -> None:
    import permsc_integrations

    where = Path(permsc_integrations.__file__).resolve()
    assert "site-packages" in where.parts, f"permsc_integrations imported from {where}"
    assert (where.parent / "py.typed").is_file(), "py.typed missing from the core wheel"
    assert (where.parent / "data" / "demo.jsonl").is_file(), "data/ missing from the core wheel"
    assert version("permsc-integrations") == permsc_integrations.__version__


def check_adapters_typed() -> None:
    import haystack_integrations.components.rankers.permsc as hs
    import langchain_permsc
    import llama_index.postprocessor.permsc as li

    for module in (langchain_permsc, li, hs):
        where = Path(module.__file__).resolve().parent
        assert "site-packages" in where.parts, f"{module.__name__} imported from {where}"
        assert (where / "py.typed").is_file(), f"py.typed missing from {module.__name__}'s wheel"


def check_default_aggregator_exact() -> None:
    """A plain install has HiGHS, so Kemeny on a list past its DP sizes is exact, as the
    README says (issue 26: without highspy it fell back to local search)."""
    import random

    from permsc_integrations.aggregators.kemeny import kemeny_solve

    rng = random.Random(0)
    rankings = [rng.sample(range(30), 30) for _ in range(20)]
    solution = kemeny_solve(rankings, n_items=30, time_limit=60)
    assert solution.exact and "no highspy" not in solution.method, solution


def core(base_url: str) -> None:
    from permsc_integrations import PSCRanker

    options = {"base_url": base_url}
    with PSCRanker("openai:smoke", num_permutations=4, backend_options=options) as ranker:
        result = ranker.rank(QUERY, PASSAGES)
    expect([PASSAGES[i] for i in result.order], BEST_FIRST, "PSCRanker.rank")
    assert result.usage.calls == 4, result.usage

    async def arank() -> list[str]:
        async with PSCRanker("openai:smoke", num_permutations=4, backend_options=options) as ranker:
            result = await ranker.arank(QUERY, PASSAGES)
        return [PASSAGES[i] for i in result.order]

    expect(asyncio.run(arank()), BEST_FIRST, "PSCRanker.arank")


def core_errors(base_url: str) -> None:
    """The SDK's errors become the library's typed errors (a 429 is retried, a refused
    connection is a BackendConnectionError)."""
    from permsc_integrations import BackendConnectionError, GenerationSettings, PSCRanker
    from permsc_integrations.testing import Fault, ScriptedOpenAIServer, oracle_responder, sequence

    responder = sequence(Fault.status(429, retry_after=0), then=oracle_responder(RELEVANCE.get))
    with (
        ScriptedOpenAIServer(responder) as server,
        PSCRanker(
            "openai:smoke", num_permutations=2, backend_options={"base_url": server.base_url}
        ) as ranker,
    ):
        result = ranker.rank(QUERY, PASSAGES)
    expect([PASSAGES[i] for i in result.order], BEST_FIRST, "PSCRanker.rank after a 429")
    assert result.usage.retries == 1, result.usage
    backend = core_backend(server.base_url)  # that server is stopped now

    async def refused() -> None:
        try:
            await backend.acomplete([{"role": "user", "content": "rank"}], GenerationSettings())
        finally:
            await backend.aclose()

    try:
        asyncio.run(refused())
    except BackendConnectionError:
        pass
    else:
        raise AssertionError("a refused connection raised no BackendConnectionError")


def core_backend(base_url: str) -> Any:
    from permsc_integrations import resolve_backend

    return resolve_backend("openai:smoke", base_url=base_url)


def langchain(model: Any) -> None:
    from langchain_core.documents import Document
    from langchain_permsc import PSCReranker

    reranker = PSCReranker(backend=model, top_n=TOP_N, num_permutations=4)
    docs = [Document(page_content=text) for text in PASSAGES]
    got = reranker.compress_documents(docs, QUERY)
    expect([d.page_content for d in got], BEST_FIRST[:TOP_N], "PSCReranker.compress_documents")
    got = asyncio.run(reranker.acompress_documents(docs, QUERY))
    expect([d.page_content for d in got], BEST_FIRST[:TOP_N], "PSCReranker.acompress_documents")


def llama_index(model: Any) -> None:
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.permsc import PSCRerank

    rerank = PSCRerank(backend=model, top_n=TOP_N, num_permutations=4)
    nodes = [NodeWithScore(node=TextNode(text=text), score=0.5) for text in PASSAGES]
    got = rerank.postprocess_nodes(nodes, query_str=QUERY)
    expect([n.node.get_content() for n in got], BEST_FIRST[:TOP_N], "PSCRerank.postprocess_nodes")
    got = asyncio.run(rerank.apostprocess_nodes(nodes, query_bundle=QueryBundle(QUERY)))
    expect([n.node.get_content() for n in got], BEST_FIRST[:TOP_N], "PSCRerank.apostprocess_nodes")


def haystack(model: Any) -> None:
    from haystack import Document
    from haystack_integrations.components.rankers.permsc import PSCRanker

    key = "chat_generator" if hasattr(model, "run") else "backend"
    ranker = PSCRanker(top_k=TOP_N, num_permutations=4, **{key: model})
    docs = [Document(content=text) for text in PASSAGES]
    got = ranker.run(query=QUERY, documents=docs)["documents"]
    expect([d.content for d in got], BEST_FIRST[:TOP_N], "Haystack PSCRanker.run")
    got = asyncio.run(ranker.run_async(query=QUERY, documents=docs))["documents"]
    expect([d.content for d in got], BEST_FIRST[:TOP_N], "Haystack PSCRanker.run_async")


def haystack_saved(base_url: str) -> None:
    """A pipeline with the ranker through YAML under Haystack's default, safe loading."""
    from haystack import Document, Pipeline
    from haystack_integrations.components.rankers.permsc import PSCRanker

    pipe = Pipeline()
    options = {"base_url": base_url}
    ranker = PSCRanker(
        backend="openai:smoke", top_k=TOP_N, num_permutations=4, backend_options=options
    )
    pipe.add_component("ranker", ranker)
    loaded = Pipeline.loads(pipe.dumps())
    docs = [Document(content=text) for text in PASSAGES]
    got = loaded.run({"ranker": {"query": QUERY, "documents": docs}})["ranker"]["documents"]
    expect([d.content for d in got], BEST_FIRST[:TOP_N], "Haystack Pipeline.loads(dumps())")


def openai_chat_generator(base_url: str) -> Any:
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    return OpenAIChatGenerator(
        model="smoke", api_base_url=base_url, api_key=Secret.from_token("unused"), max_retries=0
    )


def chat_openai(base_url: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="smoke", base_url=base_url, api_key="unused", max_retries=0)


def openai_like(base_url: str) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model="smoke", api_base=base_url, api_key="unused", is_chat_model=True, max_retries=0
    )


def expect(got: list[str], want: list[str], what: str) -> None:
    if got != want:
        raise AssertionError(f"{what} ranked wrongly:\n  got  {got}\n  want {want}")


def checks(step: str, base_url: str) -> list[tuple[str, Callable[[], None]]]:
    steps: dict[str, list[tuple[str, Callable[[], None]]]] = {
        "core": [
            ("the core is the installed wheel", check_installed_not_checkout),
            (
                "core: the default aggregator is exact (HiGHS installed)",
                check_default_aggregator_exact,
            ),
            ("core: PSCRanker('openai:...') rank and arank", lambda: core(base_url)),
            ("core: SDK errors become typed errors", lambda: core_errors(base_url)),
        ],
        "adapters": [
            ("the three adapter wheels ship py.typed", check_adapters_typed),
            (
                "LangChain: PSCReranker over the core's openai backend",
                lambda: langchain(core_backend(base_url)),
            ),
            (
                "LlamaIndex: PSCRerank over the core's openai backend",
                lambda: llama_index(core_backend(base_url)),
            ),
            (
                "Haystack: PSCRanker over the core's openai backend",
                lambda: haystack(core_backend(base_url)),
            ),
            ("Haystack: a saved pipeline loads and ranks", lambda: haystack_saved(base_url)),
        ],
        "frameworks": [
            ("LangChain: PSCReranker over ChatOpenAI", lambda: langchain(chat_openai(base_url))),
            ("LlamaIndex: PSCRerank over OpenAILike", lambda: llama_index(openai_like(base_url))),
            (
                "Haystack: PSCRanker over OpenAIChatGenerator",
                lambda: haystack(openai_chat_generator(base_url)),
            ),
        ],
    }
    return steps[step]


def main(step: str) -> int:
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network here

    print(f"installed: {installed()}", flush=True)
    failed = 0
    with ScriptedOpenAIServer(oracle_responder(RELEVANCE.__getitem__)) as server:
        for name, check in checks(step, server.base_url):
            try:
                check()
            except BaseException:  # noqa: BLE001 - every failure is reported, then counted
                failed += 1
                print(f"FAIL {name}", flush=True)
                traceback.print_exc()
            else:
                print(f"ok   {name}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("core", "adapters", "frameworks"):
        sys.exit("usage: python -I .ci/smoke_wheels.py core|adapters|frameworks")
    sys.exit(main(sys.argv[1]))
