"""First-token scoring's calls: one output token a sample, read as label probabilities.

With ``scoring="first_token"`` each sample of a window is one call to the backend's
:meth:`~.backends.base.FirstTokenBackend.afirst_token` (or, for a
:class:`~.backends.base.FirstTokenBatchBackend`, one batched forward pass over the window's
prompts of a size); the answer is a distribution over the labels of the items shown. The
sample's ranking orders the items by probability (ties: the earlier prompt position first)
and keeps the probabilities (``Sample.probabilities``, aligned with ``Sample.permutation``).
There is never a fallback to generation: a backend without the protocol is refused.
:class:`FirstToken` is the window run's sampler for it (:mod:`.sampling`).

Example:
    >>> from permsc_integrations.backends.base import LabelProbabilities
    >>> s = scored_sample((2, 0, 1), LabelProbabilities((0.2, 0.5, 0.3)), ("A", "B", "C"))
    >>> s.ranking, s.raw_text, s.item_probabilities()[0]
    ((0, 1, 2), 'B', 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from permsc_integrations._calls.calls import Calls
from permsc_integrations._calls.spending import prompt_chars
from permsc_integrations._options.options import RankingOptions
from permsc_integrations._run.calibration import PriorCache
from permsc_integrations._run.sampling import Ask, Refused
from permsc_integrations.backends.base import (
    Backend,
    FirstTokenBackend,
    FirstTokenBatchBackend,
    LabelProbabilities,
)
from permsc_integrations.errors import BackendError, ConfigurationError
from permsc_integrations.prompts import Prompt
from permsc_integrations.results import ParseStatus, Sample, Usage

__all__ = ["FirstToken", "require_first_token", "scored_sample"]


def require_first_token(backend: object) -> FirstTokenBackend:
    """``backend``, refused if it cannot read first-token probabilities (no silent fallback)."""
    if not isinstance(backend, FirstTokenBackend):
        raise ConfigurationError(
            f"scoring='first_token' needs a backend that reads the first token's probabilities "
            f"(afirst_token); {getattr(backend, 'name', type(backend).__name__)!r} has none. "
            "Use 'transformers:...', 'embedded', 'llamacpp:...' or an OpenAI-compatible server "
            "that returns logprobs, or scoring='generate'"
        )
    return backend


def scored_sample(
    perm: tuple[int, ...],
    scored: LabelProbabilities,
    labels: Sequence[str],
    usage: Usage | None = None,
) -> Sample:
    """The sample of one first-token answer: ranked by probability, probabilities kept."""
    probs = _checked(scored, len(perm))
    order = sorted(range(len(perm)), key=lambda p: (-probs[p], p))
    ranking = tuple(perm[p] for p in order)
    return Sample(
        perm,
        ranking,
        labels[order[0]],
        ParseStatus.OK,
        None,
        usage or Usage(),
        1,
        probabilities=probs,
        label_mass=float(scored.mass),
    )


def _checked(scored: LabelProbabilities, n: int) -> tuple[float, ...]:
    probs = tuple(float(p) for p in scored.probabilities)
    if len(probs) != n or not all(math.isfinite(p) and p >= 0 for p in probs):
        raise BackendError(
            f"first-token answer with {len(probs)} probabilities for {n} labels, or a "
            f"negative or non-finite one: {probs[:5]}...",
            retryable=False,
        )
    total = sum(probs)
    return tuple(p / total for p in probs) if total > 0 else (1.0 / n,) * n


class FirstToken:
    """The window run's :class:`~.sampling.Sampler` for ``scoring="first_token"`` (see the
    module docstring): ``options`` give the decoding settings and ``calibrate`` (then each
    answer is divided by the position prior, estimated once per window size:
    :class:`~.calibration.PriorCache`)."""

    def __init__(self, options: RankingOptions, backend: Backend, prompt: Prompt) -> None:
        self.backend = require_first_token(backend)
        self.prompt = prompt
        self.labels = prompt.window_labels  # type: ignore[attr-defined]
        self.settings = options.generation
        self.calibration = PriorCache() if options.calibrate else None

    def batches(self, perms: Sequence[tuple[int, ...]]) -> list[list[int]] | None:
        """One batch per prompt size for a batch backend; else one call per sample."""
        if not isinstance(self.backend, FirstTokenBatchBackend):
            return None
        sizes: dict[int, list[int]] = {}
        for k, perm in enumerate(perms):
            sizes.setdefault(len(perm), []).append(k)
        return list(sizes.values())

    async def sample(self, query: str, ask: Ask, calls: Calls) -> Sample:
        ask.messages = self.prompt.render(query, ask.shown)
        labels = self.labels(len(ask.shown))
        messages = ask.messages
        call = partial(self.backend.afirst_token, messages, labels, self.settings)
        scored = await calls.send(call, prompt_chars(messages), ask)
        [scored] = await self._calibrated([scored], len(labels))
        return scored_sample(ask.perm, scored, labels, ask.usage)

    async def sample_batch(
        self, query: str, asks: Sequence[Ask], calls: Calls
    ) -> list[Sample | Refused]:
        for ask in asks:
            ask.messages = self.prompt.render(query, ask.shown)
        labels = self.labels(len(asks[0].shown))
        batch = [ask.messages for ask in asks]
        backend = self.backend
        assert isinstance(backend, FirstTokenBatchBackend)
        answers = await calls.send_batch(
            partial(backend.afirst_token_batch, batch, labels, self.settings),
            sum(prompt_chars(messages) for messages in batch),
            asks,
        )
        answers = await self._calibrated(answers, len(labels))
        return [_scored(ask, answer, labels) for ask, answer in zip(asks, answers, strict=True)]

    async def _calibrated(
        self, answers: list[LabelProbabilities], n: int
    ) -> list[LabelProbabilities]:
        """The answers divided by the position prior of ``n`` labels (``calibrate=True``)."""
        if self.calibration is None:
            return answers
        prior = await self.calibration.aget(self.backend, self.prompt, n, self.settings)
        if any(len(a.probabilities) != n for a in answers):
            return answers  # malformed: scored_sample fails the sample
        return [replace(a, probabilities=prior.correct(a.probabilities)) for a in answers]


def _scored(ask: Ask, answer: LabelProbabilities, labels: Sequence[str]) -> Sample | BackendError:
    try:
        return scored_sample(ask.perm, answer, labels, ask.usage)
    except BackendError as exc:
        return exc
