"""A position prior from content-free items, to calibrate first-token probabilities (CapCal).

A model asked for the best of ``n`` labelled items favours some positions whatever the items
say (the first, the last). Show it ``n`` copies of a content-free placeholder ("N/A", an empty
passage, ...) and the first token's distribution over the labels is that bias alone: the
*prior* of each position. Dividing a real answer's probabilities by the prior and
renormalising removes it in a single call; PSC averages it out over shuffles instead, and the
two combine. The prior is estimated once per backend, prompt and window size (several
placeholders, averaged) and cached (:class:`PriorCache`, in memory and optionally in a JSON
file).

Example:
    >>> prior = PositionPrior((0.5, 0.25, 0.25))
    >>> [round(p, 3) for p in prior.correct((0.5, 0.3, 0.2))]
    [0.333, 0.4, 0.267]
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from permsc_integrations.backends.base import (
    FirstTokenBackend,
    FirstTokenBatchBackend,
    GenerationSettings,
    LabelProbabilities,
)
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.prompts import Prompt
from permsc_integrations.results import Usage

__all__ = [
    "PositionPrior",
    "PriorCache",
    "aestimate_prior",
    "LabelledPrompt",
    "labelled_prompt",
    "PLACEHOLDERS",
    "PLACEHOLDER_QUERY",
]


@runtime_checkable
class LabelledPrompt(Prompt, Protocol):
    """A prompt whose items carry one-token labels: the first-token form of a prompt
    (:class:`~permsc_integrations.prompts._first_token.FirstTokenPrompt`)."""

    def window_labels(self, n: int) -> tuple[str, ...]: ...


def labelled_prompt(prompt: Prompt) -> LabelledPrompt:
    """``prompt``, refused unless it labels its items (first-token scoring reads labels)."""
    if not isinstance(prompt, LabelledPrompt):
        raise ConfigurationError(
            "first-token scoring needs a prompt that labels its items (a FirstTokenPrompt), "
            f"got {type(prompt).__name__}"
        )
    return prompt


PLACEHOLDERS = ("N/A", "[empty]", "No content.")
"""The content-free items whose answers are averaged into the prior."""
PLACEHOLDER_QUERY = "N/A"

FLOOR = 1e-6
"""The smallest prior a probability is divided by."""


@dataclass(frozen=True, slots=True)
class PositionPrior:
    """The first token's distribution over a window's labels on content-free items."""

    probabilities: tuple[float, ...]
    usage: Usage = field(default_factory=Usage, compare=False)

    def correct(self, probabilities: Sequence[float]) -> tuple[float, ...]:
        """``probabilities`` divided by the prior, renormalised to sum to 1."""
        if len(probabilities) != len(self.probabilities):
            raise ConfigurationError(
                f"a prior of {len(self.probabilities)} positions for {len(probabilities)} labels"
            )
        ratios = [p / max(q, FLOOR) for p, q in zip(probabilities, self.probabilities, strict=True)]
        total = sum(ratios)
        if total <= 0:
            return tuple(1.0 / len(ratios) for _ in ratios)
        return tuple(r / total for r in ratios)


async def aestimate_prior(
    backend: FirstTokenBackend,
    prompt: LabelledPrompt,
    n: int,
    *,
    settings: GenerationSettings | None = None,
    placeholders: Sequence[str] = PLACEHOLDERS,
    query: str = PLACEHOLDER_QUERY,
) -> PositionPrior:
    """The prior of a window of ``n`` positions: ``prompt`` rendered with ``n`` copies of
    each placeholder (one batched pass when the backend has one), the answers averaged."""
    if not placeholders:
        raise ConfigurationError("the prior needs at least one placeholder")
    labels = prompt.window_labels(n)
    batch = [prompt.render(query, [text] * n) for text in placeholders]
    settings = settings or GenerationSettings()
    answers: list[LabelProbabilities]
    if isinstance(backend, FirstTokenBatchBackend):
        answers = await backend.afirst_token_batch(batch, labels, settings)
    else:
        answers = [await backend.afirst_token(m, labels, settings) for m in batch]
    mean = [sum(a.probabilities[p] for a in answers) / len(answers) for p in range(n)]
    total = sum(mean) or 1.0
    usage = sum((a.usage for a in answers), Usage())
    return PositionPrior(tuple(p / total for p in mean), usage)


class PriorCache:
    """Priors by backend, prompt and window size, estimated on first use; with ``path``, kept
    in a JSON file across runs (the key names the backend's fingerprint, the prompt and n)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._priors: dict[str, PositionPrior] = {}
        if self.path is not None and self.path.is_file():
            stored = json.loads(self.path.read_text(encoding="utf-8"))
            self._priors = {k: PositionPrior(tuple(v)) for k, v in stored.items()}

    @staticmethod
    def key(backend: FirstTokenBackend, prompt: LabelledPrompt, n: int) -> str:
        return f"{getattr(backend, 'fingerprint', backend.name)}|{prompt!r}|{n}"

    def get(
        self, backend: FirstTokenBackend, prompt: LabelledPrompt, n: int
    ) -> PositionPrior | None:
        """The cached prior, or None."""
        return self._priors.get(self.key(backend, prompt, n))

    async def aget(
        self,
        backend: FirstTokenBackend,
        prompt: LabelledPrompt,
        n: int,
        settings: GenerationSettings | None = None,
    ) -> PositionPrior:
        """The prior, estimated (and saved) on first use (two windows that need it at once
        may both estimate it: the same calls, the same prior)."""
        key = self.key(backend, prompt, n)
        if key not in self._priors:
            self._priors[key] = await aestimate_prior(backend, prompt, n, settings=settings)
            self._save()
        return self._priors[key]

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {k: list(v.probabilities) for k, v in self._priors.items()}
        self.path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
