"""Checks on values given by users: one rule and one message for each kind of value.

A check is ``check(name, value) -> value`` (the value as kept, e.g. an int as a float for
:func:`number`); a bad value raises :class:`ConfigurationError` naming ``name``. Used by
:mod:`._options` (every ranking option), the strategies, the window plan, the engine, the
limiter and the backends, so that "an int >= 1" means the same everywhere (``True`` is not
an int here).

Example:
    >>> positive_int("window_size", 20)
    20
    >>> positive_int("window_size", True)
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.ConfigurationError: window_size must be an int >= 1, got True
    >>> at_least(0, optional=True)("top_k", None) is None
    True
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import Literal, TypeGuard, overload

from permsc_integrations.errors import ConfigurationError

__all__ = [
    "Check",
    "is_int",
    "at_least",
    "positive_int",
    "number",
    "share",
    "integer",
    "flag",
    "up_to",
    "sliding_step",
    "successes_needed",
    "unknown_option",
    "did_you_mean",
]

Check = Callable[[str, object], object]
"""``check(name, value) -> value as kept``; raises :class:`ConfigurationError`."""


def is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def _real(value: object) -> TypeGuard[float]:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@overload
def at_least(low: int, *, optional: Literal[False] = False) -> Callable[[str, object], int]: ...
@overload
def at_least(low: int, *, optional: bool) -> Callable[[str, object], int | None]: ...
def at_least(low: int, *, optional: bool = False) -> Callable[[str, object], int | None]:
    """An int >= ``low`` (or ``None`` when ``optional``)."""

    def check(name: str, value: object) -> int | None:
        if value is None and optional:
            return None
        if is_int(value) and value >= low:
            return value
        what = f"an int >= {low}" + (" or None" if optional else "")
        raise ConfigurationError(f"{name} must be {what}, got {value!r}")

    return check


_POSITIVE = at_least(1)


def positive_int(name: str, value: object) -> int:
    """An int >= 1."""
    return _POSITIVE(name, value)


@overload
def number(
    *, positive: bool, optional: Literal[False] = False
) -> Callable[[str, object], float]: ...
@overload
def number(*, positive: bool, optional: bool) -> Callable[[str, object], float | None]: ...
def number(*, positive: bool, optional: bool = False) -> Callable[[str, object], float | None]:
    """A finite number > 0 (``positive``) or >= 0, kept as a float (or ``None`` when
    ``optional``)."""

    def check(name: str, value: object) -> float | None:
        if value is None and optional:
            return None
        if _real(value) and math.isfinite(value) and (value > 0 if positive else value >= 0):
            return float(value)
        what = ("a number > 0" if positive else "a number >= 0") + (" or None" if optional else "")
        raise ConfigurationError(f"{name} must be {what}, got {value!r}")

    return check


def share(name: str, value: object) -> float:
    """A number in 0..1, kept as a float."""
    if _real(value) and 0.0 <= value <= 1.0:
        return float(value)
    raise ConfigurationError(f"{name} must be a number in 0..1, got {value!r}")


def integer(name: str, value: object) -> int:
    """Any int (a seed)."""
    if is_int(value):
        return int(value)
    raise ConfigurationError(f"{name} must be an int, got {value!r}")


def flag(name: str, value: object) -> bool:
    """``True`` or ``False``."""
    if isinstance(value, bool):
        return value
    raise ConfigurationError(f"{name} must be True or False, got {value!r}")


def up_to(name: str, value: object, high: int, high_is: str, *, why: str = "") -> int:
    """An int in 1..``high``, where ``high`` is the value of ``high_is`` (another option, or
    an expression of one), shown in the message with ``why``.

    >>> up_to("top_k", 5, 4, "window_size")
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.ConfigurationError: top_k must be in 1..window_size (4), got 5
    """
    if is_int(value) and 1 <= value <= high:
        return int(value)
    reason = f" {why}" if why else ""
    raise ConfigurationError(f"{name} must be in 1..{high_is} ({high}){reason}, got {value!r}")


def sliding_step(step: object, window_size: int) -> int:
    """A sliding window's ``step``: 1..window_size-1, so that consecutive windows overlap.

    >>> sliding_step(10, 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.ConfigurationError: step must be in 1..window_size-1 (9) so that ...
    """
    why = "so that sliding windows overlap and carry the best items forward"
    return up_to("step", step, window_size - 1, "window_size-1", why=why)


def successes_needed(value: object, num_permutations: int) -> int | None:
    """``min_successful``: None (the default share) or 1..num_permutations."""
    if value is None:
        return None
    return up_to("min_successful", value, num_permutations, "num_permutations")


def did_you_mean(name: str, known: tuple[str, ...]) -> str:
    """`` (did you mean 'x'?)`` naming the closest of ``known`` to ``name``, or ``""``.

    >>> did_you_mean("api_key", ("base_url", "api_key_env"))
    " (did you mean 'api_key_env'?)"
    """
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def unknown_option(name: str, known: tuple[str, ...]) -> str:
    """The message for an unknown option name, with the closest known ones.

    >>> unknown_option("base_ulr", ("base_url", "api_key"))
    "unknown option 'base_ulr' (did you mean 'base_url'?); options: base_url, api_key"
    """
    return f"unknown option {name!r}{did_you_mean(name, known)}; options: {', '.join(known)}"
