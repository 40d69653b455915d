"""How the simulated judge reads a prompt and writes its answer.

Documents carry a hidden marker (:func:`hide`): an invisible run of zero-width characters at
the start of the text that encodes an integer key. It survives the usual passage preparation
(whitespace collapsed, truncation to the first words or tokens, quoting), so the judge finds
which documents a prompt shows, and in which order, whatever the prompt's wording. The label
just before each marker says how to answer (:data:`ANSWER_FORMATS`, keyed by the label's
kind): numbered identifiers (``[3] ...``: RankGPT, RankVicuna) get a full ranking
``[3] > [1] > [2]``; ``Passage B: "..."`` labels (setwise, and pairwise with two passages)
get the best one's label, ``Passage B``; letter labels ``[B] ...`` (first-token prompts) get
the best letter, with first-token probabilities.

Example:
    >>> text = hide(5, "Goldfish grow.")
    >>> text.endswith("Goldfish grow."), len(text) > len("Goldfish grow.")
    (True, True)
    >>> [(s.label, s.key) for s in read_prompt([{"role": "user", "content": "[1] " + text}])]
    [('1', 5)]
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from permsc_integrations.testing._responders import Reply

__all__ = [
    "hide",
    "hidden_keys",
    "strip_markers",
    "count_tokens",
    "Shown",
    "read_prompt",
    "ANSWER_FORMATS",
    "answer",
]

_DIGITS = "\u200b\u200c\u200d\u2060"  # zero width: space, non-joiner, joiner, word joiner
_EDGE = "\u2063"  # invisible separator: opens and closes a marker
_MARKER = re.compile(f"{_EDGE}([{_DIGITS}]+){_EDGE}")
_LABEL = re.compile(
    r"(?:\[(?P<number>\d+)\]|\[(?P<letter>[A-Z])\]|Passage (?P<passage>[A-Z]):?)[\s\"'“]*$"
)
_TOKEN = re.compile(r"\w+|[^\w\s]")


def hide(key: int, text: str) -> str:
    """``text`` with an invisible marker for ``key`` (an int >= 0) in front of it.

    >>> hidden_keys(hide(0, "a") + " " + hide(41, "b"))
    [0, 41]
    """
    if isinstance(key, bool) or not isinstance(key, int) or key < 0:
        raise ValueError(f"a document key must be an int >= 0, got {key!r}")
    digits = []
    while True:
        key, digit = divmod(key, 4)
        digits.append(_DIGITS[digit])
        if not key:
            break
    return f"{_EDGE}{''.join(reversed(digits))}{_EDGE}{text}"


def _decode(code: str) -> int:
    value = 0
    for char in code:
        value = 4 * value + _DIGITS.index(char)
    return value


def hidden_keys(text: str) -> list[int]:
    """The keys of the markers in ``text``, in order."""
    return [_decode(m.group(1)) for m in _MARKER.finditer(text)]


def strip_markers(text: str) -> str:
    """``text`` without its markers (what a reader sees).

    >>> strip_markers(hide(3, "Goldfish grow."))
    'Goldfish grow.'
    """
    return _MARKER.sub("", text)


def count_tokens(text: str) -> int:
    """Tokens as the judge counts them: words and punctuation marks, markers left out.

    >>> count_tokens("[3] > [1]")
    7
    """
    return len(_TOKEN.findall(strip_markers(text)))


@dataclass(frozen=True, slots=True)
class Shown:
    """One document as a prompt shows it: its ``key``, the ``label`` that names it
    (``"3"``, ``"B"``) and the label's ``kind`` (a key of :data:`ANSWER_FORMATS`)."""

    key: int
    label: str
    kind: str


def read_prompt(messages: Iterable[Mapping[str, object]]) -> list[Shown]:
    """The documents the user messages show, in prompt order (a repeated key counts once).

    A marker with no label before it on its line is numbered by its position, as RankGPT
    would number it.
    """
    shown: list[Shown] = []
    seen: set[int] = set()
    for message in messages:
        if message.get("role") != "user":
            continue
        content = str(message.get("content") or "")
        for match in _MARKER.finditer(content):
            key = _decode(match.group(1))
            if key in seen:
                continue
            seen.add(key)
            line = content[: match.start()].rsplit("\n", 1)[-1]
            label = _LABEL.search(line[-40:])
            if label is None:
                shown.append(Shown(key, str(len(shown) + 1), "number"))
            else:
                kind = next(k for k in ("number", "letter", "passage") if label.group(k))
                shown.append(Shown(key, label.group(kind), kind))
    return shown


def _ranking(labels: Sequence[str], scores: Sequence[float]) -> Reply:
    return Reply(" > ".join(f"[{label}]" for label in labels))


def _passage(labels: Sequence[str], scores: Sequence[float]) -> Reply:
    return Reply(f"Passage {labels[0]}")


def _letter(labels: Sequence[str], scores: Sequence[float]) -> Reply:
    """The best letter, with first-token probabilities: a softmax of the scores."""
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights)
    probabilities = sorted(
        ((label, w / total) for label, w in zip(labels, weights, strict=True)),
        key=lambda pair: -pair[1],
    )
    return Reply.first_token(probabilities)


AnswerFormat = Callable[[Sequence[str], Sequence[float]], Reply]
"""Writes an answer from the labels best first (and their scores, in the same order)."""

ANSWER_FORMATS: dict[str, AnswerFormat] = {
    "number": _ranking,  # RankGPT, RankVicuna: "[3] > [1] > [2]"
    "passage": _passage,  # setwise, pairwise: "Passage B"
    "letter": _letter,  # first-token prompts: "B", with logprobs
}


def answer(shown: Sequence[Shown], order: Sequence[int], scores: Sequence[float]) -> Reply:
    """The reply for ``shown`` when the judge puts prompt positions in ``order`` (best first)
    with ``scores`` per position; the first document's label kind picks the format."""
    labels = [shown[p].label for p in order]
    return ANSWER_FORMATS[shown[0].kind](labels, [scores[p] for p in order])
