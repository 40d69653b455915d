"""to_dict/from_dict and Pipeline.dumps/loads (YAML) under Haystack's default, safe loading:
the ranker, its options and its nested chat generator come back; secrets travel as Haystack
Secrets (the variable's name), never in clear."""

from __future__ import annotations

import pytest
from haystack import Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.core.errors import DeserializationError
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils import Secret
from haystack_integrations.components.rankers.permsc import PSCRanker

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.testing import ScriptedBackend

OPTIONS = {
    "num_permutations": 4,
    "top_k": 3,
    "aggregator": "borda",
    "adaptive": True,
    "max_calls": 12,
    "prompt": "rankgpt",
    "scoring": "generate",
    "strategy": "sliding",
}


def test_to_dict_from_dict_round_trips_a_chat_generator_ranker(kit, server):
    ranker = PSCRanker(chat_generator=kit.generator(server), raise_on_failure=False, **OPTIONS)
    data = ranker.to_dict()
    assert data["type"] == "haystack_integrations.components.rankers.permsc.ranker.PSCRanker"
    generator = data["init_parameters"]["chat_generator"]
    assert generator["type"].endswith("OpenAIChatGenerator")
    assert generator["init_parameters"]["api_key"]["env_vars"] == ["PERMSC_HAYSTACK_TEST_KEY"]
    assert "sk-test" not in repr(data)
    back = PSCRanker.from_dict(data)
    assert back.to_dict() == data and back.options == ranker.options
    documents = back.run(query=kit.QUERY, documents=kit.documents())["documents"]
    assert [d.content for d in documents] == kit.oracle_texts(3)


def test_a_pipeline_survives_yaml_under_safe_loading(kit, server):
    store = InMemoryDocumentStore()
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store))
    pipe.add_component("ranker", PSCRanker(chat_generator=kit.generator(server), **OPTIONS))
    pipe.connect("retriever.documents", "ranker.documents")
    text = pipe.dumps()
    assert "sk-test" not in text and "PERMSC_HAYSTACK_TEST_KEY" in text
    loaded = Pipeline.loads(text)  # no allowed_modules, no unsafe: the default allowlist
    ranker = loaded.get_component("ranker")
    assert isinstance(ranker, PSCRanker) and ranker.options.num_permutations == 4
    assert loaded.dumps() == text


def test_backend_options_secrets_are_secrets(kit, server):
    secret = Secret.from_env_var("PERMSC_HAYSTACK_TEST_KEY")
    ranker = PSCRanker(
        backend="openai:scripted",
        num_permutations=2,
        backend_options={"base_url": server.base_url, "api_key": secret},
    )
    data = ranker.to_dict()
    assert data["init_parameters"]["backend_options"]["api_key"]["type"] == "env_var"
    back = PSCRanker.from_dict(data)
    assert back.options.backend_options["api_key"] == secret
    documents = back.run(query=kit.QUERY, documents=kit.documents())["documents"]
    assert [d.content for d in documents] == kit.oracle_texts()
    assert server.requests[-1].headers.get("authorization") == "Bearer sk-test-not-a-real-key"
    back.close()


def test_a_plain_secret_or_a_token_is_never_serialised():
    plain = PSCRanker(backend="openai:m", backend_options={"api_key": "sk-plain"})
    with pytest.raises(ConfigurationError, match="Secret.from_env_var"):
        plain.to_dict()
    token = PSCRanker(backend="openai:m", backend_options={"api_key": Secret.from_token("sk-t")})
    with pytest.raises(ValueError, match="token"):
        token.to_dict()


def test_what_cannot_be_serialised_is_refused_with_the_fix():
    with pytest.raises(ConfigurationError, match="spec string"):
        PSCRanker(backend=ScriptedBackend(lambda r: "[1]")).to_dict()
    from permsc_integrations.aggregators import get

    ranker = PSCRanker(backend="openai:m", aggregator=get("borda"))
    with pytest.raises(ConfigurationError, match="aggregator=.*by name"):
        ranker.to_dict()


def test_a_smuggled_class_in_an_unknown_parameter_is_refused():
    data = PSCRanker(backend="openai:m").to_dict()
    data["init_parameters"]["evil"] = {"type": "os.system", "init_parameters": {}}
    with pytest.raises(DeserializationError, match="unknown parameter 'evil'"):
        PSCRanker.from_dict(data)
