"""LangChain integration for permutation self-consistency (PSC) listwise ranking.

Example:
    >>> from langchain_permsc import PSCReranker
    >>> PSCReranker(backend="openai:gpt-4o-mini", top_n=3).top_n  # no call is made here
    3
"""

from .chat_backend import ChatModelBackend
from .ranking import PSCListwiseRanker, PSCRankingSettings, RankedItem
from .rerankers import PSCReranker
from .retrievers import PSCRetriever

__all__ = [
    "ChatModelBackend",
    "PSCListwiseRanker",
    "PSCRankingSettings",
    "PSCReranker",
    "PSCRetriever",
    "RankedItem",
]
