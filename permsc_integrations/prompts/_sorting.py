"""The perm-sc paper's sorting prompts: MathSort, WordSort and GSM8KSort.

Wording is exactly that of castorini/perm-sc (``FastMathSortRankingPromptBuilder``,
``WordSortRankingPromptBuilder``, ``SentenceSortRankingPromptBuilder``), which the paper's
notebook uses. The model answers with the items themselves, parsed by
:func:`~permsc_integrations.parsing.parse_items`. The query is not used.

The repo joins word and sentence lists with ``"\\n- "``, so the first item carries no
bullet; that is kept for fidelity (``bullet_first=True`` bullets every item).

Example:
    >>> [system, user] = WordSortPrompt().render("", ["pear", "apple"])
    >>> print(user["content"])  # doctest: +ELLIPSIS
    Order these words alphabetically:
    pear
    - apple
    The output format should have each word on a new line. Only respond with the results; ...
    >>> WordSortPrompt().parse("apple\\npear", 2, ["pear", "apple"]).ranking
    (1, 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from permsc_integrations._registry import publish
from permsc_integrations.backends.base import Message
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.parsing import parse_items
from permsc_integrations.results import ParsedAnswer

__all__ = ["MathSortPrompt", "WordSortPrompt", "GSM8KSortPrompt"]

MATH_SYSTEM = (
    "You are an intelligent assistant that can evaluate and sort math expressions based on "
    "their value."
)
MATH_USER = (
    "Sort the following expressions from smallest to largest: {items}.\nThe output format "
    "should be a comma-separated list containing the exact expressions; do not reduce them. "
    "Only respond with the results; do not say any word or explain."
)
WORD_SYSTEM = "You are an intelligent assistant that can order words alphabetically."
WORD_USER = (
    "Order these words alphabetically:\n{items}\nThe output format should have each word on a "
    "new line. Only respond with the results; do not say any word or explain."
)
SENTENCE_SYSTEM = "You are an intelligent assistant that can order sentences."
SENTENCE_USER = (
    "Order the scrambled sentences logically:\n{items}\nThe output format should have each "
    "sentence on a new line. Only respond with the results; do not say any word or explain."
)


def _parse(text: str, n_items: int, items: Sequence[str] | None) -> ParsedAnswer:
    if items is None or len(items) != n_items:
        raise ConfigurationError(
            "sorting prompts parse the items' own text: pass items (in prompt order) to parse()"
        )
    return parse_items(text, items)


def _bullets(items: Sequence[str], bullet_first: bool) -> str:
    listed = "\n- ".join(items).strip()
    return f"- {listed}" if bullet_first and items else listed


@dataclass(frozen=True, slots=True)
class MathSortPrompt:
    """MathSort: sort arithmetic expressions by value, smallest first (comma-separated)."""

    name: str = "mathsort"

    def render(self, query: str, items: Sequence[str]) -> list[Message]:
        return [
            {"role": "system", "content": MATH_SYSTEM},
            {"role": "user", "content": MATH_USER.format(items=", ".join(items))},
        ]

    def parse(self, text: str, n_items: int, items: Sequence[str] | None = None) -> ParsedAnswer:
        return _parse(text, n_items, items)


@dataclass(frozen=True, slots=True)
class WordSortPrompt:
    """WordSort: order words alphabetically, one per line."""

    bullet_first: bool = False
    name: str = "wordsort"

    def render(self, query: str, items: Sequence[str]) -> list[Message]:
        listed = _bullets(items, self.bullet_first)
        return [
            {"role": "system", "content": WORD_SYSTEM},
            {"role": "user", "content": WORD_USER.format(items=listed)},
        ]

    def parse(self, text: str, n_items: int, items: Sequence[str] | None = None) -> ParsedAnswer:
        return _parse(text, n_items, items)


@dataclass(frozen=True, slots=True)
class GSM8KSortPrompt:
    """GSM8KSort: put the scrambled sentences of a GSM8K question back in order."""

    bullet_first: bool = False
    name: str = "gsm8ksort"

    def render(self, query: str, items: Sequence[str]) -> list[Message]:
        listed = _bullets(items, self.bullet_first)
        return [
            {"role": "system", "content": SENTENCE_SYSTEM},
            {"role": "user", "content": SENTENCE_USER.format(items=listed)},
        ]

    def parse(self, text: str, n_items: int, items: Sequence[str] | None = None) -> ParsedAnswer:
        return _parse(text, n_items, items)


publish("permsc_integrations.prompts", MathSortPrompt, WordSortPrompt, GSM8KSortPrompt)
