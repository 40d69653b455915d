"""Permutation self-consistency (PSC) reranking for Haystack: the ``PSCRanker`` component,
any Haystack chat generator as the ranking model (:class:`HaystackChatBackend`), and
:func:`ranker_tool` to give an agent the ranker as a tool (loaded on first use: Haystack's
tools module costs more to import than the rest of the adapter).

Example:
    >>> from haystack_integrations.components.rankers.permsc import PSCRanker
    >>> PSCRanker(backend="openai:gpt-4o-mini", num_permutations=5).options.num_permutations
    5
"""

from typing import TYPE_CHECKING

from .chat_backend import HaystackChatBackend
from .ranker import META_KEY, PSCRanker

if TYPE_CHECKING:
    from .tool import ranker_tool

__all__ = ["PSCRanker", "HaystackChatBackend", "ranker_tool", "META_KEY"]


def __getattr__(name: str) -> object:
    if name == "ranker_tool":
        from .tool import ranker_tool

        return ranker_tool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
