"""The options as typed, described pydantic fields (the core's integration_model): the types
and help in the JSON schema and LangChain's config schema, pydantic's extra="forbid" in force
over Serializable's extra="ignore", no lax coercion, objects kept as given, typed errors."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.runnables import ConfigurableField
from langchain_permsc import PSCListwiseRanker, PSCReranker
from pydantic import ValidationError

from permsc_integrations import MemoryCache, RankingOptions
from permsc_integrations.aggregators import get as get_aggregator
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration._model import option_types
from permsc_integrations.prompts import get_prompt
from permsc_integrations.strategies import Sliding

CLASSES = [PSCReranker, PSCListwiseRanker]
LAX = [("num_permutations", "5"), ("num_permutations", True), ("temperature", "0.1")]


def model() -> FakeListChatModel:
    return FakeListChatModel(responses=["[2] > [1] > [3]"])


def strict_schema(cls: type[Any]) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no skipped choices, no invalid-for-JSON fallbacks
        return cls.model_json_schema()  # type: ignore[no-any-return]


@pytest.mark.parametrize("cls", CLASSES)
def test_every_option_is_typed_and_described_in_the_json_schema(cls: type[Any]) -> None:
    statements = option_types()
    properties = strict_schema(cls)["properties"]
    for info in RankingOptions.describe():
        field = cls.model_fields[info.name]
        assert field.annotation == statements[info.name] and field.description == info.help
        assert properties[info.name]["description"] == info.help
    assert properties["num_permutations"]["type"] == "integer"
    assert properties["temperature"]["type"] == "number"
    assert properties["cache"]["anyOf"] == [{"title": "ResponseCache"}, {"type": "null"}]
    assert properties["backend"]["description"].startswith("spec string")


@pytest.mark.parametrize("cls", CLASSES)
def test_unknown_names_are_forbidden_by_pydantic_too(cls: type[Any]) -> None:
    assert strict_schema(cls)["additionalProperties"] is False
    with pytest.raises(ValidationError, match="num_permutation"):
        cls.model_validate({"backend": "openai:m", "num_permutation": 3})


@pytest.mark.parametrize(("name", "value"), LAX, ids=[f"{n}={v!r}" for n, v in LAX])
def test_values_pydantic_would_coerce_are_refused_as_by_the_core(name: str, value: Any) -> None:
    with pytest.raises(ConfigurationError, match=name) as caught:
        PSCReranker(backend=model(), **{name: value})
    assert not isinstance(caught.value, ValidationError)
    reranker = PSCReranker(backend=model())
    before = getattr(reranker, name)
    with pytest.raises(ConfigurationError, match=name):
        setattr(reranker, name, value)
    assert getattr(reranker, name) == before


def test_objects_are_kept_as_given_and_rank() -> None:
    objects = {
        "prompt": get_prompt("rankgpt"),
        "aggregator": get_aggregator("borda"),
        "strategy": Sliding(),
        "cache": MemoryCache(),
    }
    ranker = PSCListwiseRanker(
        backend=model(), num_permutations=1, include_identity=True, **objects
    )
    assert all(getattr(ranker, name) is value for name, value in objects.items())
    assert ranker.core_ranker().options.cache is objects["cache"]
    rows = ranker.invoke({"query": "q", "items": ["a", "b", "c"]})
    assert [r["item"] for r in rows] == ["b", "a", "c"]


def test_configurable_fields_carry_the_types_and_descriptions() -> None:
    reranker = PSCReranker(backend=model(), include_identity=True, top_n=None)
    configurable = reranker.configurable_fields(
        num_permutations=ConfigurableField(id="m"), cache=ConfigurableField(id="cache")
    )
    schema = strict_schema(configurable.config_schema())
    fields = schema["$defs"]["Configurable"]["properties"]
    assert fields["m"]["type"] == "integer" and fields["m"]["default"] == 20
    assert fields["m"]["description"] == "shuffled prompts per window (m)"
    assert fields["cache"]["anyOf"] == [{"title": "ResponseCache"}, {"type": "null"}]
    docs = [Document("a"), Document("b"), Document("c")]
    request = {"query": "q", "documents": docs}
    out = configurable.with_config(configurable={"m": 2}).invoke(request)
    assert [d.metadata["psc"]["samples"] for d in out] == [2, 2, 2]
