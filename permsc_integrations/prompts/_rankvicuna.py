"""The RankVicuna prompt (Pradeep et al., 2023; castorini/rank_llm): one user message.

Passages are listed as ``[i] passage`` lines between a prefix and the instruction;
``[n]`` inside a passage becomes ``(n)`` so it cannot be mistaken for an identifier.
rank_llm wraps the message in the model's chat template (Vicuna's own system prompt);
here ``system`` is optional and off by default, and the backend applies the chat template.

Example:
    >>> [m] = RankVicunaPrompt().render("q", ["see [1]", "b"])
    >>> print(m["content"].split("\\n")[2])
    [1] see (1)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from permsc_integrations._registry import publish
from permsc_integrations.backends.base import Message
from permsc_integrations.parsing import parse_identifiers
from permsc_integrations.prompts._truncate import clean_passage
from permsc_integrations.results import ParsedAnswer

__all__ = ["RankVicunaPrompt"]

PREFIX = (
    "I will provide you with {num} passages, each indicated by a numerical identifier []. "
    "Rank the passages based on their relevance to the search query: {query}.\n"
)
POST = (
    "Search Query: {query}.\nRank the {num} passages above based on their relevance to the "
    "search query. All the passages should be included and listed using identifiers, in "
    "descending order of relevance. The output format should be [] > [], e.g., "
    "{example}, Only respond with the ranking results, do not say any word or explain."
)


@dataclass(frozen=True, slots=True)
class RankVicunaPrompt:
    """RankVicuna's single-message prompt.

    ``example`` is rank_llm's example ordering (``"[2] > [1]"`` with variable passages);
    ``system`` adds a system message when set.
    """

    max_words: int | None = 300
    example: str = "[4] > [2]"
    system: str | None = None
    name: str = "rankvicuna"

    def render(self, query: str, items: Sequence[str]) -> list[Message]:
        num = len(items)
        body = PREFIX.format(num=num, query=query) + "\n"
        for rank, item in enumerate(items, start=1):
            content = clean_passage(item, self.max_words)
            body += f"[{rank}] {content}\n"
        body += POST.format(num=num, query=query, example=self.example)
        user: Message = {"role": "user", "content": body}
        return [{"role": "system", "content": self.system}, user] if self.system else [user]

    def parse(self, text: str, n_items: int, items: Sequence[str] | None = None) -> ParsedAnswer:
        return parse_identifiers(text, n_items, examples=(self.example,))


publish("permsc_integrations.prompts", RankVicunaPrompt)
