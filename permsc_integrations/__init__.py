"""permsc-integrations: permutation self-consistency (PSC) for LLM listwise ranking.

Shuffle the list m times, ask the model for each shuffled prompt concurrently, map every
answer back to the original items and return the central (Kemeny) ranking.

Example:
    >>> from permsc_integrations import aggregate
    >>> aggregate([[0, 1, 2], [0, 2, 1], [1, 0, 2]])
    [0, 1, 2]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from permsc_integrations import aggregators
from permsc_integrations.aggregators import aggregate
from permsc_integrations.errors import (
    AuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    ConfigurationError,
    ContextLengthError,
    InsufficientSamplesError,
    InvalidRankingError,
    LogprobsUnavailableError,
    MissingDependencyError,
    ModelIntegrityError,
    ModelNotFoundError,
    ParseError,
    PermscError,
    QuotaExceededError,
    RateLimitError,
    SpendingCapError,
    UnknownNameError,
)
from permsc_integrations.results import (
    ParsedAnswer,
    ParseStatus,
    RankingResult,
    Sample,
    Usage,
    WindowResult,
)

if TYPE_CHECKING:
    from permsc_integrations._calls.cache import MemoryCache, SQLiteCache
    from permsc_integrations._calls.caps import Prices, SpendingCap
    from permsc_integrations._calls.retry import RetryPolicy
    from permsc_integrations._events import Event
    from permsc_integrations._options.options import RankingOptions
    from permsc_integrations._ranker.ranker import PSCRanker, RankRequest
    from permsc_integrations.backends import resolve_backend
    from permsc_integrations.backends.base import Backend, Completion, GenerationSettings

__version__ = "0.1.0"

# Heavier parts load on first attribute access, so ``import permsc_integrations`` stays fast.
_LAZY: dict[str, str] = {
    "PSCRanker": "permsc_integrations._ranker.ranker",
    "RankRequest": "permsc_integrations._ranker.ranker",
    "RankingOptions": "permsc_integrations._options.options",
    "Backend": "permsc_integrations.backends.base",
    "Completion": "permsc_integrations.backends.base",
    "GenerationSettings": "permsc_integrations.backends.base",
    "resolve_backend": "permsc_integrations.backends",
    "RetryPolicy": "permsc_integrations._calls.retry",
    "MemoryCache": "permsc_integrations._calls.cache",
    "SQLiteCache": "permsc_integrations._calls.cache",
    "Event": "permsc_integrations._events",
    "SpendingCap": "permsc_integrations._calls.caps",
    "Prices": "permsc_integrations._calls.caps",
}

__all__ = [
    "__version__",
    "aggregate",
    "aggregators",
    "PSCRanker",
    "RankRequest",
    "RankingOptions",
    "RankingResult",
    "WindowResult",
    "Sample",
    "ParsedAnswer",
    "ParseStatus",
    "Usage",
    "Backend",
    "Completion",
    "GenerationSettings",
    "resolve_backend",
    "RetryPolicy",
    "MemoryCache",
    "SQLiteCache",
    "Event",
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
    "SpendingCap",
    "Prices",
    "SpendingCapError",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'permsc_integrations' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
