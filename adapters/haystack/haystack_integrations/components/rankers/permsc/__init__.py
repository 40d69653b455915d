"""Permutation self-consistency (PSC) reranking for Haystack: the ``PSCRanker`` component,
any Haystack chat generator as the ranking model (:class:`HaystackChatBackend`), and
:func:`ranker_tool` to give an agent the ranker as a tool.

Example:
    >>> from haystack_integrations.components.rankers.permsc import PSCRanker
    >>> PSCRanker(backend="openai:gpt-4o-mini", num_permutations=5).options.num_permutations
    5
"""

from .chat_backend import HaystackChatBackend
from .ranker import META_KEY, PSCRanker
from .tool import ranker_tool

__all__ = ["PSCRanker", "HaystackChatBackend", "ranker_tool", "META_KEY"]
