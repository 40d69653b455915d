"""What real LlamaIndex apps meet: one PSCRerank shared by threads and event loops, typos in
options, llm= and Settings.llm, a finite top_n, usage that stays out of the LLM's text, token
counting, serialisation round trips and secrets (real OpenAILike and openai clients against
the loopback server)."""

from __future__ import annotations

import asyncio
import copy
import pickle
import sys
import threading
import traceback
from typing import Any

import pytest
from llama_index.core import Settings
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.llms import MockLLM
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.permsc import PSCRerank

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.testing import Reply, oracle_responder

pytestmark = pytest.mark.timeout(60)


def nodes(kit: Any) -> list[NodeWithScore]:
    ranked = sorted(kit.DOCS, key=lambda d: d[1])  # worst first
    return [
        NodeWithScore(node=TextNode(text=text, metadata={"source": f"doc{k}"}), score=0.9 - k / 10)
        for k, (text, _) in enumerate(ranked)
    ]


def stacks(title: str) -> str:
    """The stack of every live thread, so that a hang in CI says where it waits."""
    frames = sys._current_frames()
    return "\n".join(
        [title]
        + [
            f"--- {t.name}\n" + "".join(traceback.format_stack(frames[t.ident]))
            for t in threading.enumerate()
            if t.ident in frames
        ]
    )


def spec(server: Any, **options: Any) -> PSCRerank:
    return PSCRerank(
        backend="openai:scripted", backend_options={"base_url": server.base_url}, **options
    )


@pytest.mark.parametrize("via", ["spec", "llm"])
def test_one_rerank_from_threads_and_event_loops_never_hangs_and_keeps_its_cap(kit, server, via):
    """An LLM keeping one HTTP client (reuse_client=True, the default) serves every loop."""
    server.responder = lambda r: Reply(oracle_responder(kit.relevance)(r).text, delay=0.02)
    model: dict[str, Any] = {"llm": kit.openai_like(server)}
    if via == "spec":
        model = {"backend": "openai:m", "backend_options": {"base_url": server.base_url}}
    rerank = PSCRerank(num_permutations=8, max_concurrency=2, top_n=None, **model)
    done: list[list[str]] = []

    def sync_call() -> None:
        out = rerank.postprocess_nodes(nodes(kit), query_str=kit.QUERY)
        done.append([n.node.get_content() for n in out])

    def async_call() -> None:
        out = asyncio.run(rerank.apostprocess_nodes(nodes(kit), QueryBundle(kit.QUERY)))
        done.append([n.node.get_content() for n in out])

    server.reset()
    threads = [threading.Thread(target=f) for f in (sync_call, async_call) * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join(45)
    assert not any(t.is_alive() for t in threads), stacks("a caller hung")
    assert done == [kit.oracle_texts()] * 6
    assert server.max_in_flight == 2 and server.request_count == 6 * 8


def test_an_llm_used_from_several_event_loops_sends_each_request_once(kit, server) -> None:
    """Sync calls run on the bridge's loop, async ones on the app's, and each ``asyncio.run``
    is a new loop; the LLM's async client belongs to the first. Reused from another loop, a
    pooled connection sends the request, then fails to read the answer ("Event loop is
    closed") and the retry sends it again (issue 26)."""
    server.responder = oracle_responder(kit.relevance)
    rerank = PSCRerank(llm=kit.openai_like(server), num_permutations=3, top_n=None)
    sent: list[int] = []
    ranked: list[list[str]] = []

    async def counted(call: Any) -> None:
        before = server.request_count
        out = await call()
        sent.append(server.request_count - before)
        ranked.append([n.node.get_content() for n in out])
        assert all(n.node.metadata["psc"]["usage"]["retries"] == 0 for n in out)

    async def app() -> None:  # one long-lived loop: async and sync endpoints alternate
        for _ in range(3):
            await counted(lambda: rerank.apostprocess_nodes(nodes(kit), QueryBundle(kit.QUERY)))
            await counted(
                lambda: asyncio.to_thread(rerank.postprocess_nodes, nodes(kit), None, kit.QUERY)
            )

    asyncio.run(app())
    for _ in range(2):  # a script calling asyncio.run again and again
        asyncio.run(counted(lambda: rerank.apostprocess_nodes(nodes(kit), QueryBundle(kit.QUERY))))
    assert sent == [3] * 8
    assert ranked == [kit.oracle_texts()] * 8


def test_unknown_options_and_a_bad_top_n_are_refused(kit) -> None:
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        PSCRerank(llm=MockLLM(), num_permutation=5)
    with pytest.raises(ConfigurationError, match="top_n must be"):
        PSCRerank(llm=MockLLM(), top_n=0)


def test_llm_and_the_settings_default_like_llm_rerank(kit, server, monkeypatch) -> None:
    monkeypatch.setattr(Settings, "_llm", kit.openai_like(server))
    rerank = PSCRerank(num_permutations=2)  # no model given: Settings.llm
    assert rerank.top_n == 5  # finite, as LlamaIndex's reference rerankers
    out = rerank.postprocess_nodes(nodes(kit), query_str=kit.QUERY)
    assert [n.node.get_content() for n in out] == kit.oracle_texts(5)
    assert PSCRerank(llm=MockLLM()).model_name == "llama_index:unknown"


def test_metadata_usage_and_scores_stay_out_of_the_llms_text(kit, server) -> None:
    rerank = spec(server, num_permutations=3, top_n=2, keep_retrieval_score=True)
    given = nodes(kit)
    out = rerank.postprocess_nodes(given, query_str=kit.QUERY)
    psc = out[0].node.metadata["psc"]
    assert psc["rank"] == 1 and psc["usage"]["calls"] == 3 and psc["usage"]["prompt_tokens"] > 0
    by_text = {n.node.get_content(): n.score for n in given}
    assert out[0].node.metadata["retrieval_score"] == by_text[out[0].node.get_content()]
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        text = out[0].node.get_content(metadata_mode=mode)
        assert "psc" not in text and "retrieval_score" not in text and "source" in text
    assert all("psc" not in n.node.metadata for n in given)  # the inputs are untouched


def test_token_counting_sees_spec_string_calls(kit, server) -> None:
    counter = TokenCountingHandler()
    rerank = spec(server, num_permutations=3, callback_manager=CallbackManager([counter]))
    out = rerank.postprocess_nodes(nodes(kit), query_str=kit.QUERY)
    usage = out[0].node.metadata["psc"]["usage"]
    assert len(counter.llm_token_counts) == 3
    assert counter.prompt_llm_token_count == usage["prompt_tokens"]
    assert counter.completion_llm_token_count == usage["completion_tokens"]


def test_to_dict_from_dict_round_trip_and_copies(kit, server) -> None:
    rerank = spec(server, num_permutations=2, top_n=3, aggregator="borda")
    rerank.postprocess_nodes(nodes(kit), query_str=kit.QUERY)
    data = rerank.to_dict()
    again = PSCRerank.from_dict(data, backend_options={"base_url": server.base_url})
    assert (again.backend, again.num_permutations, again.top_n) == ("openai:scripted", 2, 3)
    for clone in (again, copy.deepcopy(rerank), pickle.loads(pickle.dumps(rerank))):
        out = clone.postprocess_nodes(nodes(kit), query_str=kit.QUERY)
        assert [n.node.get_content() for n in out] == kit.oracle_texts(3)


def test_secrets_never_show(server) -> None:
    url = f"http://admin:hunter2@127.0.0.1:{server.port}/v1"
    rerank = PSCRerank(backend="openai:m", backend_options={"base_url": url, "api_key": "sk-live"})
    texts = [repr(rerank), str(rerank.model_dump()), rerank.to_json(), rerank.model_name]
    assert not [t for t in texts if "hunter2" in t or "sk-live" in t]
