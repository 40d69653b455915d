"""The OpenAPI 3.1 document of the service (``GET /openapi.json``), from the pydantic models.

Example:
    >>> doc = openapi_document(("psc",))
    >>> sorted(doc["paths"])[:3], doc["openapi"]
    (['/health', '/metrics', '/openapi.json'], '3.1.0')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from permsc_integrations.serve._schemas import RerankRequest, openapi_schemas

__all__ = ["openapi_document", "RERANK_PATHS"]

RERANK_PATHS = ("/v2/rerank", "/v1/rerank", "/rerank")


def _ref(name: str) -> dict[str, object]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str, description: str) -> dict[str, object]:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


def _errors(*codes: int) -> dict[str, object]:
    return {str(c): _json("ErrorBody", "an error, in Cohere's shape") for c in codes}


def _rerank(names: Sequence[str]) -> dict[str, object]:
    responses: dict[str, object] = {
        "200": _json("RerankResponse", "results, highest relevance_score first"),
        **_errors(400, 401, 404, 413, 429, 502, 504),
    }
    return {
        "post": {
            "summary": "Rerank documents for a query with permutation self-consistency",
            "description": f"Cohere v2's rerank API. Models: {', '.join(names)}.",
            "security": [{"bearer": []}],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("RerankRequest")}},
            },
            "responses": responses,
        }
    }


def _get(summary: str, content: Mapping[str, object], secured: bool = True) -> dict[str, object]:
    responses: dict[str, object] = {"200": {"description": summary, "content": content}}
    operation: dict[str, object] = {"summary": summary, "responses": responses}
    if secured:
        operation["security"] = [{"bearer": []}]
        responses.update(_errors(401))
    return {"get": operation}


def openapi_document(
    names: Sequence[str], version: str = "0", request: type[RerankRequest] = RerankRequest
) -> dict[str, object]:
    """The whole document for a server answering to model ``names`` and taking ``request``
    (its :func:`~._schemas.request_model`)."""
    health = {"application/json": {"schema": {"type": "object"}}}
    paths: dict[str, object] = {path: _rerank(names) for path in RERANK_PATHS}
    paths["/v1/models"] = _get(
        "the model names this server answers to",
        {"application/json": {"schema": _ref("ModelList")}},
    )
    paths["/health"] = _get("liveness (no key needed)", health, secured=False)
    paths["/metrics"] = _get("Prometheus metrics", {"text/plain": {"schema": {"type": "string"}}})
    paths["/openapi.json"] = _get("this document", health, secured=False)
    schemas = openapi_schemas(request)
    schemas["RerankRequest"]["properties"]["model"]["enum"] = list(names)
    return {
        "openapi": "3.1.0",
        "info": {"title": "permsc serve: PSC rerank API", "version": version},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
