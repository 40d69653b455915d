"""Normalise the caller's items into texts and optional ids.

Accepted, mixed freely: strings; objects with ``.text``, ``.page_content`` or ``.content``
(and optionally ``.docid``, ``.id`` or ``.node_id``), such as LangChain documents and
LlamaIndex nodes; mappings with
``"text"`` (or ``"contents"``/``"content"``/``"page_content"``) and optionally ``"docid"``
or ``"id"``. Ids are returned as strings, ``None`` where an item has none.

Example:
    >>> normalize_items(["a passage", {"text": "another", "docid": 7}])
    (['a passage', 'another'], [None, '7'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from permsc_integrations.errors import InvalidRankingError

__all__ = ["normalize_items"]

_TEXT_ATTRS = ("text", "page_content", "content")
_TEXT_KEYS = ("text", "contents", "content", "page_content")
_ID_NAMES = ("docid", "id")
_ID_ATTRS = ("docid", "id", "node_id")  # node_id: LlamaIndex nodes
_MISSING = object()


def _describe(item: object) -> str:
    shown = repr(item)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _text_and_id(item: object) -> tuple[object, object]:
    if isinstance(item, str):
        return item, None
    if isinstance(item, Mapping):
        text = next((item[k] for k in _TEXT_KEYS if k in item), _MISSING)
        docid = next((item[k] for k in _ID_NAMES if item.get(k) is not None), None)
        return text, docid
    text = next((getattr(item, a) for a in _TEXT_ATTRS if hasattr(item, a)), _MISSING)
    docid = next((getattr(item, a) for a in _ID_ATTRS if getattr(item, a, None) is not None), None)
    return text, docid


def _check_duplicates(ids: list[str | None]) -> None:
    first: dict[str, int] = {}
    clashes: list[str] = []
    for position, docid in enumerate(ids):
        if docid is None:
            continue
        if docid in first:
            clashes.append(f"{docid!r} at items {first[docid]} and {position}")
        else:
            first[docid] = position
    if clashes:
        raise InvalidRankingError(
            "duplicate item ids: " + "; ".join(clashes) + " (give each item a unique id, or none)"
        )


def normalize_items(items: Sequence[object]) -> tuple[list[str], list[str | None]]:
    """``(texts, ids)`` for ``items``; :class:`InvalidRankingError` says what is wrong.

    Raised for an empty list, an item without text (or with non-text text) and duplicate ids.

    >>> normalize_items([])
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.InvalidRankingError: nothing to rank: items is empty; ...
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InvalidRankingError(
            f"items must be a list of texts, documents or mappings, got {type(items).__name__}"
        )
    if len(items) == 0:
        raise InvalidRankingError("nothing to rank: items is empty; pass at least one item")
    texts: list[str] = []
    ids: list[str | None] = []
    for position, item in enumerate(items):
        text, docid = (item, None) if isinstance(item, str) else _text_and_id(item)  # fast path
        if text is _MISSING or not isinstance(text, str):
            raise InvalidRankingError(
                f"item {position} has no text: {_describe(item)}; pass a string, an object with "
                ".text/.page_content/.content, or a mapping with 'text'"
            )
        texts.append(text)
        ids.append(None if docid is None else str(docid))
    _check_duplicates(ids)
    return texts, ids
