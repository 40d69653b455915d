"""The public surface of langchain_permsc is pinned: change it on purpose, here."""

from __future__ import annotations

import langchain_permsc
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable


def test_all_is_pinned() -> None:
    assert langchain_permsc.__all__ == [
        "ChatModelBackend",
        "PSCListwiseRanker",
        "PSCRankingSettings",
        "PSCReranker",
        "PSCRetriever",
        "RankedItem",
    ]
    assert all(hasattr(langchain_permsc, name) for name in langchain_permsc.__all__)


def test_framework_base_classes() -> None:
    assert issubclass(langchain_permsc.PSCReranker, BaseDocumentCompressor)
    assert issubclass(langchain_permsc.PSCReranker, Runnable)
    assert issubclass(langchain_permsc.PSCListwiseRanker, Runnable)
    assert issubclass(langchain_permsc.PSCRetriever, BaseRetriever)
