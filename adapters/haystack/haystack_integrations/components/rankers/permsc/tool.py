"""The ranker as a tool for a Haystack ``Agent``: a ``ComponentTool`` with a small schema.

Haystack derives a tool's schema from ``run``'s parameters, and a ``Document`` brings every
field it has (embeddings, blobs, sparse vectors): hundreds of tokens the model must read on
every turn. :func:`ranker_tool` gives the model three parameters instead (``query``,
``documents`` as ``{"content", "id"?}`` objects, ``top_k``) and answers with one line per
document, best first.

Example:
    >>> from haystack_integrations.components.rankers.permsc import PSCRanker
    >>> tool = ranker_tool(PSCRanker(backend="openai:gpt-4o-mini"))
    >>> tool.name, sorted(tool.parameters["properties"])
    ('rerank_documents', ['documents', 'query', 'top_k'])
"""

from __future__ import annotations

from typing import Any

from haystack import Document
from haystack.tools import ComponentTool

__all__ = ["ranker_tool", "TOOL_PARAMETERS"]

TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What the documents are ranked for."},
        "documents": {
            "type": "array",
            "description": "The candidate passages.",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The passage's text."},
                    "id": {"type": "string", "description": "Optional identifier."},
                },
                "required": ["content"],
            },
        },
        "top_k": {"type": "integer", "minimum": 1, "description": "How many to return."},
    },
    "required": ["query", "documents"],
}
"""The tool's JSON schema: what the model sees of the ranker."""

DESCRIPTION = (
    "Rank passages by relevance to a query, robust to the order they are given in "
    "(permutation self-consistency). Returns them best first, one per line with its score."
)


def _lines(documents: list[Document]) -> str:
    return "\n".join(
        f"{rank}. [{d.id}] (score {d.score:.2f}) {d.content}"
        for rank, d in enumerate(documents, start=1)
    )


def ranker_tool(
    ranker: Any, *, name: str = "rerank_documents", description: str = DESCRIPTION
) -> ComponentTool:
    """``ranker`` (a :class:`~.ranker.PSCRanker` not added to a pipeline) as a ``ComponentTool``
    with :data:`TOOL_PARAMETERS` as its schema and one line per ranked document as its
    result."""
    return ComponentTool(
        component=ranker,
        name=name,
        description=description,
        parameters=TOOL_PARAMETERS,
        outputs_to_string={"source": "documents", "handler": _lines},
    )
