"""The ``rerank`` tool's logic, without the MCP SDK: budgets, checks, the answer, the errors.

The agent sends a query, the documents and optionally ``top_n``, a budget and
``return_documents``; the model, its keys and the ranking options are the server's (flags or a
TOML file, as for ``permsc serve``). A budget argument may lower the server's value of its
option, never raise it. A bad argument or an upstream failure raises :class:`ToolError`, whose
message the agent reads (secrets redacted, as ``permsc serve`` words them).

Example:
    >>> import anyio
    >>> from permsc_integrations import PSCRanker
    >>> from permsc_integrations.testing import ScriptedBackend, oracle_responder
    >>> backend = ScriptedBackend(oracle_responder(len))  # the longer text is the better
    >>> ranker = PSCRanker(backend, num_permutations=2)
    >>> tool = RerankTool(ranker, "psc")
    >>> answer = anyio.run(lambda: tool.rerank("q", ["a", "bb"], top_n=1, return_documents=True))
    >>> answer["results"], answer["usage"]["calls"], answer["stopped"]
    ([{'index': 1, 'relevance_score': 1.0, 'shown': True, 'text': 'bb'}], 2, 'complete')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# pydantic (the SDK's output schema) reads TypedDicts from typing_extensions before 3.12
from typing_extensions import NotRequired, TypedDict

from permsc_integrations._ranker.ranker import PSCRanker
from permsc_integrations.errors import PermscError
from permsc_integrations.results import RankingResult
from permsc_integrations.serve import http_error, relevance_scores, score_documents
from permsc_integrations.tracing import reported_top_n

__all__ = ["Budget", "BUDGETS", "RerankTool", "ToolError", "RerankResult"]


class ToolError(PermscError):
    """What the agent did wrong, or what went wrong upstream: the tool call's error message."""


@dataclass(frozen=True)
class Budget:
    """A tool argument that sets the ranking option of its name, up to the server's value."""

    name: str
    description: str


BUDGETS: tuple[Budget, ...] = (
    Budget(
        "num_permutations",
        "shuffled prompts per window (m): fewer is cheaper and less steady; "
        "at most the server's value, which is the default",
    ),
    Budget(
        "max_calls",
        "model calls at most for this ranking, re-asks and retries included: the ranking "
        "plans within it (below one pass it ranks the first documents, the rest in the order "
        "sent); at most the server's value",
    ),
    Budget(
        "max_total_tokens",
        "prompt + completion tokens at most for this ranking, as the model reports them: the "
        "ranking plans within it and stops there; at most the server's value",
    ),
)


class Document(TypedDict):
    """One document: ``shown`` false when the model never saw it (blank, or past ``head``);
    ``top_probability``, its chance of the top k, when the ranking has one (None: never
    shown)."""

    index: int
    relevance_score: float
    shown: bool
    top_probability: NotRequired[float | None]
    text: NotRequired[str]


class Usage(TypedDict):
    calls: int
    input_tokens: int
    output_tokens: int
    failed_samples: int


class RerankResult(TypedDict):
    """The tool's structured answer: documents best first, the agreement, the cost, and
    how far the ranking went (``head``: the documents it ranked, None: all; ``stopped``: why
    sampling ended, RankingResult's words); ``warnings``: what the caller should know of the
    answers (many degenerate: ``RankingResult.degenerate_note``), empty when nothing."""

    model: str
    results: list[Document]
    confidence: float
    usage: Usage
    head: int | None
    stopped: str
    warnings: list[str]


def _secrets(ranker_keys: Sequence[str | None]) -> tuple[str | None, ...]:
    return (os.environ.get("OPENAI_API_KEY"), *ranker_keys)


def _usage(result: RankingResult) -> Usage:
    u = result.usage
    return {
        "calls": u.calls,
        "input_tokens": u.prompt_tokens,
        "output_tokens": u.completion_tokens,
        "failed_samples": sum(not s.ok for s in result.samples),
    }


class RerankTool:
    """The ``rerank`` tool over one configured ranker (``name``: its model name), which it
    owns: :meth:`aclose` closes it. A budget below the server's ranks with a ranker derived
    for that call (:meth:`PSCRanker.derive`: the backend, limiter, breaker and ranker cap
    shared; nothing kept). ``scale``: the scores' scale (:data:`~.serve._scoring.SCALES`,
    the model's ``relevance_score``). Blank documents are ranked last without a call."""

    def __init__(
        self,
        ranker: PSCRanker,
        name: str,
        *,
        secrets: Sequence[str | None] = (),
        scale: Callable[[RankingResult], tuple[float, ...]] = relevance_scores,
    ) -> None:
        self.ranker, self.name, self.scale = ranker, name, scale
        self.secrets = _secrets(secrets)

    def cap(self, budget: Budget) -> int | None:
        """The server's value of ``budget``'s option: the default and the most allowed."""
        value = getattr(self.ranker.options, budget.name)
        return value if isinstance(value, int) else None

    def _ranker(self, asked: Mapping[str, int | None]) -> PSCRanker:
        changes: dict[str, int] = {}
        for budget in BUDGETS:
            value, cap = asked.get(budget.name), self.cap(budget)
            if value is None or value == cap:
                continue
            if cap is not None and value > cap:
                raise ToolError(f"{budget.name}: at most {cap} on this server, got {value}")
            changes[budget.name] = value
        return self.ranker.derive(**changes) if changes else self.ranker

    async def rerank(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
        return_documents: bool = False,
        **budgets: int | None,
    ) -> RerankResult:
        """Rank ``documents`` for ``query``; :class:`ToolError` says what went wrong."""
        if not query.strip():
            raise ToolError("query: must not be empty")
        ranker = self._ranker(budgets)
        kept = [k for k, text in enumerate(documents) if text.strip()]
        result = await self._rank(ranker, query, [documents[k] for k in kept], top_n)
        ranked = score_documents(result, kept, len(documents), self.scale)
        results: list[Document] = []
        for doc in ranked if top_n is None else ranked[:top_n]:
            item: Document = {
                "index": doc.index,
                "relevance_score": doc.relevance_score,
                "shown": doc.shown,
            }
            if result.top_probability:
                item["top_probability"] = doc.top_probability
            if return_documents:
                item["text"] = documents[doc.index]
            results.append(item)
        return {
            "model": self.name,
            "results": results,
            "confidence": round(result.confidence, 4),
            "usage": _usage(result),
            "head": result.head,
            "stopped": result.stopped,
            "warnings": [result.degenerate_note] if result.degenerate_note else [],
        }

    async def _rank(
        self, ranker: PSCRanker, query: str, texts: list[str], top_n: int | None
    ) -> RankingResult:
        """The ranking of ``texts`` (no call for fewer than two), or :class:`ToolError`."""
        if len(texts) < 2:
            return RankingResult(tuple(range(len(texts))), (1.0,) * len(texts), head=len(texts))
        try:
            with reported_top_n(top_n):
                return await ranker.arank(query, texts)
        except PermscError as exc:
            upstream = self.ranker.backend.name
            raise ToolError(http_error(exc, upstream).redacted(self.secrets).message) from exc

    async def aclose(self) -> None:
        """Close the configured ranker (and with it the backend it owns)."""
        await self.ranker.aclose()
