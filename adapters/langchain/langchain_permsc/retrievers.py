"""PSCRetriever: a base retriever whose results a :class:`PSCReranker` reorders; ``k`` kept.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.language_models import FakeListChatModel
    >>> from langchain_core.retrievers import BaseRetriever
    >>> class Fixed(BaseRetriever):
    ...     def _get_relevant_documents(self, query, *, run_manager):
    ...         return [Document("cats"), Document("dogs")]
    >>> model = FakeListChatModel(responses=["[2] > [1]"])
    >>> reranker = PSCReranker(backend=model, num_permutations=1, include_identity=True)
    >>> retriever = PSCRetriever(retriever=Fixed(), reranker=reranker, k=1)
    >>> [d.page_content for d in retriever.invoke("dogs?")]
    ['dogs']
"""

from __future__ import annotations

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.runnables import RunnableConfig

from .rerankers import PSCReranker

__all__ = ["PSCRetriever"]


class PSCRetriever(BaseRetriever):
    """Retrieve with ``retriever``, rerank with ``reranker``, return the best ``k``.

    ``k`` (overridable per call: ``invoke(query, k=2)``) replaces the reranker's ``top_n``.
    """

    retriever: RetrieverLike
    reranker: PSCReranker
    k: int = 4

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: object,
    ) -> list[Document]:
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        documents = self.retriever.invoke(query, config, **kwargs)
        request = {"query": query, "documents": documents, "top_n": k or self.k}
        return self.reranker.invoke(request, {"callbacks": run_manager.get_child()})

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: object,
    ) -> list[Document]:
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        documents = await self.retriever.ainvoke(query, config, **kwargs)
        request = {"query": query, "documents": documents, "top_n": k or self.k}
        return await self.reranker.ainvoke(request, {"callbacks": run_manager.get_child()})
