"""First-token scoring's calls: one output token a sample, read as label probabilities.

With ``scoring="first_token"`` each sample of a window is one call to the backend's
:meth:`~.backends.base.FirstTokenBackend.afirst_token` (or, for a
:class:`~.backends.base.FirstTokenBatchBackend`, one batched forward pass over the window's
prompts of a size); the answer is a distribution over the labels of the items shown. The
sample's ranking orders the items by probability (ties: the earlier prompt position first)
and keeps the probabilities (``Sample.probabilities``, aligned with ``Sample.permutation``).
There is never a fallback to generation: a backend without the protocol is refused. (``run``
below is a :class:`~.sampling.WindowRun`, which imports this module.)

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
from typing import Any

import anyio

from ..backends.base import FirstTokenBackend, FirstTokenBatchBackend, LabelProbabilities, Message
from ..errors import BackendError, ConfigurationError
from ..results import ParseStatus, Sample, Usage
from ..spending import prompt_chars

__all__ = ["require_first_token", "scored_sample", "start_first_token"]


def require_first_token(backend: Any) -> None:
    """Refuse a backend that cannot read first-token probabilities (no silent fallback)."""
    if not isinstance(backend, FirstTokenBackend):
        raise ConfigurationError(
            f"scoring='first_token' needs a backend that reads the first token's probabilities "
            f"(afirst_token); {getattr(backend, 'name', type(backend).__name__)!r} has none. "
            "Use 'transformers:...', 'embedded', 'llamacpp:...' or an OpenAI-compatible server "
            "that returns logprobs, or scoring='generate'"
        )


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


def _tokens(scored: LabelProbabilities) -> Usage:
    u = scored.usage
    return Usage(prompt_tokens=u.prompt_tokens, completion_tokens=max(1, u.completion_tokens))


async def start_first_token(run: Any, group: Any) -> None:
    """Start the window's first-token calls in ``group``: one batch per prompt size for a
    batch backend, else one call per sample."""
    require_first_token(run.setup.backend)
    if isinstance(run.setup.backend, FirstTokenBatchBackend):
        sizes: dict[int, list[int]] = {}
        for k, perm in enumerate(run.perms):
            sizes.setdefault(len(perm), []).append(k)
        for keys in sizes.values():
            group.start_soon(_batch, run, keys)
        return
    for k in range(len(run.perms)):
        group.start_soon(_one, run, k)
        await _yield()


async def _yield() -> None:
    await anyio.sleep(0)


def _prompt(run: Any, k: int) -> tuple[list[Message], tuple[str, ...]]:
    shown = run._shown(k)
    labels = run.setup.prompt.window_labels(len(shown))  # type: ignore[attr-defined]
    return run.setup.prompt.render(run.query, shown), labels


async def _one(run: Any, k: int) -> None:
    await run._emit("sample_start", k)
    messages, labels = _prompt(run, k)
    backend: Any = run.setup.backend
    try:
        scored, usage = await run._timed(
            lambda: backend.afirst_token(messages, labels, run.setup.settings),
            prompt_chars(messages),
        )
        [scored] = await _calibrated(run, [scored], len(labels))
        tokens = _tokens(scored)
        run.spent += tokens
        sample = scored_sample(run.perms[k], scored, labels, usage + tokens)
    except BackendError as exc:
        sample = _failed(run, k, messages, exc)
    await run._finish(k, sample)


async def _batch(run: Any, keys: list[int]) -> None:
    prompts = []
    for k in keys:
        await run._emit("sample_start", k)
        prompts.append(_prompt(run, k))
    labels = prompts[0][1]
    backend: Any = run.setup.backend
    batch = [messages for messages, _ in prompts]
    try:
        answers, usage = await run._timed(
            lambda: backend.afirst_token_batch(batch, labels, run.setup.settings),
            sum(prompt_chars(messages) for messages in batch),
        )
        if len(answers) != len(keys):
            raise BackendError(
                f"{backend.name}: batch of {len(keys)} gave {len(answers)}", retryable=False
            )
        answers = await _calibrated(run, answers, len(labels))
    except BackendError as exc:
        for k, (messages, _) in zip(keys, prompts, strict=True):
            await run._finish(k, _failed(run, k, messages, exc))
        return
    share = usage.latency_s / len(keys)  # the batch's latency, split; its calls counted once
    for n, (k, scored) in enumerate(zip(keys, answers, strict=True)):
        tokens = _tokens(scored)
        run.spent += tokens
        first = Usage(calls=usage.calls, retries=usage.retries) if n == 0 else Usage()
        try:
            sample = scored_sample(
                run.perms[k], scored, labels, first + Usage(latency_s=share) + tokens
            )
        except BackendError as exc:
            sample = _failed(run, k, prompts[n][0], exc)
        await run._finish(k, sample)


async def _calibrated(
    run: Any, answers: list[LabelProbabilities], n: int
) -> list[LabelProbabilities]:
    """The answers divided by the position prior of ``n`` labels (``calibrate=True``)."""
    cache = run.setup.calibration
    if cache is None:
        return answers
    prior = await cache.aget(run.setup.backend, run.setup.prompt, n, run.setup.settings)
    if any(len(a.probabilities) != n for a in answers):
        return answers  # malformed: scored_sample fails the sample
    return [replace(a, probabilities=prior.correct(a.probabilities)) for a in answers]


def _failed(run: Any, k: int, messages: list[Message], exc: BackendError) -> Sample:
    return run.failed_call(k, messages, exc)
