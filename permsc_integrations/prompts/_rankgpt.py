"""The RankGPT prompt (Sun et al., 2023), exactly as used by the perm-sc paper.

A system message, then one user turn per passage (``[i] passage``), each acknowledged by
the assistant, then the instruction. The answer lists identifiers: ``[2] > [1] > [3]``.

Example:
    >>> msgs = RankGPTPrompt().render("do goldfish grow", ["Goldfish grow.", "Cats purr."])
    >>> [m["role"] for m in msgs]
    ['system', 'user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user']
    >>> msgs[3]["content"], msgs[4]["content"]
    ('[1] Goldfish grow.', 'Received passage [1].')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from permsc_integrations._registry import publish
from permsc_integrations.backends.base import Message
from permsc_integrations.parsing import parse_identifiers
from permsc_integrations.prompts._truncate import clean_passage
from permsc_integrations.results import ParsedAnswer

__all__ = ["RankGPTPrompt"]

SYSTEM = (
    "You are RankGPT, an intelligent assistant that can rank passages based on their "
    "relevancy to the query."
)
PREFIX = (
    "I will provide you with {num} passages, each indicated by number identifier []. \n"
    "Rank the passages based on their relevance to query: {query}."
)
ACK_PREFIX = "Okay, please provide the passages."
PASSAGE = "[{rank}] {content}"
ACK_PASSAGE = "Received passage [{rank}]."
POST = (
    "Search Query: {query}. \nRank the {num} passages above based on their relevance to the "
    "search query. The passages should be listed in descending order using identifiers. The "
    "most relevant passages should be listed first. The output format should be [] > [], "
    "e.g., [1] > [2]. Only response the ranking results, do not say any word or explain."
)
EXAMPLE = "[1] > [2]"
"""The format example in the instruction: an answer that only repeats it is no vote."""


@dataclass(frozen=True, slots=True)
class RankGPTPrompt:
    """RankGPT's multi-turn prompt; passages are cut to ``max_words`` words (None: no cut)."""

    max_words: int | None = 300
    name: str = "rankgpt"

    def render(self, query: str, items: Sequence[str]) -> list[Message]:
        num = len(items)
        messages: list[Message] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": PREFIX.format(num=num, query=query)},
            {"role": "assistant", "content": ACK_PREFIX},
        ]
        for rank, item in enumerate(items, start=1):
            content = clean_passage(item, self.max_words)
            messages.append({"role": "user", "content": PASSAGE.format(rank=rank, content=content)})
            messages.append({"role": "assistant", "content": ACK_PASSAGE.format(rank=rank)})
        messages.append({"role": "user", "content": POST.format(num=num, query=query)})
        return messages

    def parse(self, text: str, n_items: int, items: Sequence[str] | None = None) -> ParsedAnswer:
        return parse_identifiers(text, n_items, examples=(EXAMPLE,))


publish("permsc_integrations.prompts", RankGPTPrompt)
