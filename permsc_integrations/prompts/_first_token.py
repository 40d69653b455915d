"""First-token prompts: items carry single-token labels, the model answers with one label.

In first-token scoring (``scoring="first_token"``, docs/first_token.md) a window is read from
the probabilities of the answer's *first token* over the items' labels (FIRST, Reddy et al.
2024): one forward pass, one output token, and a distribution that cannot echo the list.
The instruction asks for the label of the best item (the most relevant passage, the word
that comes first, ...). Labels are ``A``, ``B``, ... ``Z`` (26: a longer window is refused);
each must be one token where the answer starts, which the local backends check against
their tokenizer.

Example:
    >>> p = first_token_prompt("rankgpt", max_words=3)
    >>> p.task, p.labels[:3]
    ('passages', ('A', 'B', 'C'))
    >>> print(p.render("goldfish", ["Goldfish grow big in ponds.", "Cats purr."])[1]["content"])
    I will provide you with 2 passages, each labelled with a letter.
    <BLANKLINE>
    [A] Goldfish grow big
    [B] Cats purr.
    <BLANKLINE>
    Search Query: goldfish
    Which passage is the most relevant to the search query? Answer with its letter only (A-B).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from permsc_integrations.backends.base import Message
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.prompts._base import Prompt
from permsc_integrations.prompts._truncate import clean_passage

__all__ = ["FirstTokenPrompt", "first_token_prompt", "LETTERS", "TASKS"]

LETTERS = tuple(string.ascii_uppercase)
"""The default labels: 26 capital letters, one token each in the common tokenizers."""

_PASSAGES_SYSTEM = (
    "You are RankGPT, an intelligent assistant that can rank passages based on their "
    "relevancy to the query."
)
TASKS: dict[str, tuple[str, str, str]] = {
    # task: (system, what the items are, the question)
    "passages": (
        _PASSAGES_SYSTEM,
        "passages",
        "Which passage is the most relevant to the search query?",
    ),
    "wordsort": (
        "You are an intelligent assistant that can order words alphabetically.",
        "words",
        "Which word comes first in alphabetical order?",
    ),
    "mathsort": (
        "You are an intelligent assistant that can evaluate and sort math expressions based "
        "on their value.",
        "expressions",
        "Which expression has the smallest value?",
    ),
    "gsm8ksort": (
        "You are an intelligent assistant that can order sentences.",
        "scrambled sentences",
        "Which sentence comes first in the logical order?",
    ),
}
"""The first-token wording of each task."""

_FROM_PROMPT = {
    "rankgpt": "passages",
    "rankvicuna": "passages",
    "wordsort": "wordsort",
    "mathsort": "mathsort",
    "gsm8ksort": "gsm8ksort",
}


@dataclass(frozen=True, slots=True)
class FirstTokenPrompt:
    """Items labelled ``[A]``, ``[B]``...; the instruction asks for the best item's label.

    ``task`` picks the wording (:data:`TASKS`); passages are cut to ``max_words`` words.
    """

    task: str = "passages"
    max_words: int | None = 300
    labels: tuple[str, ...] = LETTERS
    name: str = "first_token"

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigurationError(
                f"unknown first-token task {self.task!r}; available: {', '.join(TASKS)}"
            )
        if len(set(self.labels)) != len(self.labels) or not all(self.labels):
            raise ConfigurationError(f"labels must be distinct non-empty strings: {self.labels}")

    def window_labels(self, n: int) -> tuple[str, ...]:
        """The labels of a window of ``n`` items (ConfigurationError when too few)."""
        if n > len(self.labels):
            raise ConfigurationError(
                f"a first-token window of {n} items needs {n} labels; this prompt has "
                f"{len(self.labels)}: lower window_size"
            )
        return self.labels[:n]

    def render(self, query: str, items: Sequence[str]) -> list[Message]:
        system, kind, question = TASKS[self.task]
        labels = self.window_labels(len(items))
        passages = self.task == "passages"
        shown = [clean_passage(t, self.max_words) if passages else t for t in items]
        listed = "\n".join(f"[{label}] {text}" for label, text in zip(labels, shown, strict=True))
        asked = f"Search Query: {query}\n{question}" if passages else question
        user = (
            f"I will provide you with {len(items)} {kind}, each labelled with a letter.\n\n"
            f"{listed}\n\n{asked} Answer with its letter only ({labels[0]}-{labels[-1]})."
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def parse(self, text: str, n_items: int, items: Sequence[str] | None = None) -> NoReturn:
        raise ConfigurationError(
            "a first-token prompt is scored from label probabilities, not parsed: use it with "
            "scoring='first_token'"
        )


def first_token_prompt(prompt: str | Prompt, max_words: int | None = 300) -> FirstTokenPrompt:
    """The first-token form of ``prompt``: a :class:`FirstTokenPrompt` as given, or one for a
    built-in prompt's name or object (rankgpt and rankvicuna: passages; the sorting tasks)."""
    if isinstance(prompt, FirstTokenPrompt):
        return prompt
    name = prompt if isinstance(prompt, str) else getattr(prompt, "name", "")
    task = _FROM_PROMPT.get(str(name).strip().lower())
    if task is None:
        raise ConfigurationError(
            f"prompt {name!r} has no first-token form; use one of {', '.join(_FROM_PROMPT)} or "
            "pass a FirstTokenPrompt(task=...)"
        )
    if not isinstance(prompt, str):
        max_words = getattr(prompt, "max_words", max_words)
    return FirstTokenPrompt(task, max_words if task == "passages" else None)
