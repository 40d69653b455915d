"""Passage truncation, as RankGPT does it: the first ``max_words`` whitespace-separated words.

Example:
    >>> truncate_words("one  two\\nthree four", max_words=3)
    'one two three'
"""

from __future__ import annotations

from ..errors import ConfigurationError

__all__ = ["truncate_words", "clean_passage"]


def truncate_words(text: str, max_words: int | None = 300) -> str:
    """The first ``max_words`` words of ``text`` joined by single spaces.

    Like RankGPT, whitespace is collapsed even when nothing is cut. ``None`` disables
    truncation and returns ``text`` stripped.

    >>> truncate_words("  keep  me  ", None)
    'keep  me'
    """
    if max_words is None:
        return text.strip()
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ConfigurationError(
            f"max_words must be a positive integer or None (no truncation), got {max_words!r}"
        )
    return " ".join(text.split()[:max_words])


def clean_passage(text: str, max_words: int | None = 300) -> str:
    """RankGPT's passage preparation: drop an empty ``Title: Content:`` header, truncate.

    >>> clean_passage("Title: Content: Goldfish grow.  Slowly.", 2)
    'Goldfish grow.'
    """
    return truncate_words(text.replace("Title: Content: ", ""), max_words)
