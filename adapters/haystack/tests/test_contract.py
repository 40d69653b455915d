"""Haystack's component contract, checked by Haystack's own machinery (the Component
protocol, the metaclass's run/run_async comparison, sockets, component_to_dict/from_dict,
Pipeline connection checks), and bad input refused with a clear, typed error."""

from __future__ import annotations

import inspect

import pytest
from haystack import Document, Pipeline
from haystack.components.builders import PromptBuilder
from haystack.core.component import Component
from haystack.core.component.component import _compare_run_methods_signatures
from haystack.core.errors import PipelineConnectError
from haystack.core.serialization import component_from_dict, component_to_dict
from haystack_integrations.components.rankers.permsc import PSCRanker

from permsc_integrations import RankingOptions
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.testing import ScriptedBackend, oracle_responder


def scripted(kit):
    return ScriptedBackend(oracle_responder(kit.relevance))


def test_it_is_a_haystack_component_with_typed_sockets(kit):
    ranker = PSCRanker(backend=scripted(kit))
    assert isinstance(ranker, Component) and ranker.__haystack_supports_async__
    inputs = ranker.__haystack_input__._sockets_dict
    assert {n: s.type for n, s in inputs.items()} == {
        "query": str,
        "documents": list[Document],
        "top_k": int | None,
    }
    assert ranker.__haystack_output__._sockets_dict["documents"].type == list[Document]
    sync, native = inspect.signature(PSCRanker.run), inspect.signature(PSCRanker.run_async)
    assert _compare_run_methods_signatures(sync, native) == ""
    assert inspect.iscoroutinefunction(PSCRanker.run_async)


def test_every_core_option_is_an_init_parameter_declared_once():
    parameters = inspect.signature(PSCRanker.__init__).parameters
    for info in RankingOptions.describe():
        parameter = parameters[info.name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert (
            parameter.default == info.default
            and parameter.annotation is not inspect.Parameter.empty
        )
    assert {"chat_generator", "backend", "raise_on_failure"} <= set(parameters)


def test_component_to_dict_and_from_dict_as_haystack_calls_them(server, kit):
    ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=3, top_k=2)
    data = component_to_dict(ranker, "ranker")
    back = component_from_dict(PSCRanker, data, "ranker")
    assert back.options == ranker.options and component_to_dict(back, "ranker") == data


def test_pipeline_connections_are_type_checked(kit):
    pipe = Pipeline()
    pipe.add_component("prompt", PromptBuilder(template="{{ documents }}"))
    pipe.add_component("ranker", PSCRanker(backend=scripted(kit)))
    with pytest.raises(PipelineConnectError):
        pipe.connect("prompt.prompt", "ranker.documents")  # a str is not list[Document]
    pipe.connect("ranker.documents", "prompt.documents")


def test_the_model_is_required_once():
    with pytest.raises(ConfigurationError, match="chat_generator="):
        PSCRanker()
    with pytest.raises(ConfigurationError, match="not both"):
        PSCRanker(chat_generator=object(), backend="openai:m")
    with pytest.raises(ConfigurationError, match="Haystack chat generator"):
        PSCRanker(chat_generator=object())
    with pytest.raises(ConfigurationError, match="chat_generator="):
        PSCRanker(backend=42)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"num_permutation": 3}, "did you mean 'num_permutations'"),
        ({"num_permutations": "5"}, "num_permutations must be an int"),
        ({"aggregator": "kemenny"}, "kemeny"),
        ({"top_k": 0}, "top_k"),
        ({"raise_on_failure": "no"}, "raise_on_failure"),
        ({"backend_options": {"base_ulr": "http://h/v1"}}, "did you mean 'base_url'"),
    ],
)
def test_bad_options_are_refused_at_construction(options, message):
    with pytest.raises(ConfigurationError, match=message):
        PSCRanker(backend="openai:m", **options)


@pytest.mark.parametrize(
    "query, documents, top_k, message",
    [
        ("", None, None, "needs a query"),
        (None, None, None, "needs a query"),
        ("q", "a string", None, "list of Haystack Documents"),
        ("q", ["plain text"], None, "must be Haystack Documents"),
        ("q", [Document(content=""), Document(content="b")], None, "no text content"),
        ("q", [Document(content=None, meta={"x": 1})], None, "no text content"),
        ("q", None, 0, "top_k must be an int >= 1"),
    ],
)
async def test_bad_input_is_refused_with_the_fix_and_no_call(kit, query, documents, top_k, message):
    model = scripted(kit)
    ranker = PSCRanker(backend=model)
    documents = kit.documents() if documents is None else documents
    with pytest.raises(ConfigurationError, match=message):
        ranker.run(query=query, documents=documents, top_k=top_k)
    with pytest.raises(ConfigurationError, match=message):
        await ranker.run_async(query=query, documents=documents, top_k=top_k)
    assert model.request_count == 0


def test_bad_input_is_refused_even_with_a_fallback(kit):
    ranker = PSCRanker(backend=scripted(kit), raise_on_failure=False)
    with pytest.raises(ConfigurationError, match="needs a query"):
        ranker.run(query=" ", documents=kit.documents())


def test_no_documents_is_no_documents_and_no_call(kit, server):
    before = server.request_count
    ranker = PSCRanker(chat_generator=kit.generator(server))
    assert ranker.run(query="q", documents=[]) == {"documents": []}
    assert server.request_count == before


def test_the_input_documents_are_not_mutated(kit):
    given = kit.documents()
    ranked = PSCRanker(backend=scripted(kit), num_permutations=2).run(
        query=kit.QUERY, documents=given
    )["documents"]
    assert all("psc" not in d.meta and d.score is None for d in given)
    assert {d.id for d in ranked} == {d.id for d in given}


def test_warm_up_and_close(kit, server):
    generator = kit.generator(server)
    ranker = PSCRanker(chat_generator=generator, num_permutations=2)
    ranker.warm_up()
    assert generator.client is not None
    ranker.close()
    assert generator.client is None


async def test_warm_up_async_and_close_async_reach_the_generators_async_client(kit, server):
    generator = kit.generator(server)
    ranker = PSCRanker(chat_generator=generator, num_permutations=2)
    await ranker.warm_up_async()
    assert generator.async_client is not None and generator.client is None
    documents = (await ranker.run_async(query=kit.QUERY, documents=kit.documents()))["documents"]
    assert documents[0].content == kit.oracle_texts(1)[0]
    await ranker.close_async()
    assert generator.async_client is None
