"""The pydantic side of both framework adapters, once: the ranking options as typed, described
fields, and the glue around them (:class:`AdapterModel`).

Each option field is annotated with what it accepts (the generated
:class:`~permsc_integrations._options.keywords.RankingKeywords`) and described by the
declaration's help (:class:`~permsc_integrations.RankingOptions`), so that
``model_json_schema()`` and editors show them; pydantic keeps the value as given (no coercion:
``"5"`` stays a string and is refused) and the declaration validates it, with every
cross-option rule, when the adapter is built and when a field is set. mypy reads the same
fields from :class:`~permsc_integrations._options.keywords.OptionFields` (a class built at run
time is invisible to it). pydantic is imported here: the core never imports this module, the
adapters (which depend on pydantic) do.

Example:
    >>> class Toy(PSCOptionsModel):
    ...     backend: str = "openai:m"
    ...     def _build(self):
    ...         raise NotImplementedError
    >>> toy = Toy(num_permutations=5)
    >>> toy.num_permutations, Toy.model_fields["top_k"].annotation
    (5, int | None)
    >>> Toy(num_permutations="5")
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.ConfigurationError: num_permutations must be an int >= 1, got '5'
    >>> toy.num_permutation = 3  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.ConfigurationError: unknown option 'num_permutation'...
"""

from __future__ import annotations

import copy
import functools
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PrivateAttr,
    ValidationError,
    create_model,
    field_serializer,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from permsc_integrations._calls.bridge import run_sync
from permsc_integrations._options.keywords import OptionFields, RankingKeywords
from permsc_integrations._options.options import RankingOptions, unknown_option
from permsc_integrations._ranker.ranker import PSCRanker
from permsc_integrations._registry import publish
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration._base import (
    OneRanker,
    check_backend,
    checked_options,
    public_backend_options,
    refuse_unknown,
    refuse_unknown_attribute,
    repr_args,
)

if TYPE_CHECKING:
    from typing import Self  # Python 3.11; only read by the type checker

__all__ = [
    "AdapterModel",
    "PSCOptionsModel",
    "option_types",
    "option_annotation",
    "option_fields",
    "typed_errors",
]


def option_types() -> dict[str, object]:
    """Each option's typed statement (:class:`RankingKeywords`' annotations), by name."""
    return dict(_statements())


@functools.cache
def _statements() -> dict[str, object]:
    statements = typing.get_type_hints(RankingKeywords)
    if tuple(statements) != RankingOptions.names():  # an option declared, the views not written
        raise RuntimeError(
            "_option_keywords.py is stale: run python scripts/generate_option_keywords.py"
        )
    return statements


_JSON_TYPES: dict[object, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    type(None): "null",
}


def _json_schema(statement: object) -> dict[str, object]:
    """``statement`` as JSON schema; a Python object (a prompt, a callable) by its name."""
    union = typing.get_origin(statement) in (Union, types.UnionType)
    shown: list[dict[str, object]] = []
    for member in typing.get_args(statement) if union else (statement,):
        schema = _member_schema(member)
        if schema not in shown:
            shown.append(schema)
    return shown[0] if len(shown) == 1 else {"anyOf": shown}


def _member_schema(member: object) -> dict[str, object]:
    if member in _JSON_TYPES:
        return {"type": _JSON_TYPES[member]}
    origin = typing.get_origin(member)
    if origin is Literal:
        return {"enum": list(typing.get_args(member)), "type": "string"}
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return {"type": "object"}
    return {"title": getattr(origin or member, "__name__", str(member))}


@dataclass(frozen=True)
class _AsGiven:
    """pydantic metadata of an option field: the value is kept as given, for the declaration
    to validate (pydantic would turn ``"5"`` into ``5``); the JSON schema is the statement."""

    statement: object

    def __get_pydantic_core_schema__(
        self, source: object, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.any_schema()

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _json_schema(self.statement)


def option_annotation(name: str) -> object:
    """Option ``name``'s typed statement as a pydantic annotation: the value kept as given,
    the statement as its JSON schema (for a framework's own models, e.g. LangChain's config
    schema, which would otherwise read the bare statement)."""
    statement = _statements()[name]
    return Annotated[statement, _AsGiven(statement)]


def option_fields() -> dict[str, tuple[object, FieldInfo]]:
    """``{name: (annotation, FieldInfo)}`` for :func:`pydantic.create_model`: every option with
    its typed statement, the declaration's default and its help as the description."""
    fields: dict[str, tuple[object, FieldInfo]] = {}
    for info in RankingOptions.describe():
        if isinstance(info.default, dict):
            spec = FieldInfo.from_field(default_factory=dict, description=info.help)
        else:
            spec = FieldInfo.from_field(info.default, description=info.help)
        fields[info.name] = (option_annotation(info.name), spec)
    return fields


def _typed(error: ValidationError, known: Iterable[str]) -> Exception:
    """The library's error behind a pydantic ``ValidationError``: an unknown name refused with
    the closest known ones, or the ``ConfigurationError`` a check raised (pydantic wraps a
    ``ValueError`` raised in a validator, and ``ConfigurationError`` is one)."""
    details = error.errors()
    for detail in details:
        if detail["type"] == "extra_forbidden":
            return ConfigurationError(unknown_option(str(detail["loc"][0]), tuple(sorted(known))))
    for detail in details:
        cause = detail.get("ctx", {}).get("error")
        if isinstance(cause, ConfigurationError):
            return cause
    return error


@contextmanager
def typed_errors(known: Iterable[str]) -> Iterator[None]:
    """Raise the library's error (:func:`_typed`) in place of pydantic's ``ValidationError``."""
    try:
        yield
    except ValidationError as exc:
        raise _typed(exc, known) from None


class AdapterModel(BaseModel):
    """What both adapters' pydantic models share besides the option fields
    (:data:`PSCOptionsModel` adds them): one core ranker, built by the adapter's ``_build``;
    unknown keywords and attributes refused with suggestions; every check run at construction
    (a model validator: ``model_validate`` runs it too, its ``ConfigurationError`` inside
    pydantic's ``ValidationError``) and when a field the ranker is built from is set, a refused
    value rolled back; reprs and dumps without secrets; deep copies that share the model.

    An adapter defines ``_build`` and, where it has them, the hooks ``_checked_model`` (its own
    fields), ``_core_values``, ``_returned``, ``_given``, ``_assignment`` and ``_changed``.
    """

    # validate_assignment stays off: __setattr__ checks all the options together, rolls a refused
    # value back and raises the typed error (pydantic's would keep a value a model validator
    # refused, wrap the error, and coerce the adapters' own typed fields, top_n="5")
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    # the adapter's own fields the ranker is built from (the options always are)
    _ranker_fields: ClassVar[frozenset[str]] = frozenset({"backend"})
    # fields a deep copy shares: framework models are configuration, not state
    _shared_on_copy: ClassVar[frozenset[str]] = frozenset({"backend"})
    _one: OneRanker = PrivateAttr(default_factory=OneRanker)

    def __init__(self, **data: object) -> None:
        fields = type(self).model_fields
        refuse_unknown(data, fields)  # before an adapter's defaults (LlamaIndex's Settings.llm)
        with typed_errors(fields):
            super().__init__(**self._given(data))

    @model_validator(mode="after")
    def _validated(self) -> AdapterModel:
        self._check()
        return self

    def _check(self) -> RankingOptions:
        """The options these fields describe; raises the library's typed error if bad."""
        model = self._checked_model()
        values = {name: getattr(self, name) for name in RankingOptions.names()}
        check_backend(model, values["backend_options"])
        values = self._core_values(values)
        if values["top_k"] is None:
            values["top_k"] = self._returned()
        return checked_options(values)

    @classmethod
    def _given(cls, data: dict[str, object]) -> dict[str, object]:
        """The keywords given, with the adapter's defaults (called before validation)."""
        return data

    def _checked_model(self) -> object:
        """Check the adapter's own fields; return the model that ranks (``backend``)."""
        return getattr(self, "backend", None)

    def _core_values(self, values: dict[str, object]) -> dict[str, object]:
        """The option values as the core takes them (e.g. a framework template as a prompt)."""
        return values

    def _returned(self) -> int | None:
        """How many results a call returns (the core's ``top_k`` unless set); None: all."""
        return None

    def _assignment(self, name: str, value: object) -> dict[str, object]:
        """The fields that setting ``name`` changes (LlamaIndex: ``llm`` replaces ``backend``)."""
        return {name: value}

    def _changed(self, name: str) -> None:
        """After ``name`` was set and checked (the ranker is rebuilt on the next call)."""

    def _set(self, name: str, value: object) -> None:
        """``__setattr__``: a field the ranker is built from is checked with the others, a
        refused value rolled back; anything that is not a field is refused."""
        fields = type(self).model_fields
        if name not in RankingOptions.names() and name not in self._ranker_fields:
            refuse_unknown_attribute(self, name, fields)
            super().__setattr__(name, value)
            return
        changes = self._assignment(name, value)
        before = {key: getattr(self, key) for key in changes}
        for key, new in changes.items():
            super().__setattr__(key, new)
        try:
            self._check()
        except Exception:
            for key, old in before.items():
                super().__setattr__(key, old)
            raise
        self._one.reset()  # the next call builds a ranker from the new values
        self._changed(name)

    if not TYPE_CHECKING:  # so that mypy refuses a misspelt attribute (as pydantic hides its own)
        __setattr__ = _set

    def __repr_args__(self) -> Iterator[tuple[str, object]]:
        return repr_args(self, type(self).model_fields)

    @field_serializer("backend_options", check_fields=False)
    def _public_backend_options(
        self, value: Mapping[str, object] | None
    ) -> dict[str, object] | None:
        return None if value is None else public_backend_options(value)

    def __deepcopy__(self, memo: dict[int, object] | None = None) -> Self:
        values = {name: getattr(self, name) for name in type(self).model_fields}
        shared = self._shared_on_copy
        return type(self)(
            **{n: v if n in shared else copy.deepcopy(v, memo) for n, v in values.items()}
        )

    def _build(self) -> PSCRanker:
        raise NotImplementedError

    def core_ranker(self) -> PSCRanker:
        """The core ranker these settings describe (built on first use, shared by all)."""
        return self._one.get(self._build)

    async def aclose(self) -> None:
        """Close what this object built from a spec string."""
        await self._one.aclose()

    def close(self) -> None:
        """Sync :meth:`aclose` (through the library's bridge)."""
        run_sync(self.aclose)


if TYPE_CHECKING:  # mypy reads the fields (a model built by create_model is invisible to it)

    class PSCOptionsModel(AdapterModel, OptionFields):
        """The ranking options as pydantic fields on :class:`AdapterModel`."""

else:
    PSCOptionsModel = create_model(
        "PSCOptionsModel", __base__=AdapterModel, __module__=__name__, **option_fields()
    )
    PSCOptionsModel.__doc__ = (
        "The ranking options as pydantic fields (typed, described, validated by the "
        "declaration) on :class:`AdapterModel`: the base of both adapters' models."
    )

publish(
    "permsc_integrations.integration",
    AdapterModel,
    PSCOptionsModel,
    option_types,
    option_annotation,
    option_fields,
    typed_errors,
)
