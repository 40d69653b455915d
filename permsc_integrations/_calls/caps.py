"""Spending caps and prices: the values a :class:`~.spending.Meter` checks calls against.

A :class:`SpendingCap` bounds calls, tokens and cost (with :class:`Prices`); each is given as
the value, its string (``"calls=100,tokens=50000,cost=0.25"``, ``"0.15,0.60"``) or a mapping.

Example:
    >>> cap = SpendingCap.parse("calls=100,tokens=50000,cost=0.25")
    >>> cap.calls, cap.tokens, cap.cost
    (100, 50000, 0.25)
    >>> Prices.parse("0.15,0.60").cost(Usage(prompt_tokens=1_000_000, completion_tokens=10))
    0.150006
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from permsc_integrations._registry import publish
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.results import Usage

__all__ = ["SpendingCap", "Prices", "parse_cap", "parse_prices"]


def _positive(name: str, value: object, kind: type) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (kind is int and not isinstance(value, int))
        or not value > 0
    ):
        raise ConfigurationError(f"cap {name} must be a {kind.__name__} > 0 or None, got {value!r}")
    if not math.isfinite(value):
        raise ConfigurationError(f"cap {name} must be finite, got {value!r}")
    return kind(value)


@dataclass(frozen=True, slots=True)
class SpendingCap:
    """At most ``calls`` calls, ``tokens`` tokens (prompt + completion) and ``cost`` (with
    :class:`Prices`); ``None`` leaves that one open."""

    calls: int | None = None
    tokens: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", _positive("calls", self.calls, int))
        object.__setattr__(self, "tokens", _positive("tokens", self.tokens, int))
        object.__setattr__(self, "cost", _positive("cost", self.cost, float))
        if self.calls is self.tokens is self.cost is None:
            raise ConfigurationError("a SpendingCap needs calls=, tokens= or cost= (or use None)")

    @classmethod
    def parse(cls, text: str) -> SpendingCap:
        """``"calls=100,tokens=50000,cost=0.25"`` (any of the three, in any order)."""
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = part.partition("=")
            if not sep or name.strip() not in ("calls", "tokens", "cost"):
                raise ConfigurationError(
                    f"a cap is 'calls=N,tokens=N,cost=X' (any of them), got {text!r}"
                )
            try:
                number = float(raw) if name.strip() == "cost" else int(float(raw))
            except ValueError:
                raise ConfigurationError(f"cap {name.strip()}: not a number: {raw!r}") from None
            values[name.strip()] = number
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per million prompt (input) and completion (output) tokens."""

    prompt: float
    completion: float

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"price {f.name} must be a number >= 0, got {value!r}")
            object.__setattr__(self, f.name, float(value))

    @classmethod
    def parse(cls, text: str) -> Prices:
        """``"0.15,0.60"``: prompt and completion prices per million tokens."""
        try:
            prompt, completion = (float(p) for p in text.split(","))
        except ValueError:
            raise ConfigurationError(
                f"prices are 'PROMPT,COMPLETION' per million tokens, got {text!r}"
            ) from None
        return cls(prompt, completion)

    def cost(self, usage: Usage) -> float:
        """What ``usage``'s tokens cost."""
        raw = usage.prompt_tokens * self.prompt + usage.completion_tokens * self.completion
        return round(raw / 1_000_000, 12)

    def priced(self, usage: Usage) -> Usage:
        """``usage`` with its ``cost``."""
        return replace(usage, cost=self.cost(usage))


def parse_cap(name: str, value: object) -> SpendingCap | None:
    """An option's value as a cap: None, a SpendingCap, its string or a mapping (to_dict)."""
    if value is None or isinstance(value, SpendingCap):
        return value
    if isinstance(value, str):
        return SpendingCap.parse(value)
    if isinstance(value, Mapping):
        try:
            return SpendingCap(**value)
        except TypeError as exc:
            raise ConfigurationError(f"{name}: {exc}") from None
    raise ConfigurationError(
        f"{name} must be None, a SpendingCap or 'calls=N,tokens=N,cost=X', got {value!r}"
    )


def parse_prices(name: str, value: object) -> Prices | None:
    """An option's value as prices: None, Prices, ``"PROMPT,COMPLETION"`` or a mapping."""
    if value is None or isinstance(value, Prices):
        return value
    if isinstance(value, str):
        return Prices.parse(value)
    if isinstance(value, Mapping):
        try:
            return Prices(**value)
        except TypeError as exc:
            raise ConfigurationError(f"{name}: {exc}") from None
    raise ConfigurationError(
        f"{name} must be None, Prices(prompt, completion) or 'PROMPT,COMPLETION' per million "
        f"tokens, got {value!r}"
    )

publish("permsc_integrations", SpendingCap, Prices)
