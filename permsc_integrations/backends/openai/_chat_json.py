"""A chat-completions JSON answer read into a
:class:`~permsc_integrations.backends.base.Completion` (or, asked with ``logprobs``,
:class:`~permsc_integrations.backends.base.LabelProbabilities`), strictly: a malformed field
fails that one call with a typed error, never a raw exception."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from permsc_integrations._checks import is_int
from permsc_integrations.backends._logprobs import label_probabilities, top_list
from permsc_integrations.backends.base import Completion, LabelProbabilities
from permsc_integrations.errors import BackendError
from permsc_integrations.results import Usage

__all__ = ["completion_from_json", "first_token_from_json", "usage_from_json", "answered_model"]


def _count(usage: Mapping[str, object], key: str, source: str) -> int:
    value = usage.get(key)
    if value is None:
        return 0
    if not is_int(value) or value < 0:
        raise BackendError(
            f"{source} answered usage.{key}={value!r}, not a count; the answer was dropped "
            "(a malformed provider response)",
            retryable=False,
        )
    return value


def completion_from_json(data: Any, source: str, model: str, latency: float) -> Completion:
    """A :class:`Completion` from a chat-completions JSON answer; any malformed field is a
    :class:`BackendError` that fails this one call, never a raw exception (``data`` is any
    JSON: read as the expected shape, a wrong one caught)."""
    try:
        choice = data["choices"][0]
        content = choice["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise BackendError(
            f"{source} answered without choices[0].message: {str(data)[:200]}",
            retryable=True,
        ) from None
    if isinstance(content, list):  # content parts: keep their text
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    if content is not None and not isinstance(content, str):
        raise BackendError(f"{source} answered a non-text message: {content!r:.80}")
    reason = choice.get("finish_reason") if isinstance(choice, Mapping) else None
    return Completion(
        text=content or "",
        usage=usage_from_json(data, source, latency),
        model=answered_model(data, model),
        finish_reason=reason if isinstance(reason, str) else None,
    )


def usage_from_json(data: Mapping[str, object], source: str, latency: float) -> Usage:
    """One call's :class:`Usage` from a chat-completions answer's ``usage`` (absent: zeros)."""
    usage = data.get("usage") or {}
    if not isinstance(usage, Mapping):
        raise BackendError(f"{source} answered usage={usage!r:.80}, not an object")
    prompt, completion = (_count(usage, k, source) for k in ("prompt_tokens", "completion_tokens"))
    return Usage(prompt_tokens=prompt, completion_tokens=completion, calls=1, latency_s=latency)


def answered_model(data: Mapping[str, object], model: str) -> str:
    """The model the server says answered, else the one asked for."""
    answered = data.get("model")
    return answered if isinstance(answered, str) and answered else model


def first_token_from_json(
    data: Any, labels: Sequence[str], source: str, model: str, latency: float
) -> LabelProbabilities:
    """A :class:`LabelProbabilities` from a chat-completions answer asked with ``logprobs``."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise BackendError(
            f"{source} answered without choices[0]: {str(data)[:200]}", retryable=True
        ) from None
    probabilities, mass = label_probabilities(top_list(choice, source), labels)
    return LabelProbabilities(
        probabilities=probabilities,
        mass=mass,
        usage=usage_from_json(data, source, latency),
        model=answered_model(data, model),
    )
