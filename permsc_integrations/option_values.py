"""What each ranking option accepts, one check per kind of value that needs the registries
(aggregators, strategies, prompts) or a value type of its own (Adaptive, RetryPolicy, a
cache, scoring): :mod:`.options` declares the options with them. Each check takes the option's
name and value and returns the value to keep, or raises :class:`ConfigurationError`.

Example:
    >>> check_scoring("scoring", "first_token")
    'first_token'
    >>> check_adaptive("adaptive", "5,5").first_wave
    5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .adaptive import Adaptive
from .aggregators import resolve
from .errors import ConfigurationError
from .prompts import get_prompt
from .retry import RetryPolicy
from .strategies import Sliding
from .strategies import get as get_strategy

__all__ = [
    "SCORINGS",
    "check_adaptive",
    "check_aggregator",
    "check_strategy",
    "check_prompt",
    "check_scoring",
    "check_retry",
    "check_cache",
    "check_mapping",
    "reads_probabilities",
    "slides",
]


def check_adaptive(name: str, value: Any) -> Any:
    if value is None or value is False:
        return None
    if value is True:
        return Adaptive()
    if isinstance(value, str):
        return Adaptive.parse(value)
    if isinstance(value, Adaptive):
        return value
    if isinstance(value, Mapping):
        return _rebuilt(Adaptive, name, value)
    raise ConfigurationError(f"{name} must be None, True, an Adaptive or a string, got {value!r}")


def check_aggregator(name: str, value: Any) -> Any:
    if not isinstance(value, str) and not callable(value):
        raise ConfigurationError(f"{name} must be a registered name or a callable, got {value!r}")
    resolve(value)  # an unknown name raises UnknownNameError with the available ones
    return value


def check_strategy(name: str, value: Any) -> Any:
    get_strategy(value)  # an unknown name raises UnknownNameError with the available ones
    return value


def reads_probabilities(aggregator: Any) -> bool:
    return bool(getattr(resolve(aggregator), "uses_probabilities", False))


def slides(strategy: Any) -> bool:
    """Whether ``strategy`` moves windows by ``step`` (the only one that reads it)."""
    return isinstance(get_strategy(strategy), Sliding)


def check_prompt(name: str, value: Any) -> Any:
    get_prompt(value)  # an unknown name or a non-prompt object raises ConfigurationError
    return value


SCORINGS = ("generate", "first_token")
"""How a sample is read: a generated ranking, or the first token's label probabilities."""


def check_scoring(name: str, value: Any) -> Any:
    if value in SCORINGS:
        return value
    raise ConfigurationError(f"{name} must be one of {', '.join(SCORINGS)}; got {value!r}")


def check_retry(name: str, value: Any) -> Any:
    if value is None:  # the default policy
        return RetryPolicy()
    if isinstance(value, RetryPolicy):
        return value
    if isinstance(value, Mapping):
        return _rebuilt(RetryPolicy, name, value)
    raise ConfigurationError(f"{name} must be a RetryPolicy or None, got {type(value).__name__}")


def check_cache(name: str, value: Any) -> Any:
    if value is None or (hasattr(value, "aget") and hasattr(value, "aset")):  # ResponseCache
        return value
    raise ConfigurationError(
        f"{name} must be None, MemoryCache(), SQLiteCache(path) or an object with aget/aset; "
        f"got {type(value).__name__}"
    )


def check_mapping(name: str, value: Any) -> Any:
    if value is None:
        return {}
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return dict(value)
    raise ConfigurationError(f"{name} must be a mapping of option names to values, got {value!r}")


def _rebuilt(kind: Any, name: str, value: Mapping[str, Any]) -> Any:
    """A value given as its serialised mapping (an adapter's ``to_dict``), built again; a bad
    field names the option."""
    try:
        return kind(**value)
    except (TypeError, ConfigurationError) as exc:
        raise ConfigurationError(f"{name}: {exc}") from None
