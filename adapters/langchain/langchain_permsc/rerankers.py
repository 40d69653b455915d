"""PSCReranker: a document compressor (and Runnable) that reranks with PSC.

Drop it into a ``ContextualCompressionRetriever`` or call it directly. As a Runnable its
input is ``{"query": str, "documents": [Document, ...]}`` (optionally ``"top_n"`` to
override the field for one call) and its output the reranked documents. The documents
returned are **copies** (metadata deep-copied) carrying ``metadata["relevance_score"]`` (the
aggregated score: 1.0 for the best, strictly decreasing) and ``metadata["psc"]`` (``rank``
1-based, ``samples``, ``failed``, ``confidence`` and ``usage``: the whole rerank's calls and
tokens; ``head`` and ``stopped``; the document's ``top_probability`` of the top k, when the
ranking has a k: docs/scores.md); the input is never mutated and ``Document.id`` is kept.
``top_n`` documents are returned (3 by default, like LangChain's reference rerankers;
``None``: all), and the core's ``top_k`` defaults to ``top_n``, so the documents returned are
the settled ones.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.language_models import FakeListChatModel
    >>> model = FakeListChatModel(responses=["[2] > [1]"])
    >>> reranker = PSCReranker(backend=model, num_permutations=1, include_identity=True, top_n=1)
    >>> docs = [Document("cats", id="a"), Document("dogs", id="b")]
    >>> best = reranker.compress_documents(docs, "dogs?")
    >>> best[0].id, best[0].metadata["relevance_score"], "psc" in docs[1].metadata
    ('b', 1.0, False)
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import Callbacks
from langchain_core.callbacks.manager import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, Field

from permsc_integrations.integration import at_least, psc_metadata
from permsc_integrations.results import RankingResult

from .ranking import PSCRankingSettings, _query_and

__all__ = ["PSCReranker"]

Input = dict[str, Any]


def _checked_top_n(top_n: Any) -> int | None:
    return at_least(1, optional=True)("top_n", top_n)  # type: ignore[no-any-return]


def _top_n(input: Input, default: int | None) -> int | None:
    return _checked_top_n(input.get("top_n", default))


def _ranked(
    documents: Sequence[Document], result: RankingResult, top_n: int | None
) -> list[Document]:
    out = []
    for rank, i in enumerate(result.order[:top_n], start=1):
        doc = documents[i]
        psc = psc_metadata(result, i, rank)
        metadata = {**copy.deepcopy(doc.metadata), "relevance_score": result.scores[i], "psc": psc}
        out.append(doc.model_copy(update={"metadata": metadata}))
    return out


class PSCReranker(
    PSCRankingSettings, BaseDocumentCompressor, RunnableSerializable[Input, list[Document]]
):
    """Rerank documents with permutation self-consistency (see the module docstring).

    ``top_n`` documents are returned (all with ``None``); the PSC options are those of
    :class:`~langchain_permsc.ranking.PSCRankingSettings`.
    """

    model_config = ConfigDict(extra="forbid")  # over Serializable's extra="ignore"
    _ranker_fields: ClassVar[frozenset[str]] = frozenset({"backend", "top_n"})

    top_n: int | None = Field(
        default=3, description="documents returned (None: all); the core's top_k unless set"
    )

    def _checked_model(self) -> Any:
        _checked_top_n(self.top_n)
        return super()._checked_model()

    def _returned(self) -> int | None:
        return self.top_n

    def _run(
        self, input: Input, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> list[Document]:
        query, documents = _query_and(input, "documents")
        top_n = _top_n(input, self.top_n)
        if not documents:
            return []
        return _ranked(documents, self._rank(query, documents, config), top_n)

    async def _arun(
        self, input: Input, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[Document]:
        query, documents = _query_and(input, "documents")
        top_n = _top_n(input, self.top_n)
        if not documents:
            return []
        return _ranked(documents, await self._arank(query, documents, config), top_n)

    def invoke(
        self, input: Input, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        return self._call_with_config(self._run, input, config, **kwargs)

    async def ainvoke(
        self, input: Input, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        return await self._acall_with_config(self._arun, input, config, **kwargs)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Rerank ``documents`` for ``query``; copies with scores, best first."""
        return self.invoke({"query": query, "documents": documents}, {"callbacks": callbacks})

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async :meth:`compress_documents`, on the async engine (no thread)."""
        return await self.ainvoke(
            {"query": query, "documents": documents}, {"callbacks": callbacks}
        )
