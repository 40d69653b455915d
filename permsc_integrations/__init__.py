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

from . import aggregators
from .aggregators import aggregate
from .errors import (
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
from .results import ParsedAnswer, ParseStatus, RankingResult, Sample, Usage, WindowResult

if TYPE_CHECKING:
    from .backends import resolve_backend
    from .backends.base import Backend, Completion, GenerationSettings
    from .events import Event
    from .options import RankingOptions
    from .ranker import PSCRanker, RankRequest
    from .retry import RetryPolicy
    from .run.cache import MemoryCache, SQLiteCache
    from .spending import Prices, SpendingCap

__version__ = "0.1.0"

# Heavier parts load on first attribute access, so ``import permsc_integrations`` stays fast.
_LAZY: dict[str, str] = {
    "PSCRanker": "permsc_integrations.ranker",
    "RankRequest": "permsc_integrations.ranker",
    "RankingOptions": "permsc_integrations.options",
    "Backend": "permsc_integrations.backends.base",
    "Completion": "permsc_integrations.backends.base",
    "GenerationSettings": "permsc_integrations.backends.base",
    "resolve_backend": "permsc_integrations.backends",
    "RetryPolicy": "permsc_integrations.retry",
    "MemoryCache": "permsc_integrations.run.cache",
    "SQLiteCache": "permsc_integrations.run.cache",
    "Event": "permsc_integrations.events",
    "SpendingCap": "permsc_integrations.spending",
    "Prices": "permsc_integrations.spending",
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
