"""The adapters' shared pydantic base (_integration_model.py): option fields typed by
RankingKeywords and described by the declaration, values kept as given for the declaration to
validate (no lax coercion), the library's typed errors, rollback, and a JSON schema."""

from __future__ import annotations

import warnings
from typing import Any, Literal

import pytest

pytest.importorskip("pydantic")

from pydantic import TypeAdapter, ValidationError  # noqa: E402

from permsc_integrations import MemoryCache, PSCRanker, RankingOptions, RetryPolicy  # noqa: E402
from permsc_integrations._calls.caps import Prices, SpendingCap  # noqa: E402
from permsc_integrations._ranker.ranker import RankingKeywords  # noqa: E402
from permsc_integrations.aggregators import get as get_aggregator  # noqa: E402
from permsc_integrations.errors import ConfigurationError, UnknownNameError  # noqa: E402
from permsc_integrations.integration._model import (  # noqa: E402
    PSCOptionsModel,
    option_types,
    typed_errors,
)
from permsc_integrations.prompts import get_prompt  # noqa: E402
from permsc_integrations.strategies import Sliding  # noqa: E402
from permsc_integrations.strategies._adaptive import Adaptive  # noqa: E402
from permsc_integrations.testing import ScriptedBackend  # noqa: E402


class Toy(PSCOptionsModel):
    """The smallest adapter: a core backend object, no framework."""

    backend: Any = None

    def _build(self) -> PSCRanker:
        options = self._check()
        return PSCRanker(self.backend, options=options, meter=self._one.meter(options))


# each accepted by pydantic's lax mode for the statement's type, refused by the declaration
LAX = [
    ("num_permutations", "5"),
    ("num_permutations", True),
    ("num_permutations", 5.0),
    ("temperature", "0.1"),
    ("timeout", "60"),
    ("include_identity", "yes"),
    ("include_identity", 1),
    ("seed", "1"),
    ("top_k", "3"),
    ("first_stage_weight", "0.5"),
]


def test_every_option_field_is_its_typed_statement_described_by_the_declaration() -> None:
    statements = option_types()
    assert tuple(statements) == tuple(RankingKeywords.__annotations__) == RankingOptions.names()
    fields = PSCOptionsModel.model_fields
    for info in RankingOptions.describe():
        field = fields[info.name]
        assert field.annotation == statements[info.name], info.name
        assert field.annotation is not Any, info.name
        assert field.description == info.help, info.name
        assert field.get_default(call_default_factory=True) == info.default, info.name
    assert fields["num_permutations"].annotation is int
    assert fields["top_k"].annotation == int | None
    assert fields["scoring"].annotation == Literal["generate", "first_token"]


@pytest.mark.parametrize(("name", "value"), LAX, ids=[f"{n}={v!r}" for n, v in LAX])
def test_pydantics_lax_coercion_does_not_loosen_the_declaration(name: str, value: Any) -> None:
    TypeAdapter(option_types()[name]).validate_python(value)  # pydantic alone takes it
    with pytest.raises(ConfigurationError, match=name) as caught:
        Toy(**{name: value})
    assert not isinstance(caught.value, ValidationError)
    toy = Toy()
    before = getattr(toy, name)
    with pytest.raises(ConfigurationError, match=name):
        setattr(toy, name, value)
    assert getattr(toy, name) == before and type(getattr(toy, name)) is type(before)


def test_objects_are_kept_as_given() -> None:
    objects = {
        "prompt": get_prompt("rankgpt"),
        "strategy": Sliding(),
        "aggregator": get_aggregator("borda"),
        "cache": MemoryCache(),
        "retry": RetryPolicy(max_attempts=2),
        "adaptive": Adaptive(),
        "prices": Prices(1.0, 2.0),
        "request_cap": SpendingCap(calls=9),
    }
    toy = Toy(**objects)
    assert all(getattr(toy, name) is value for name, value in objects.items())
    options = toy._check()
    assert options.cache is objects["cache"] and options.strategy is objects["strategy"]
    toy.prompt = other = get_prompt("rankvicuna")
    assert toy.prompt is other


def test_errors_are_the_librarys_typed_ones() -> None:
    with pytest.raises(UnknownNameError, match="kemeney"):
        Toy(aggregator="kemeney")
    with pytest.raises(ConfigurationError, match="min_successful"):
        Toy(num_permutations=2, min_successful=3)  # a rule across options
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        Toy(num_permutation=3)
    # pydantic's own paths (extra="forbid", the checks as a model validator) say the same
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        with typed_errors(Toy.model_fields):
            Toy.model_validate({"num_permutation": 3})
    with pytest.raises(ValidationError) as caught:
        Toy.model_validate({"window_size": 1})
    assert isinstance(caught.value.errors()[0]["ctx"]["error"], ConfigurationError)
    with pytest.raises(ConfigurationError, match="window_size"), typed_errors(Toy.model_fields):
        Toy.model_validate({"window_size": 1})


def test_a_refused_assignment_rolls_back_and_a_good_one_rebuilds_the_ranker() -> None:
    toy = Toy(backend=ScriptedBackend(), num_permutations=4, min_successful=2)
    first = toy.core_ranker()
    with pytest.raises(ConfigurationError, match="min_successful"):
        toy.num_permutations = 1  # fine alone, not with min_successful=2
    assert toy.num_permutations == 4 and toy.core_ranker() is first
    toy.num_permutations = 3
    assert toy.core_ranker() is not first and toy.core_ranker().options.num_permutations == 3
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        toy.num_permutation = 3


def test_a_rebuilt_ranker_is_given_the_kept_ranker_cap_meter_until_the_cap_changes() -> None:
    """OneRanker.meter hands a rebuilt ranker the cap's meter (PSCRanker(meter=...)): changing
    another option does not refill the cap; a new cap or new prices get a new meter."""
    toy = Toy(backend=ScriptedBackend(), num_permutations=2, ranker_cap="calls=50")
    first = toy.core_ranker()
    first.rank("q", ["a", "bb", "ccc"])
    spent = first.spent
    assert spent is not None and spent.calls == 2
    toy.num_permutations = 3  # rebuilt, the same cap: what was spent stays spent
    second = toy.core_ranker()
    assert second is not first and second.spent == spent
    second.rank("q", ["a", "bb", "ccc"])
    assert first.spent == second.spent and second.spent.calls == 5  # one meter, shared
    toy.ranker_cap = "calls=60"  # a new cap: counted afresh
    assert toy.core_ranker().spent == type(spent)()
    toy.ranker_cap = None
    assert toy.core_ranker().spent is None


def test_a_meter_that_is_not_one_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="meter must be a Meter"):
        PSCRanker(ScriptedBackend(), meter="calls=5")  # type: ignore[arg-type]


def test_the_json_schema_shows_types_and_descriptions() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "skipped choice" or invalid-schema warnings
        schema = Toy.model_json_schema()
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["num_permutations"]["type"] == "integer"
    assert properties["num_permutations"]["description"] == "shuffled prompts per window (m)"
    assert properties["top_k"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert properties["scoring"]["enum"] == ["generate", "first_token"]
    assert properties["prompt"]["anyOf"] == [{"type": "string"}, {"title": "Prompt"}]
    assert properties["cache"]["anyOf"] == [{"title": "ResponseCache"}, {"type": "null"}]
    assert properties["backend_options"]["type"] == "object"
    for info in RankingOptions.describe():
        assert properties[info.name]["description"] == info.help


def test_secrets_stay_out_of_dumps_and_reprs() -> None:
    toy = Toy(
        backend="openai:m", backend_options={"api_key": "sk-secret", "base_url": "http://u:pw@h/v1"}
    )
    text = f"{toy!r} {toy.model_dump()} {toy.model_dump_json()}"
    assert "sk-secret" not in text and "pw@" not in text and "api_key" in text
    assert toy.backend_options["api_key"] == "sk-secret"  # what the backend factory gets
