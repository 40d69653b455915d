"""User-supplied prompt templates.

``{query}``, ``{items}`` and ``{num}`` are replaced in ``system`` and ``user`` (in one pass,
so text inside a query is never expanded; other braces are left alone). Each item is
formatted with ``item_format`` (``{index}`` is 1-based, ``{text}`` the item) and joined with
``item_separator``. ``answer="ids"`` parses ``[2] > [1]``; ``answer="items"`` parses the
items' own text.

Example:
    >>> p = TemplatePrompt(user="Query: {query}\\n{items}\\nRank the {num} passages: [] > []")
    >>> print(p.render("goldfish", ["Goldfish grow.", "Cats purr."])[0]["content"])
    Query: goldfish
    [1] Goldfish grow.
    [2] Cats purr.
    Rank the 2 passages: [] > []
    >>> p.parse("[2] > [1]", 2).ranking
    (1, 0)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from permsc_integrations._registry import publish
from permsc_integrations.backends.base import Message
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.parsing import parse_identifiers, parse_items
from permsc_integrations.prompts._truncate import clean_passage, truncate_words
from permsc_integrations.results import ParsedAnswer

__all__ = ["TemplatePrompt"]

_PLACEHOLDER = re.compile(r"\{(query|items|num)\}")
_ITEM_PLACEHOLDER = re.compile(r"\{(index|text)\}")
_EXAMPLE = re.compile(r"\[[0-9]+\](?:\s*>\s*\[[0-9]+\])+")


def _fill(pattern: re.Pattern[str], template: str, values: dict[str, str]) -> str:
    return pattern.sub(lambda m: values[m.group(1)], template)


@dataclass(frozen=True, slots=True)
class TemplatePrompt:
    """A prompt from your own wording; ``max_words`` truncates each item (None: no cut)."""

    user: str
    system: str | None = None
    item_format: str = "[{index}] {text}"
    item_separator: str = "\n"
    answer: Literal["ids", "items"] = "ids"
    max_words: int | None = None
    name: str = "template"

    def __post_init__(self) -> None:
        if not isinstance(self.user, str) or "{items}" not in self.user:
            raise ConfigurationError(
                "TemplatePrompt.user must be a string containing {items} (where the list goes); "
                "{query} and {num} are optional"
            )
        if self.answer not in ("ids", "items"):
            raise ConfigurationError(
                f"TemplatePrompt.answer must be 'ids' ([2] > [1]) or 'items' (the items' text), "
                f"got {self.answer!r}"
            )
        if self.answer == "ids" and "{index}" not in self.item_format:
            raise ConfigurationError(
                "with answer='ids' the item_format must show {index}, "
                "or the model cannot name items"
            )
        truncate_words("", self.max_words)  # validates max_words

    def render(self, query: str, items: Sequence[str]) -> list[Message]:
        listed = self.item_separator.join(
            _fill(
                _ITEM_PLACEHOLDER,
                self.item_format,
                {"index": str(i), "text": self._item_text(text)},
            )
            for i, text in enumerate(items, start=1)
        )
        values = {"query": query, "items": listed, "num": str(len(items))}
        messages: list[Message] = []
        if self.system:
            messages.append({"role": "system", "content": _fill(_PLACEHOLDER, self.system, values)})
        messages.append({"role": "user", "content": _fill(_PLACEHOLDER, self.user, values)})
        return messages

    def _item_text(self, text: str) -> str:
        """Items answered by id are passages: neutralised (docs/security.md); items answered
        by their own text keep it, or the answer could not name them."""
        if self.answer == "ids":
            return clean_passage(text, self.max_words)
        return truncate_words(text, self.max_words)

    @property
    def examples(self) -> tuple[str, ...]:
        """The id chains the template itself shows (its format examples)."""
        return tuple(
            m.group(0) for t in (self.system or "", self.user) for m in _EXAMPLE.finditer(t)
        )

    def parse(self, text: str, n_items: int, items: Sequence[str] | None = None) -> ParsedAnswer:
        if self.answer == "ids":
            return parse_identifiers(text, n_items, examples=self.examples)
        if items is None or len(items) != n_items:
            raise ConfigurationError("answer='items' parses the items' text: pass items to parse()")
        return parse_items(text, items)


publish("permsc_integrations.prompts", TemplatePrompt)
