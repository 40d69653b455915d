"""PSCRerank called directly: inputs stay untouched, typed errors, prompts, settings."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.permsc import PSCRerank, default_rerank_prompt

from permsc_integrations.errors import ConfigurationError, UnknownNameError


def _nodes(kit: Any) -> list[NodeWithScore]:
    # Worst first, retriever-style scores; metadata is included in the text the model sees.
    ranked = sorted(kit.DOCS, key=lambda d: d[1])
    return [
        NodeWithScore(node=TextNode(text=text, metadata={"source": f"doc{k}"}), score=0.9 - k / 10)
        for k, (text, _) in enumerate(ranked)
    ]


def test_is_a_node_postprocessor_with_a_class_name():
    assert issubclass(PSCRerank, BaseNodePostprocessor)
    assert PSCRerank.class_name() == "PSCRerank"
    rerank = PSCRerank(backend=MockLLM(), top_n=2, num_permutations=3, aggregator="borda")
    dumped = rerank.to_dict()
    assert dumped["class_name"] == "PSCRerank"
    assert dumped["top_n"] == 2 and dumped["num_permutations"] == 3
    assert dumped["aggregator"] == "borda"
    assert dumped["backend"] is None  # an LLM object is not serialised: pass it again
    assert "llm" not in dumped


def test_returns_new_nodes_and_leaves_inputs_unchanged(kit, server):
    nodes = _nodes(kit)
    snapshot = copy.deepcopy(nodes)
    rerank = PSCRerank(backend=kit.openai_like(server), num_permutations=3)
    out = rerank.postprocess_nodes(nodes, query_str=kit.QUERY)
    assert [n.node.get_content() for n in out] == kit.oracle_texts()
    assert all(o is not n for o in out for n in nodes)
    assert [(n.node.node_id, n.score, n.node.metadata) for n in nodes] == [
        (n.node.node_id, n.score, n.node.metadata) for n in snapshot
    ]
    assert sorted(n.node.node_id for n in out) == sorted(n.node.node_id for n in nodes)


def test_needs_a_query_bundle(kit):
    rerank = PSCRerank(backend=MockLLM())
    with pytest.raises(ConfigurationError, match="needs the query") as caught:
        rerank.postprocess_nodes(_nodes(kit))
    assert isinstance(caught.value, ValueError)  # what LlamaIndex's own rerankers raise


async def test_no_nodes_no_calls(kit, server):
    rerank = PSCRerank(backend=kit.openai_like(server))
    before = server.request_count
    assert rerank.postprocess_nodes([], query_str=kit.QUERY) == []
    assert await rerank.apostprocess_nodes([], QueryBundle(kit.QUERY)) == []
    assert server.request_count == before


def test_bad_backend_and_options_fail_at_construction():
    with pytest.raises(UnknownNameError, match="no-such-kind"):
        PSCRerank(backend="no-such-kind:model")
    with pytest.raises(ConfigurationError, match="backend_options"):
        PSCRerank(backend=MockLLM(), backend_options={"base_url": "http://x"})
    with pytest.raises(ConfigurationError):
        PSCRerank(backend=object())


def test_changing_a_setting_rebuilds_the_ranker(kit, server):
    rerank = PSCRerank(backend=kit.openai_like(server), num_permutations=2)
    first = rerank.core_ranker()
    rerank.callback_manager = rerank.callback_manager  # not a ranker setting
    assert rerank.core_ranker() is first
    rerank.num_permutations = 5
    assert rerank.core_ranker() is not first
    before = server.request_count
    out = rerank.postprocess_nodes(_nodes(kit), query_str=kit.QUERY)
    psc = out[0].node.metadata["psc"]
    assert psc["samples"] == 5  # the new setting was used
    # every call reached the server (a loaded machine may add a retry: counted in both)
    assert server.request_count - before == psc["usage"]["calls"] >= 5


def test_prompt_swapped_through_the_prompt_mixin(kit, server):
    rerank = PSCRerank(backend=kit.openai_like(server), num_permutations=2, top_n=2)
    assert rerank.get_prompts() == {}  # the core's RankGPT prompt is used
    template = PromptTemplate(
        "Passages about pets:\n{context_str}\nWhich answer '{query_str}' best? "
        "Order all {num} as [] > []."
    )
    rerank.update_prompts({"rerank_prompt": template})
    assert rerank.get_prompts() == {"rerank_prompt": template}
    start = server.request_count
    out = rerank.postprocess_nodes(_nodes(kit), query_str=kit.QUERY)
    assert [n.node.get_content() for n in out] == kit.oracle_texts(2)
    sent = [r for r in server.requests[start:]]
    assert len(sent) == 2
    for record in sent:
        (message,) = record.messages
        assert message["role"] == "user"
        assert message["content"].startswith("Passages about pets:\n[1] ")
        assert f"Which answer '{kit.QUERY}' best? Order all 5 as [] > []." in message["content"]


def test_chat_template_with_a_system_message(kit, server):
    template = ChatPromptTemplate.from_messages(
        [("system", "You rank passages."), ("user", "{query_str}\n{context_str}")]
    )
    rerank = PSCRerank(backend=kit.openai_like(server), num_permutations=2, rerank_prompt=template)
    start = server.request_count
    out = rerank.postprocess_nodes(_nodes(kit), query_str=kit.QUERY)
    assert [n.node.get_content() for n in out] == kit.oracle_texts()
    roles = [m["role"] for m in server.requests[start].messages]
    assert roles == ["system", "user"]


def test_default_template_is_a_working_starting_point(kit, server):
    rerank = PSCRerank(
        backend=kit.openai_like(server), num_permutations=2, rerank_prompt=default_rerank_prompt()
    )
    out = rerank.postprocess_nodes(_nodes(kit), query_str=kit.QUERY)
    assert [n.node.get_content() for n in out] == kit.oracle_texts()


@pytest.mark.parametrize(
    "template, message",
    [
        (PromptTemplate("{query_str} only"), "must contain {context_str}"),
        (PromptTemplate("{context_str} {tone}"), r"\['tone'\]"),
        (
            ChatPromptTemplate.from_messages([("user", "{context_str}"), ("assistant", "ok")]),
            "one user message",
        ),
    ],
)
def test_unusable_templates_are_refused_when_set(template, message):
    rerank = PSCRerank(backend=MockLLM())
    with pytest.raises(ConfigurationError, match=message):
        rerank.update_prompts({"rerank_prompt": template})
    assert rerank.get_prompts() == {}


def test_partial_variables_are_bound():
    template = PromptTemplate("{tone} ranking.\n{context_str}").partial_format(tone="Careful")
    rerank = PSCRerank(backend=MockLLM(), rerank_prompt=template)
    messages = rerank.core_ranker().engine.prompt.render("q", ["a", "b"])
    assert messages[-1]["content"] == "Careful ranking.\n[1] a\n[2] b"


@pytest.mark.parametrize("via", ["llm", "core"])
def test_one_reranker_serves_sync_calls_and_several_event_loops(kit, server, via):
    if via == "llm":
        rerank = PSCRerank(backend=kit.openai_like(server), num_permutations=2)
    else:
        options = {"base_url": server.base_url, "api_key": "test"}
        rerank = PSCRerank(backend="openai:m", backend_options=options, num_permutations=2)
    nodes = _nodes(kit)

    async def in_a_loop() -> list[list[str]]:
        native = await rerank.apostprocess_nodes(nodes, QueryBundle(kit.QUERY))
        # A sync call from inside a running loop (a notebook) goes through the bridge.
        bridged = rerank.postprocess_nodes(nodes, query_str=kit.QUERY)
        return [[n.node.get_content() for n in out] for out in (native, bridged)]

    first = rerank.postprocess_nodes(nodes, query_str=kit.QUERY)
    runs = [asyncio.run(in_a_loop()) for _ in range(2)]
    assert [n.node.get_content() for n in first] == kit.oracle_texts()
    assert all(texts == kit.oracle_texts() for run in runs for texts in run)
    rerank.close()


def test_swapping_the_backend_reaches_the_new_one(kit, server):
    rerank = PSCRerank(backend=MockLLM(), num_permutations=2)
    assert rerank.model_name == "llama_index:unknown"
    rerank.backend = kit.openai_like(server)
    assert rerank.model_name == "llama_index:scripted-ranker"
    before = server.request_count
    out = rerank.postprocess_nodes(_nodes(kit), query_str=kit.QUERY)
    assert server.request_count - before == 2
    assert [n.node.get_content() for n in out] == kit.oracle_texts()


def test_node_metadata_carries_the_chance_of_the_top_k(kit, server):
    rerank = PSCRerank(backend=kit.openai_like(server), num_permutations=3, top_n=2)
    out = rerank.postprocess_nodes(_nodes(kit), query_str=kit.QUERY)  # top_k = top_n = 2
    psc = [n.node.metadata["psc"] for n in out]
    assert [n.node.get_content() for n in out] == kit.oracle_texts(2)
    assert psc[0]["top_probability"] >= psc[1]["top_probability"] > 0.5
    assert psc[0]["head"] == len(kit.DOCS) and psc[0]["stopped"] == "complete"
    assert "psc" not in out[0].node.get_content(metadata_mode=MetadataMode.LLM)
