"""The request and response bodies of the rerank API (Cohere v2's shape), as pydantic models.

A request is validated from the raw JSON bytes in one step (malformed JSON included); a
problem becomes one line naming the field (``documents[2]: ...``). A key given twice in one
object is refused (422), never silently the last one. The bounds are the
schema's, so /openapi.json shows them: ``top_n`` at most the server's ``max_documents``
(:func:`request_model`), ``max_tokens_per_doc`` at most :data:`MAX_TOKENS_PER_DOC`.

Example:
    >>> request = parse_rerank(b'{"model": "m", "query": "q", "documents": ["a", {"text": "b"}]}')
    >>> request.texts, request.top_n
    (('a', 'b'), None)
    >>> parse_rerank(b'{"model": "m", "query": "q", "documents": []}')
    Traceback (most recent call last):
    ...
    permsc_integrations.serve._schemas.BadRequest: documents: must not be empty
    >>> parse_rerank(b'{"model": "m", "query": "q", "documents": ["a"], "top_n": 11}',
    ...              request_model(10))
    Traceback (most recent call last):
    ...
    permsc_integrations.serve._schemas.BadRequest: top_n: must be at most 10
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.json_schema import JsonSchemaValue, models_json_schema

from permsc_integrations.errors import PermscError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

__all__ = [
    "BadRequest",
    "Document",
    "MAX_TOKENS_PER_DOC",
    "RerankRequest",
    "request_model",
    "RerankResult",
    "RerankResponse",
    "ErrorBody",
    "ModelList",
    "parse_rerank",
    "explain",
    "openapi_schemas",
]


MAX_TOKENS_PER_DOC = 100_000
"""The largest ``max_tokens_per_doc`` (words) a request may give: about 200 pages, far above
the model's own passage cut (``max_words``, default 300); a document shorter than the cut
stays whole."""


class BadRequest(PermscError):
    """A request the server cannot take; ``status`` is its HTTP status (400, 413, 404...)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Document(BaseModel):
    """A document as an object: its ``text`` is ranked; other fields are ignored."""

    model_config = ConfigDict(extra="allow", strict=True)
    text: str


class RerankRequest(BaseModel):
    """``POST /v2/rerank`` (also ``/v1/rerank``, ``/rerank``)."""

    model_config = ConfigDict(extra="allow", strict=True)
    model: str = Field(description="a name from GET /v1/models")
    query: str = Field(description="the search query")
    documents: list[str | Document] = Field(
        min_length=1, description="texts, or objects with a 'text' field, to rank"
    )
    top_n: int | None = Field(
        default=None,
        ge=1,
        description="return the best top_n results (default: all; more than the documents "
        "sent: all of them); at most the server's max_documents",
    )
    max_tokens_per_doc: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS_PER_DOC,
        description="cut each document to this many words (whitespace-separated) first; "
        f"at most {MAX_TOKENS_PER_DOC}",
    )
    return_documents: bool = Field(
        default=False, description="include each result's document text (Jina, Cohere v1)"
    )

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(d if isinstance(d, str) else d.text for d in self.documents)


def request_model(max_documents: int) -> type[RerankRequest]:
    """:class:`RerankRequest` for a server that takes at most ``max_documents`` documents a
    request: ``top_n`` is bounded by the same number (schema and validation alike)."""
    top_n = RerankRequest.model_fields["top_n"]
    bounded = Field(default=None, ge=1, le=max_documents, description=top_n.description)
    return create_model("RerankRequest", __base__=RerankRequest, top_n=(int | None, bounded))


class ResultDocument(BaseModel):
    text: str


class RerankResult(BaseModel):
    index: int = Field(description="position in the request's documents")
    relevance_score: float = Field(description="in [0, 1]; see docs/serve.md")
    document: ResultDocument | None = None


class ApiVersion(BaseModel):
    version: str = "2"
    is_experimental: bool = False


class Tokens(BaseModel):
    input_tokens: int
    output_tokens: int


class BilledUnits(BaseModel):
    search_units: int
    input_tokens: int
    output_tokens: int


class Meta(BaseModel):
    api_version: ApiVersion
    billed_units: BilledUnits
    tokens: Tokens


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    upstream_calls: int


class RerankResponse(BaseModel):
    id: str
    model: str
    results: list[RerankResult] = Field(description="highest relevance_score first")
    meta: Meta
    usage: Usage


class ErrorBody(BaseModel):
    """Cohere's error shape."""

    message: str


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "permsc"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def _where(loc: tuple[int | str, ...]) -> str:
    """``('documents', 2, 'Document', 'text')`` -> ``documents[2]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "Document") or "[" in str(part):
            break  # a union member's tag: the position is what the caller needs
        else:
            out += ("." if out else "") + str(part)
    return out or "body"


_MESSAGES = {
    "list_type": "must be a list",
    "too_short": "must not be empty",
    "missing": "is required",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "bool_type": "must be a boolean",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "model_type": "must be a JSON object",
}


def _explain(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "json_invalid":
        return f"malformed JSON: {error.get('ctx', {}).get('error', 'cannot parse')}"
    where = _where(tuple(error["loc"]))
    if where.startswith("documents["):
        return f"{where}: must be a string or an object with a 'text' string"
    message = _MESSAGES.get(kind)
    return f"{where}: {message.format(**error.get('ctx', {})) if message else error['msg']}"


def explain(exc: ValidationError) -> str:
    """Pydantic's errors in one line, each naming its field (no dump, no URL; the first 5).

    >>> from pydantic import TypeAdapter
    >>> try:
    ...     TypeAdapter(RerankRequest).validate_python({"model": "m", "query": 1})
    ... except ValidationError as exc:
    ...     print(explain(exc))
    query: must be a string; documents: is required
    """
    errors = exc.errors(include_url=False)
    return "; ".join(dict.fromkeys(_explain(e) for e in errors[:5]))


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object's members, refused when a key repeats (JSON parsers keep the last)."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise BadRequest(
                f"duplicate key {key[:100]!r} in the JSON body: each key may appear once", 422
            )
        seen.add(key)
    return dict(pairs)


def parse_rerank(body: bytes, model: type[RerankRequest] = RerankRequest) -> RerankRequest:
    """The validated request of raw JSON ``body`` (as ``model``: :func:`request_model` gives
    a server's); :class:`BadRequest` names what is wrong (422 for a repeated key).

    >>> parse_rerank(b'{"model": "m", "query": "q", "query": "other", "documents": ["a"]}')
    Traceback (most recent call last):
    ...
    permsc_integrations.serve._schemas.BadRequest: duplicate key 'query' in the JSON body: ...
    """
    try:
        request = model.model_validate_json(body)
    except ValidationError as exc:
        raise BadRequest(explain(exc)) from None
    try:
        json.loads(body, object_pairs_hook=_unique)
    except ValueError:  # JSON pydantic read and the json module does not: no repeats found
        pass
    return request


def openapi_schemas(request: type[RerankRequest] = RerankRequest) -> dict[str, JsonSchemaValue]:
    """The JSON schemas of every body (``request``: the server's :func:`request_model`), for
    ``components.schemas`` of /openapi.json."""
    models: list[tuple[type[BaseModel], Literal["validation", "serialization"]]] = [
        (request, "validation"),
        (RerankResponse, "serialization"),
        (ErrorBody, "serialization"),
        (ModelList, "serialization"),
    ]
    _, top = models_json_schema(models, ref_template="#/components/schemas/{model}")
    return dict(top["$defs"])
