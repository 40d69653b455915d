"""The perm-sc paper's sorting datasets: MathSort, WordSort and GSM8KSort, read offline.

Each list becomes a :class:`SortingExample`: the items in the file's order and one sort key
per item (the value, the word, the sentence index). The truth is ascending key order, and
*ties are kept*: MathSort has lists where two expressions share a value, and a model that
puts either first is right. :func:`kendall_tau_b` scores against that tie-aware truth.

Quirks (counted by :attr:`SortingDataset.stats`):

- MathSort: 100 lists of 10; 38 lists hold tied values (47 tied pairs), 6 repeat an expression.
- GSM8KSort: a question becomes a list of its sentences; only questions of 5 to 10 sentences
  are kept (the paper's filter), which leaves about 11 of 100 with a regex sentence splitter.

Scoring: a pair tied in the truth is right in either order, so it is left out of the tau;
every other pair counts (see :func:`kendall_tau_b`).

Example:
    >>> ex = SortingExample("m0", ("3 + 4", "1 * 2", "8 / 4"), (7.0, 2.0, 2.0), "mathsort")
    >>> ex.truth, ex.tied_pairs
    ((1, 2, 0), 1)
    >>> kendall_tau_b((2, 1, 0), ex.keys)  # the tied pair in either order is fine
    1.0
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from permsc_integrations.errors import ConfigurationError

if TYPE_CHECKING:
    from typing import Self  # Python 3.11; only read by the type checker

__all__ = [
    "SortingExample",
    "SortingDataset",
    "load_mathsort",
    "load_wordsort",
    "load_gsm8ksort",
    "load_sorting",
    "split_sentences",
    "kendall_tau_b",
    "default_data_dir",
]

Key = float | str | int


class _Ordered(Protocol):
    """A sort key: a number or a string (compared with keys of its own kind)."""

    def __lt__(self, other: Self, /) -> bool: ...

    def __gt__(self, other: Self, /) -> bool: ...


@dataclass(frozen=True, slots=True)
class SortingExample:
    """One list to sort: ``items`` in input order; ``keys[i]`` sorts item ``i`` (ascending)."""

    id: str
    items: tuple[str, ...]
    keys: tuple[Key, ...]
    task: str

    @property
    def truth(self) -> tuple[int, ...]:
        """The true order, best (smallest key) first; tied items in input order."""
        return tuple(sorted(range(len(self.items)), key=lambda i: (self.keys[i], i)))

    @property
    def tied_pairs(self) -> int:
        """How many item pairs share a key (either order is correct)."""
        return sum(c * (c - 1) // 2 for c in Counter(self.keys).values())

    @property
    def duplicate_items(self) -> int:
        """How many items repeat an earlier item's text."""
        return len(self.items) - len(set(self.items))


@dataclass(frozen=True, slots=True)
class SortingDataset:
    """A named list of examples with counts of its quirks (``stats``)."""

    name: str
    examples: tuple[SortingExample, ...]
    stats: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[SortingExample]:
        return iter(self.examples)

    def head(self, limit: int | None) -> SortingDataset:
        """The first ``limit`` examples (all when ``None``)."""
        return (
            self if limit is None else SortingDataset(self.name, self.examples[:limit], self.stats)
        )


def default_data_dir() -> Path:
    """``../shared/data/perm-sc`` seen from the working directory or from this checkout."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[3]):
        candidate = base / ".." / "shared" / "data" / "perm-sc"
        if candidate.is_dir():
            return candidate.resolve()
    return (Path.cwd() / ".." / "shared" / "data" / "perm-sc").resolve()


def _path(path: str | Path | None, filename: str) -> Path:
    resolved = Path(path) if path is not None else default_data_dir() / filename
    if resolved.is_dir():
        resolved = resolved / filename
    if not resolved.is_file():
        raise ConfigurationError(
            f"dataset file not found: {resolved}; pass the path to {filename} "
            "(the perm-sc repository's data/ folder has it)"
        )
    return resolved


def _stats(examples: Sequence[SortingExample], **extra: int) -> dict[str, int]:
    return {
        "examples": len(examples),
        "items": sum(len(e.items) for e in examples),
        "lists_with_ties": sum(1 for e in examples if e.tied_pairs),
        "tied_pairs": sum(e.tied_pairs for e in examples),
        "lists_with_duplicate_items": sum(1 for e in examples if e.duplicate_items),
        **extra,
    }


def load_mathsort(path: str | Path | None = None) -> SortingDataset:
    """MathSort (``mathsort.tsv``): lists grouped by ``group``, keyed by ``answer``."""
    groups: dict[str, list[tuple[str, float]]] = {}
    with _path(path, "mathsort.tsv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            groups.setdefault(row["group"], []).append((row["expression"], float(row["answer"])))
    examples = tuple(
        SortingExample(
            f"mathsort-{g}", tuple(e for e, _ in rows), tuple(v for _, v in rows), "mathsort"
        )
        for g, rows in groups.items()
    )
    return SortingDataset("mathsort", examples, _stats(examples))


def load_wordsort(path: str | Path | None = None) -> SortingDataset:
    """WordSort (``wordsort.tsv``): one JSON list of words per row, keyed alphabetically."""
    examples: list[SortingExample] = []
    with _path(path, "wordsort.tsv").open(encoding="utf-8", newline="") as handle:
        for k, row in enumerate(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)):
            words = tuple(json.loads(row["word_samples"]))
            examples.append(SortingExample(f"wordsort-{k}", words, words, "wordsort"))
    return SortingDataset("wordsort", tuple(examples), _stats(examples))


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\u201d]?\s+(?=\S)")


def split_sentences(text: str) -> list[str]:
    """Split on ``.``, ``!`` or ``?`` followed by white space (a regex, not a trained model).

    >>> split_sentences("It costs $2.50. Two more?  Yes!")
    ['It costs $2.50.', 'Two more?', 'Yes!']
    """
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def load_gsm8ksort(
    path: str | Path | None = None, *, min_sentences: int = 5, max_sentences: int = 10
) -> SortingDataset:
    """GSM8KSort (``gsm8ksort.jsonl``): each question's sentences, keyed by their position.

    Questions outside ``min_sentences..max_sentences`` are dropped, as in the paper; the
    count kept and dropped is in ``stats``.
    """
    examples: list[SortingExample] = []
    total = 0
    with _path(path, "gsm8ksort.jsonl").open(encoding="utf-8") as handle:
        for k, line in enumerate(line for line in handle if line.strip()):
            total += 1
            sentences = tuple(split_sentences(json.loads(line)["question"]))
            if min_sentences <= len(sentences) <= max_sentences:
                keys = tuple(range(len(sentences)))
                examples.append(SortingExample(f"gsm8ksort-{k}", sentences, keys, "gsm8ksort"))
    return SortingDataset(
        "gsm8ksort",
        tuple(examples),
        _stats(examples, questions=total, dropped=total - len(examples)),
    )


_LOADERS = {"mathsort": load_mathsort, "wordsort": load_wordsort, "gsm8ksort": load_gsm8ksort}


def load_sorting(task: str, path: str | Path | None = None) -> SortingDataset:
    """Load a sorting task by name (``mathsort``, ``wordsort``, ``gsm8ksort``)."""
    try:
        loader = _LOADERS[task]
    except KeyError:
        raise ConfigurationError(
            f"unknown sorting task {task!r}; use one of {sorted(_LOADERS)}"
        ) from None
    return loader(path)


def kendall_tau_b(order: Sequence[int], keys: Sequence[_Ordered]) -> float:
    """Kendall tau between a predicted order (best first) and the tie-aware truth ``keys``.

    Only pairs whose keys differ are scored: +1 in the true order, -1 reversed, 0 when both
    items are missing from ``order`` (missing items share the last place); the sum is
    divided by the number of such pairs. A pair tied in the truth is right in either order
    and is not scored, so a perfect answer scores 1.0 even on a list with ties. Without ties
    and missing items this is the usual Kendall tau (tau-a = tau-b). A list with fewer than
    two distinct keys scores 1.0.

    >>> kendall_tau_b([0, 1, 2], [1, 2, 3]), kendall_tau_b([2, 1, 0], [1, 2, 3])
    (1.0, -1.0)
    """
    n = len(keys)
    position = {item: rank for rank, item in enumerate(order)}
    predicted = [position.get(i, n) for i in range(n)]
    score = pairs = 0
    for i in range(n):
        for j in range(i + 1, n):
            truth = (keys[i] > keys[j]) - (keys[i] < keys[j])
            if truth:
                pairs += 1
                score += truth * ((predicted[i] > predicted[j]) - (predicted[i] < predicted[j]))
    return 1.0 if pairs == 0 else score / pairs
