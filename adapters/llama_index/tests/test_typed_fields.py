"""The options as typed, described pydantic fields (the core's integration_model): the types
and help in the JSON schema, pydantic's extra="forbid", no lax coercion, objects kept as
given, typed errors, and the llm/backend swap rolled back as one change."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from llama_index.core.llms import MockLLM
from llama_index.postprocessor.permsc import PSCRerank
from pydantic import ValidationError

from permsc_integrations import MemoryCache, RankingOptions
from permsc_integrations.aggregators import get as get_aggregator
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration._model import option_types
from permsc_integrations.prompts import get_prompt
from permsc_integrations.strategies import Sliding
from permsc_integrations.testing import ScriptedBackend

LAX = [("num_permutations", "5"), ("num_permutations", True), ("temperature", "0.1")]


def test_every_option_is_typed_and_described_in_the_json_schema() -> None:
    statements = option_types()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no skipped choices, no invalid-for-JSON fallbacks
        schema = PSCRerank.model_json_schema()
    properties = schema["properties"]
    for info in RankingOptions.describe():
        field = PSCRerank.model_fields[info.name]
        assert field.annotation == statements[info.name] and field.description == info.help
        assert properties[info.name]["description"] == info.help
    assert properties["num_permutations"]["type"] == "integer"
    assert properties["scoring"]["enum"] == ["generate", "first_token"]
    assert properties["prompt"]["anyOf"] == [{"type": "string"}, {"title": "Prompt"}]
    assert properties["top_n"]["description"] == "Nodes to return (None: all)."
    assert schema["additionalProperties"] is False
    with pytest.raises(ValidationError, match="num_permutation"):
        PSCRerank.model_validate({"llm": MockLLM(), "num_permutation": 3})


@pytest.mark.parametrize(("name", "value"), LAX, ids=[f"{n}={v!r}" for n, v in LAX])
def test_values_pydantic_would_coerce_are_refused_as_by_the_core(name: str, value: Any) -> None:
    with pytest.raises(ConfigurationError, match=name) as caught:
        PSCRerank(llm=MockLLM(), **{name: value})
    assert not isinstance(caught.value, ValidationError)
    rerank = PSCRerank(llm=MockLLM())
    before = getattr(rerank, name)
    with pytest.raises(ConfigurationError, match=name):
        setattr(rerank, name, value)
    assert getattr(rerank, name) == before


def test_objects_are_kept_as_given() -> None:
    objects = {
        "prompt": get_prompt("rankgpt"),
        "aggregator": get_aggregator("borda"),
        "strategy": Sliding(),
        "cache": MemoryCache(),
    }
    rerank = PSCRerank(llm=MockLLM(), **objects)
    assert all(getattr(rerank, name) is value for name, value in objects.items())
    options = rerank.core_ranker().options
    assert options.cache is objects["cache"] and options.strategy is objects["strategy"]


def test_a_refused_model_swap_is_rolled_back_whole() -> None:
    llm = MockLLM()
    rerank = PSCRerank(llm=llm, num_permutations=2)
    ranker = rerank.core_ranker()
    with pytest.raises(ConfigurationError, match="backend must be"):
        rerank.backend = object()  # would also clear llm
    assert rerank.llm is llm and rerank.backend is None and rerank.core_ranker() is ranker
    rerank.backend = scripted = ScriptedBackend()
    assert rerank.llm is None and rerank.model_name == "scripted"
    assert rerank.core_ranker() is not ranker and rerank.core_ranker().backend is scripted
