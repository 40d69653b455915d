"""Parse and validate model answers into rankings of prompt positions.

Two answer styles: identifiers (``[4] > [2] > [1]``, or ``4 > 2 > 1``) for passage prompts,
and the items' own text (``a, b, c`` or one item per line) for sorting prompts. Rules:

- Only what the model wrote after its last ``</think>`` counts.
- Only a ranking *form* counts: identifiers chained by separators (``[4] > [2] > [1]``,
  ``[4], [2]``, one per line, a numbered list of ids) or bare numbers chained by ``>``. Ids
  scattered in prose (``[1] is less relevant than [2]``) or echoed passages (``[1] alpha`` /
  ``[2] beta``) are not a ranking; a lone id counts only when it is the whole answer's only id
  and ends its line (``Ranking: [3]``). A number in prose is not an id.
- An answer that is just the prompt's own format example (``examples``, e.g. ``[1] > [2]``)
  is not a vote, unless it ranks every item.
- Ids are 1-based in the text and 0-based in :attr:`ParsedAnswer.ranking`.
- An answer naming an id that was not shown (``[9]`` among 4, ``[0]``) is not a vote: a
  :class:`ParseError` (the model is confused, or copying text that is not its answer); a
  repeated item keeps its first place and is reported in ``duplicates``; missing items stay
  missing.
- No usable ranking at all raises :class:`ParseError` carrying the raw text; no other
  exception is raised for any string.

:func:`disarm` is the other side of these rules: it rewrites text (a passage) so that no
part of it reads as an answer, whatever a model copies of it, even a model that
NFKC-normalises or HTML-unescapes what it copies (docs/security.md).

Example:
    >>> a = parse_identifiers("<think>[1] looks best</think> [3] > [1] > [3]", 4)
    >>> a.ranking, a.missing, a.duplicates, a.status.value
    ((2, 0), (1, 3), (2,), 'partial')
    >>> parse_items("- b\\n- a", ["a", "b"]).ranking
    (1, 0)
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from permsc_integrations._checks import is_int
from permsc_integrations.errors import InvalidRankingError, ParseError
from permsc_integrations.results import ParsedAnswer

__all__ = ["parse_identifiers", "parse_items", "strip_reasoning", "disarm"]

_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
# ``[ 12 ]`` or a full-width/typographic variant; digits are ASCII only.
_BRACKETED = r"[\[【［]\s*([0-9]+)\s*[\]】］]"
# Between ids: an arrow or comma, plain whitespace, or a line break with a list marker.
_SEP = r"(?:\s*(?:>|≻|›|→|->|=>|,|;|\|)\s*|\s*\n\s*(?:[0-9]{1,3}[.)]|[-*•])\s*|\s+)"
_BRACKET_CHAIN = re.compile(rf"{_BRACKETED}(?:{_SEP}{_BRACKETED})*")
_BRACKET_ID = re.compile(_BRACKETED)
# Bare numbers count only when chained by ``>``: ``4 > 2 > 1`` (``&gt;`` is read as ``>``).
_GT = r"(?:>|≻)"
_BARE_CHAIN = re.compile(rf"(?<![\w.\[])[0-9]+(?:\s*{_GT}\s*[0-9]+)+(?![\w\]]|\.[0-9])")
_BARE_ID = re.compile(r"[0-9]+")
# What :func:`disarm` rewrites: any numbers chained by ``>`` (decimals and versions whole),
# wherever they stand, since a model may copy any part of a passage.
_NUMBER = r"[0-9]+(?:\.[0-9]+)*"
_ANY_CHAIN = re.compile(rf"{_NUMBER}(?:\s*(?:{_GT}|&gt;)\s*{_NUMBER})+")
_NUMBER_IN_CHAIN = re.compile(_NUMBER)
_WHITESPACE = re.compile(r"\s+")
_MAX_ID_DIGITS = 9


def strip_reasoning(text: str) -> str:
    """The answer part of ``text``: what follows the last ``</think>``.

    An unclosed ``<think>`` (a truncated reasoning trace) drops everything after it.

    >>> strip_reasoning("<think>maybe [2]?</think>\\n[1] > [2]")
    '\\n[1] > [2]'
    """
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        return text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    return text[: opened.start()] if opened else text


def disarm(text: str) -> str:
    """``text`` with nothing :func:`parse_identifiers` would read as ids, in any part of it:
    every bracketed id (``[3]``, ``【3】``, ``［3］``) and every number chained by ``>``
    (``6 > 5 > 4``, also ``≻`` and ``&gt;``) becomes a number in parentheses. The text is
    first put in the form a model that normalises what it copies would write
    (:func:`plain_form`: ``６ ＞ ５``, ``⑥ > ⑤``, ``&#91;6&#93;``, ``6 &amp;gt; 5`` are
    ``6 > 5`` and ``[6]`` then), so that no such copy reads as an answer either.

    >>> disarm("rank [3] first: 6 > 5 > 4, version 2.0.1 > 2.0")
    'rank (3) first: (6) > (5) > (4), version (2.0.1) > (2.0)'
    >>> disarm("６ ＞ ５, ⑥ &gt; ⑤ and &#91;6&#93;")
    '(6) > (5), (6) > (5) and (6)'
    """
    text = _BRACKET_ID.sub(r"(\1)", plain_form(text))
    return _ANY_CHAIN.sub(lambda m: _NUMBER_IN_CHAIN.sub(r"(\g<0>)", m.group(0)), text)


def plain_form(text: str) -> str:
    """``text`` NFKC-normalised with its HTML entities decoded, again until neither changes
    it (``&amp;gt;`` is ``>``): what a model that normalises what it copies would write.
    Plain ASCII without ``&`` is returned as is.

    >>> plain_form("ﬁve ２ &amp;lt; 3 AT&T")
    'five 2 < 3 AT&T'
    """
    if text.isascii() and "&" not in text:
        return text
    # lazy: start-up time (html.entities is a large table), and most passages never need it
    import html

    for _ in range(len(text)):  # each round decodes an entity: never more rounds than chars
        plain = unicodedata.normalize("NFKC", html.unescape(text))
        if plain == text:
            break
        text = plain
    return text


def _candidates(answer: str) -> list[list[str]]:
    """Every chain of explicit ids in ``answer``, as the id tokens in the order written."""
    chains: list[tuple[int, list[str]]] = []
    for match in _BRACKET_CHAIN.finditer(answer):
        ids = [m.group(0) for m in _BRACKET_ID.finditer(match.group(0))]
        chains.append((match.start(), ids))
    for match in _BARE_CHAIN.finditer(answer):
        ids = [m.group(0) for m in _BARE_ID.finditer(match.group(0))]
        chains.append((match.start(), ids))
    chains.sort(key=lambda c: c[0])
    return [ids for _, ids in chains]


def _squeeze(text: str) -> str:
    """Each whitespace run as one newline or space, so matching stays linear in the text."""
    return _WHITESPACE.sub(lambda m: "\n" if "\n" in m.group(0) else " ", text)


_LINE_REST = re.compile(r"[ \t.!;:]*(?:\n|$)")


def _choose(answer: str) -> list[str]:
    """The longest chain (the last of equally long ones); a lone id only as a whole answer."""
    answer = _squeeze(answer)
    chains = _candidates(answer)
    if not chains:
        return []
    best = max(reversed(chains), key=len)  # max keeps the first maximum: the last written
    if len(best) > 1:
        return best
    ids = list(_BRACKET_ID.finditer(answer))
    if len(ids) == 1 and _LINE_REST.match(answer, ids[0].end()):
        return best
    return []  # ids in prose or in echoed passages: not a ranking


def _id_value(token: str) -> int | None:
    digits = re.sub(r"[^0-9]", "", token)
    return int(digits) if len(digits) <= _MAX_ID_DIGITS else None


def _check_count(n_items: int) -> None:
    if not is_int(n_items) or n_items < 1:
        raise InvalidRankingError(f"n_items must be a positive integer, got {n_items!r}")


def _answer(
    ranking: list[int], n_items: int, duplicates: list[int], rejected: list[str], text: str
) -> ParsedAnswer:
    if not ranking:
        raise ParseError(f"no usable ranking of {n_items} items in the model output", text)
    seen = set(ranking)
    return ParsedAnswer(
        ranking=tuple(ranking),
        missing=tuple(i for i in range(n_items) if i not in seen),
        duplicates=tuple(duplicates),
        out_of_range=tuple(rejected),
    )


def example_ids(example: str) -> tuple[int, ...]:
    """The 1-based ids of a format example such as ``"[1] > [2]"``.

    >>> example_ids("e.g., [4] > [2]")
    (4, 2)
    """
    return tuple(
        int(v)
        for v in (_id_value(m.group(0)) for m in _BRACKET_ID.finditer(example))
        if v is not None
    )


def parse_identifiers(text: str, n_items: int, examples: Sequence[str] = ()) -> ParsedAnswer:
    """Parse an identifier answer (``[4] > [2] > ...``) over ``n_items`` prompt positions.

    ``examples`` are the prompt's own format examples (``"[1] > [2]"``): an answer that only
    repeats one of them does not count (see the module docstring).

    >>> parse_identifiers("Ranking: 2 > 1 > 3", 3).ranking
    (1, 0, 2)
    >>> parse_identifiers("Passage 2 is best.", 3)
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.ParseError: no usable ranking of 3 items in the model output; ...
    """
    _check_count(n_items)
    if not isinstance(text, str):
        raise ParseError(f"model output must be text, got {type(text).__name__}", repr(text))
    ranking: dict[int, None] = {}  # insertion-ordered set
    duplicates: dict[int, None] = {}
    rejected: list[str] = []
    tokens = _choose(strip_reasoning(text.replace("&gt;", ">")))
    values = tuple(_id_value(t) for t in tokens)
    if len(values) < n_items and values in {example_ids(e) for e in examples}:
        raise ParseError("the answer only repeats the prompt's format example", text)
    for token, value in zip(tokens, values, strict=True):
        if value is None or not 1 <= value <= n_items:
            rejected.append(token)
        elif value - 1 in ranking:
            duplicates[value - 1] = None
        else:
            ranking[value - 1] = None
    if rejected:
        raise ParseError(
            f"the answer names ids that were not shown ({', '.join(rejected[:5])}; the prompt "
            f"showed [1] to [{n_items}])",
            text,
        )
    return _answer(list(ranking), n_items, list(duplicates), [], text)


# --------------------------------------------------------------------------- text answers

_QUOTES = "\"'`“”‘’«»"
_BULLET = re.compile(r"^\s*(?:[-*•·+]\s+|\(?[0-9]{1,3}[.):]\s+|\(?[a-zA-Z][.)]\s+)")
_MAX_REPORTED = 80


def _key(token: str) -> str:
    """A comparison key: no whitespace, no surrounding quotes or final period, case-folded."""
    token = token.strip().strip(_QUOTES).strip()
    token = token.rstrip(".").strip().strip(_QUOTES)
    return "".join(token.split()).casefold()


def _splits(answer: str, words: bool) -> list[list[str]]:
    """Ways to split an answer into tokens: by line, by comma, and (single words) by space."""
    lines = [line for line in answer.splitlines() if line.strip()]
    by_comma = [part for line in lines for part in line.split(",") if part.strip()]
    return [lines, by_comma, answer.split()] if words else [lines, by_comma]


def _lookup(token: str, keys: dict[str, list[int]]) -> list[int]:
    """Positions whose item the token names: as written, without a bullet, after a colon."""
    for variant in (token, _BULLET.sub("", token, count=1), token.rpartition(":")[2]):
        positions = keys.get(_key(variant))
        if positions:
            return positions
    return []


def _match(tokens: list[str], keys: dict[str, list[int]]) -> tuple[list[int], list[int], list[str]]:
    used: set[int] = set()
    ranking: list[int] = []
    duplicates: list[int] = []
    unknown: list[str] = []
    for token in tokens:
        positions = _lookup(token, keys)
        if not positions:
            if not token.strip().endswith(":"):  # headings like "Sorted list:" are not items
                unknown.append(token.strip()[:_MAX_REPORTED])
            continue
        free = [p for p in positions if p not in used]
        if free:
            used.add(free[0])
            ranking.append(free[0])
        elif positions[0] not in duplicates:
            duplicates.append(positions[0])
    return ranking, duplicates, unknown


def parse_items(text: str, items: Sequence[str]) -> ParsedAnswer:
    """Parse an answer that lists the ``items`` themselves (comma-separated or one per line).

    The split (by line, by comma, or by space when every item is one word) that matches the
    most items wins. Matching ignores whitespace, case, surrounding quotes, a final period,
    list bullets or numbering, and a lead-in ending in a colon. Repeated items match the
    first unused position with that text.

    >>> parse_items("1 + 1, 9 - 7, 1+1", ["1 + 1", "1 + 1", "9 - 7"]).ranking
    (0, 2, 1)
    """
    _check_count(len(items))
    if not isinstance(text, str):
        raise ParseError(f"model output must be text, got {type(text).__name__}", repr(text))
    keys: dict[str, list[int]] = {}
    for position, item in enumerate(items):
        keys.setdefault(_key(str(item)), []).append(position)
    words = all(len(str(item).split()) == 1 for item in items)
    splits = _splits(strip_reasoning(text), words)
    best = max((_match(tokens, keys) for tokens in splits), key=lambda r: len(r[0]))
    return _answer(best[0], len(items), best[1], best[2], text)
