"""A first token's ``logprobs`` (or logits) read as a distribution over a window's labels.

The first token's top list (``choices[0].logprobs.content[0].top_logprobs``: OpenAI, vLLM,
llama.cpp's server) is read into ``(token, probability)`` pairs; llama.cpp's ``top_probs``
(``post_sampling_probs``) and the legacy completions shape that llama-cpp-python's server
answers (``logprobs.top_logprobs[0]``, a token-to-logprob object) are read too.

:func:`label_probabilities` applies the rule: a label's probability is the sum over the top
list's tokens whose text, stripped of whitespace, equals the label (``"A"``, ``" A"``,
``"A\\n"``); a label missing from the list gets the *floor*, the smallest probability in the
list capped by the probability the list leaves out (no missing token can hold more than
either); the labels are then renormalised. ``mass`` sums the probabilities actually read
for the labels (floors are estimates, not read), so it is a lower bound of their true mass.

Example:
    >>> probabilities, mass = label_probabilities([("A", 0.5), (" B", 0.2), ("B", 0.1),
    ...                                            ("The", 0.1)], ["A", "B", "C"])
    >>> [round(p, 3) for p in probabilities], round(mass, 3)
    ([0.556, 0.333, 0.111], 0.8)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from permsc_integrations._registry import publish
from permsc_integrations.errors import BackendError, ConfigurationError, LogprobsUnavailableError

__all__ = [
    "label_probabilities",
    "label_probabilities_from_logits",
    "top_list",
    "check_labels",
    "refused_logprobs",
]

TopList = list[tuple[str, float]]


def check_labels(labels: Sequence[str]) -> None:
    """Refuse an empty, blank or repeated label (they could not be told apart)."""
    stripped = [label.strip() if isinstance(label, str) else label for label in labels]
    if not stripped or any(not isinstance(s, str) or not s for s in stripped):
        raise ConfigurationError(f"labels must be non-blank strings, got {list(labels)!r}")
    if len(set(stripped)) != len(stripped):
        raise ConfigurationError(f"labels must differ once stripped, got {list(labels)!r}")


def label_probabilities(
    top: Sequence[tuple[str, float]], labels: Sequence[str]
) -> tuple[tuple[float, ...], float]:
    """The labels' probabilities renormalised over the labels, and the mass read for them.

    With no label in the list and a floor of 0, every label gets ``1 / len(labels)``.
    """
    index = {label.strip(): i for i, label in enumerate(labels)}
    read: list[float | None] = [None] * len(labels)
    for token, probability in top:
        i = index.get(token.strip())
        if i is not None:
            read[i] = (read[i] or 0.0) + probability
    floor = min(min((p for _, p in top), default=0.0), max(0.0, 1.0 - sum(p for _, p in top)))
    raw = [floor if r is None else r for r in read]
    total = sum(raw)
    if total <= 0.0:
        return tuple(1.0 / len(labels) for _ in labels), 0.0
    return tuple(r / total for r in raw), sum(r for r in read if r is not None)


def label_probabilities_from_logits(
    logits: npt.ArrayLike, label_ids: Sequence[Sequence[int]]
) -> tuple[tuple[float, ...], float]:
    """From a whole vocabulary's logits: each label's probability (the softmax summed over
    its token ids), renormalised over the labels, and the labels' mass before that.

    >>> probabilities, mass = label_probabilities_from_logits([2.0, 1.0, 1.0, 0.0], [[0], [1, 2]])
    >>> [round(p, 3) for p in probabilities], round(mass, 3)
    ([0.576, 0.424], 0.928)
    """
    z = np.asarray(logits, dtype=np.float64)
    exp = np.exp(z - z.max())
    softmax = exp / exp.sum()
    raw = [float(softmax[list(ids)].sum()) for ids in label_ids]
    mass = sum(raw)
    if not mass > 0.0:
        return tuple(1.0 / len(raw) for _ in raw), 0.0
    return tuple(r / mass for r in raw), mass


def top_list(choice: object, source: str) -> TopList:
    """The first token's ``(token, probability)`` top list from one answer choice."""
    logprobs = choice.get("logprobs") if isinstance(choice, Mapping) else None
    if logprobs is None:
        raise _unavailable(source, "no logprobs")
    if not isinstance(logprobs, Mapping):
        raise _malformed(source, "logprobs", logprobs)
    content = logprobs.get("content")
    if content is None and "top_logprobs" in logprobs:  # legacy completions shape
        return _legacy(logprobs["top_logprobs"], source)
    if not isinstance(content, list):
        raise _unavailable(source, "no logprobs.content")
    if not content:
        raise _unavailable(source, "an empty logprobs.content")
    first = content[0] if isinstance(content[0], Mapping) else {}
    entries = first.get("top_logprobs", first.get("top_probs"))  # top_probs: llama.cpp's
    if not isinstance(entries, list):
        raise _malformed(source, "logprobs.content[0]", content[0])
    if not entries:
        raise _unavailable(source, "an empty top_logprobs list")
    return [_entry(entry, source) for entry in entries]


def _legacy(tops: object, source: str) -> TopList:
    if not isinstance(tops, list) or not tops or not isinstance(tops[0], Mapping):
        raise _unavailable(source, "no top_logprobs for the first token")
    if not tops[0]:
        raise _unavailable(source, "an empty top_logprobs object")
    return [(str(token), _probability(lp, None, source)) for token, lp in tops[0].items()]


def _entry(entry: object, source: str) -> tuple[str, float]:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
        raise _malformed(source, "a top_logprobs entry", entry)
    return entry["token"], _probability(entry.get("logprob"), entry.get("prob"), source)


def _probability(logprob: object, probability: object, source: str) -> float:
    """``exp(logprob)`` (``-9999``, OpenAI's "very unlikely", gives 0), or ``prob``."""
    value, is_log = (logprob, True) if logprob is not None else (probability, False)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise _malformed(source, "a token's logprob", value)
    if is_log:
        return math.exp(min(float(value), 0.0))
    if not 0.0 <= value <= 1.0:
        raise _malformed(source, "a token's prob", value)
    return float(value)


def refused_logprobs(error: BackendError, top_logprobs: object) -> LogprobsUnavailableError | None:
    """A 400/422 that names logprobs (a model without them, a cap on ``top_logprobs`` such as
    vLLM's ``--max-logprobs``) as the fatal :class:`LogprobsUnavailableError`, with what to
    do; ``None`` for any other error."""
    plain = type(error) is BackendError  # not a context-length error, a rate limit, ...
    if not plain or error.status_code not in (400, 422) or "logprob" not in str(error).lower():
        return None
    return LogprobsUnavailableError(
        f"{error}; first-token scoring asked for logprobs with top_logprobs={top_logprobs}: "
        "for a server that caps it pass a lower top_logprobs= (a backend option), for one "
        'without logprobs use scoring="generate"',
        status_code=error.status_code,
    )


def _unavailable(source: str, what: str) -> LogprobsUnavailableError:
    return LogprobsUnavailableError(
        f"{source} answered with {what}: this server returns no logprobs, which first-token "
        'scoring reads; use scoring="generate", or a server that returns logprobs '
        "(OpenAI, vLLM, llama.cpp's server)"
    )


def _malformed(source: str, what: str, value: object) -> BackendError:
    return BackendError(
        f"{source} answered {what} {value!r:.120}, not OpenAI's logprobs shape; the answer "
        "was dropped (a malformed provider response)",
        retryable=False,
    )


# the adapters' declared API (permsc_integrations.integration) names these; they live here
publish(
    "permsc_integrations.backends", check_labels, label_probabilities, refused_logprobs, top_list
)
