"""Items from strings, framework documents and mappings normalise to texts and ids."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from permsc_integrations._items import normalize_items
from permsc_integrations.errors import InvalidRankingError


def test_strings_have_no_ids() -> None:
    assert normalize_items(["a", "b"]) == (["a", "b"], [None, None])


def test_mappings_use_text_and_docid_or_id() -> None:
    texts, ids = normalize_items([
        {"text": "a", "docid": "D1"},
        {"text": "b", "id": 7},
        {"contents": "c", "docid": None, "id": "x"},
        {"text": "d"},
    ])
    assert texts == ["a", "b", "c", "d"]
    assert ids == ["D1", "7", "x", None]


def test_real_langchain_documents() -> None:
    # the frameworks are the adapters' dependencies, not the core's: skipped without them
    Document = pytest.importorskip("langchain_core.documents").Document  # noqa: N806
    docs = [Document(page_content="goldfish grow", id="g"), Document(page_content="cats purr")]
    assert normalize_items(docs) == (["goldfish grow", "cats purr"], ["g", None])


def test_real_llama_index_nodes() -> None:
    schema = pytest.importorskip("llama_index.core.schema")
    NodeWithScore, TextNode = schema.NodeWithScore, schema.TextNode  # noqa: N806
    nodes = [NodeWithScore(node=TextNode(text="goldfish", id_="n1"), score=0.3)]
    assert normalize_items([TextNode(text="cats", id_="n2")] + nodes) == (
        ["cats", "goldfish"], ["n2", "n1"],
    )


@dataclass
class Passage:
    content: str
    docid: str | None = None


def test_objects_with_content_and_docid() -> None:
    assert normalize_items([Passage("a", "d1"), Passage("b")]) == (["a", "b"], ["d1", None])


def test_empty_list_is_rejected() -> None:
    with pytest.raises(InvalidRankingError, match="empty"):
        normalize_items([])


@pytest.mark.parametrize("items", ["a string", b"bytes", 5, None])
def test_a_non_list_is_rejected(items: object) -> None:
    with pytest.raises(InvalidRankingError, match="must be a list"):
        normalize_items(items)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [3, None, {"docid": "x"}, {"text": 5}, Passage(content=None)])  # type: ignore[arg-type]
def test_an_item_without_text_is_rejected_by_position(bad: object) -> None:
    with pytest.raises(InvalidRankingError, match="item 1 has no text"):
        normalize_items(["fine", bad])


def test_duplicate_ids_say_which() -> None:
    with pytest.raises(InvalidRankingError) as info:
        normalize_items(
            [{"text": "a", "docid": "d"}, {"text": "b", "docid": "e"}, Passage("c", "d")]
        )
    assert "'d' at items 0 and 2" in str(info.value)


def test_duplicate_texts_without_ids_are_allowed() -> None:
    assert normalize_items(["9 + 1", "9 + 1"]) == (["9 + 1", "9 + 1"], [None, None])
