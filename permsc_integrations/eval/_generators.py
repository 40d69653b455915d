"""Fresh sorting sets made the paper's way, deterministic from a seed.

- MathSort: lists of ``a op b`` (single digits 1-9, op in ``+ - * /``) whose values are all
  different within a list (so the truth has no ties) and whose expressions never repeat.
- WordSort: five alphabetically consecutive words from a word list plus five random ones.
  The default word list is ``web2`` from the PyPI package ``english-words`` (offline, in
  the package), falling back to ``/usr/share/dict/words``; or pass ``words=``.

Example:
    >>> ds = generate_mathsort(2, seed=1)
    >>> len(ds), len(ds.examples[0].items), ds.stats["tied_pairs"]
    (2, 10, 0)
    >>> ws = generate_wordsort(1, seed=0, words=[f"w{i:03d}" for i in range(200)])
    >>> len(set(ws.examples[0].items))
    10
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from permsc_integrations.errors import ConfigurationError, MissingDependencyError
from permsc_integrations.eval._datasets import SortingDataset, SortingExample, _stats

__all__ = ["generate_mathsort", "generate_wordsort", "default_word_list"]

_OPS = {
    "+": lambda a, b: Fraction(a + b),
    "-": lambda a, b: Fraction(a - b),
    "*": lambda a, b: Fraction(a * b),
    "/": lambda a, b: Fraction(a, b),
}


def _math_list(rng: random.Random, n_items: int) -> tuple[tuple[str, ...], tuple[float, ...]]:
    seen_values: set[Fraction] = set()
    items: list[str] = []
    values: list[float] = []
    while len(items) < n_items:
        a, b, op = rng.randint(1, 9), rng.randint(1, 9), rng.choice(sorted(_OPS))
        value = _OPS[op](a, b)
        if value in seen_values:
            continue
        seen_values.add(value)
        items.append(f"{a} {op} {b}")
        values.append(float(value))
    return tuple(items), tuple(values)


def generate_mathsort(n_lists: int, *, n_items: int = 10, seed: int = 0) -> SortingDataset:
    """``n_lists`` MathSort lists of ``n_items`` expressions with distinct values."""
    if n_lists < 0 or not 2 <= n_items <= 60:
        raise ConfigurationError("generate_mathsort needs n_lists >= 0 and 2 <= n_items <= 60")
    rng = random.Random(seed)
    examples = tuple(
        SortingExample(f"gen-mathsort-{k}", *_math_list(rng, n_items), "mathsort")
        for k in range(n_lists)
    )
    return SortingDataset("mathsort-generated", examples, _stats(examples, seed=seed))


def default_word_list() -> list[str]:
    """Lower-case alphabetic words, sorted: ``english-words`` web2, else the system dictionary."""
    try:
        # lazy: optional dependency (the eval extra)
        from english_words import get_english_words_set
    except ImportError:
        system = Path("/usr/share/dict/words")
        if not system.is_file():
            raise MissingDependencyError(
                "english-words", "eval", purpose="generating WordSort lists"
            ) from None
        words = {w.strip().lower() for w in system.read_text(encoding="utf-8").split()}
    else:
        words = set(get_english_words_set(["web2"], lower=True, alpha=True))
    return sorted(w for w in words if w.isascii() and w.isalpha() and len(w) > 2)


def _word_list(
    rng: random.Random, vocab: Sequence[str], consecutive: int, random_count: int
) -> tuple[str, ...]:
    start = rng.randrange(0, len(vocab) - consecutive)
    chosen = list(vocab[start : start + consecutive])
    taken = set(chosen)
    while len(chosen) < consecutive + random_count:
        word = vocab[rng.randrange(len(vocab))]
        if word not in taken:
            taken.add(word)
            chosen.append(word)
    rng.shuffle(chosen)
    return tuple(chosen)


def generate_wordsort(
    n_lists: int,
    *,
    seed: int = 0,
    words: Sequence[str] | None = None,
    consecutive: int = 5,
    random_count: int = 5,
) -> SortingDataset:
    """``n_lists`` WordSort lists: ``consecutive`` neighbouring words + ``random_count`` others."""
    vocab = sorted(set(words if words is not None else default_word_list()))
    if len(vocab) < 2 * (consecutive + random_count):
        raise ConfigurationError(f"the word list is too small ({len(vocab)} words) for WordSort")
    rng = random.Random(seed)
    examples = []
    for k in range(n_lists):
        items = _word_list(rng, vocab, consecutive, random_count)
        examples.append(SortingExample(f"gen-wordsort-{k}", items, items, "wordsort"))
    return SortingDataset("wordsort-generated", tuple(examples), _stats(examples, seed=seed))
