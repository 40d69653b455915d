"""The prompt contract: render a query and items (in prompt order) to chat messages, and
parse the model's answer back into prompt positions.

Example:
    >>> from permsc_integrations.prompts import get_prompt
    >>> p = get_prompt("rankgpt")
    >>> msgs = p.render("do goldfish grow", ["Goldfish grow.", "Cats purr."])
    >>> p.parse("[2] > [1]", 2).ranking
    (1, 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from permsc_integrations.backends.base import Message
from permsc_integrations.results import ParsedAnswer

__all__ = ["Prompt"]


@runtime_checkable
class Prompt(Protocol):
    """A listwise ranking prompt.

    ``render`` receives items already in the (shuffled) prompt order; ``parse`` returns
    0-based prompt positions, best first, and raises :class:`~.errors.ParseError` when the text has
    no usable ranking. ``items`` is passed to ``parse`` for prompts whose answers repeat the
    items' text (sorting tasks); identifier prompts only need its length.
    """

    name: str

    def render(self, query: str, items: Sequence[str]) -> list[Message]: ...

    def parse(
        self, text: str, n_items: int, items: Sequence[str] | None = None
    ) -> ParsedAnswer: ...
