"""What each ranking option accepts, one check per kind of value that needs the registries
(aggregators, strategies, prompts) or a value type of its own (Adaptive, RetryPolicy, a
cache, scoring): :mod:`._options` declares the options with them. Each check takes the option's
name and value and returns the value to keep, or raises :class:`ConfigurationError`.

Where a caller may give more than is kept (``adaptive=True`` is kept as ``Adaptive()``), the
type of what may be given is named here too (``AdaptiveGiven``, ...): the declaration says
which option accepts it, and the generated keywords (:mod:`.keywords`) carry it.

Example:
    >>> check_scoring("scoring", "first_token")
    'first_token'
    >>> check_adaptive("adaptive", "5,5").first_wave
    5
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast, get_args

from permsc_integrations._calls.caps import Prices, SpendingCap
from permsc_integrations._calls.retry import RetryPolicy
from permsc_integrations._checks import Check
from permsc_integrations.aggregators import Aggregator, reads_probabilities, resolve
from permsc_integrations.backends.base import ResponseCache
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.prompts import Prompt, get_prompt
from permsc_integrations.strategies import Adaptive, Sliding, Strategy
from permsc_integrations.strategies import get as get_strategy

__all__ = [
    "SCORINGS",
    "Scoring",
    "AdaptiveGiven",
    "RetryGiven",
    "CapGiven",
    "PricesGiven",
    "BackendOptionsGiven",
    "check_adaptive",
    "check_aggregator",
    "check_strategy",
    "check_prompt",
    "check_scoring",
    "check_retry",
    "check_cache",
    "check_mapping",
    "option",
    "option_default",
    "option_info",
]

Scoring = Literal["generate", "first_token"]
"""How a sample is read: a generated ranking, or the first token's label probabilities."""

SCORINGS: tuple[Scoring, ...] = get_args(Scoring)

AdaptiveGiven = bool | str | Adaptive | Mapping[str, object] | None
"""``adaptive=``: True (the default waves), ``'FIRST,WAVE[,TOP_K[,CONFIDENCE[,ZONE]]]'``, an
:class:`Adaptive` or its mapping (an adapter's ``to_dict``); None or False: fixed m."""

RetryGiven = RetryPolicy | Mapping[str, object] | None
"""``retry=``: a :class:`RetryPolicy`, its mapping, or None (the default policy)."""

CapGiven = str | SpendingCap | None
"""``request_cap=``/``ranker_cap=``: ``'calls=N,tokens=N,cost=X'`` or a :class:`SpendingCap`."""

PricesGiven = str | Prices | None
"""``prices=``: ``'PROMPT,COMPLETION'`` per million tokens, or :class:`Prices`."""

BackendOptionsGiven = Mapping[str, object]
"""``backend_options=``: keywords of a spec-string backend's factory (kept as a dict)."""

_T = TypeVar("_T")

APPLIES_TO = {
    "all": "every backend",
    "spec": "backends given as a spec string ('openai:...', 'transformers:...', 'embedded')",
    "decoding": "spec-string backends; framework chat models get it per call where they can "
    "take it (see docs/integrations)",
}
"""What each ``OptionInfo.applies`` value means (docs/options.md has the table)."""


@dataclass(frozen=True, slots=True)
class OptionInfo:
    """What the declaration (:class:`~.options.RankingOptions`) says of one option besides its
    default."""

    name: str
    default: object
    help: str
    applies: str
    cli_type: Callable[[str], object] | None  # None: not a command-line flag
    cli_help: str | None = None  # the flag's help, where ``help`` names Python-only values


def check_adaptive(name: str, value: object) -> Adaptive | None:
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


def check_aggregator(name: str, value: object) -> str | Aggregator:
    if not isinstance(value, str) and not callable(value):
        raise ConfigurationError(f"{name} must be a registered name or a callable, got {value!r}")
    kept = cast("str | Aggregator", value)
    resolve(kept)  # an unknown name raises UnknownNameError with the available ones
    return kept


def check_strategy(name: str, value: object) -> str | Strategy:
    kept = cast("str | Strategy", value)
    get_strategy(kept)  # an unknown name raises UnknownNameError with the available ones
    return kept


def scored_with(
    scoring: Scoring, aggregator: str | Aggregator, calibrate: bool, cache: ResponseCache | None
) -> None:
    """The rules between ``scoring`` and the options that depend on it (the window size's, which
    needs the prompt's labels, is :class:`~.options.RankingOptions`')."""
    if scoring != "first_token" and reads_probabilities(resolve(aggregator)):
        raise ConfigurationError(
            f"aggregator {aggregator!r} reads first-token probabilities: use it with "
            "scoring='first_token', or a rank aggregator (kemeny, borda, ...)"
        )
    if calibrate and scoring != "first_token":
        raise ConfigurationError(
            "calibrate=True calibrates first-token probabilities: use it with scoring='first_token'"
        )
    if scoring == "first_token" and cache is not None:
        raise ConfigurationError(
            "the response cache keeps generated answers; first_token scoring does not use "
            "it: pass cache=None"
        )


def labelled(window_size: int, labels: Sequence[str]) -> None:
    """First-token scoring labels each item of a window with one of ``labels``."""
    if window_size > len(labels):
        raise ConfigurationError(
            f"first_token scoring labels each item of a window with one token and has "
            f"{len(labels)} labels; window_size={window_size} is too large: use "
            f"window_size <= {len(labels)} (the strategy splits longer lists)"
        )


def priced(*caps: SpendingCap | None, prices: Prices | None, cost: float | None = None) -> None:
    """A cap on cost, or a ``max_cost``, needs prices."""
    if prices is not None:
        return
    if cost is not None:
        raise ConfigurationError("max_cost needs prices= ('PROMPT,COMPLETION' per million tokens)")
    if any(cap is not None and cap.cost is not None for cap in caps):
        raise ConfigurationError(
            "a cap with cost= needs prices= ('PROMPT,COMPLETION' per million tokens)"
        )


def slides(strategy: str | Strategy) -> bool:
    """Whether ``strategy`` moves windows by ``step`` (the only one that reads it)."""
    return isinstance(get_strategy(strategy), Sliding)


def check_prompt(name: str, value: object) -> str | Prompt:
    kept = cast("str | Prompt", value)
    get_prompt(kept)  # an unknown name or a non-prompt object raises ConfigurationError
    return kept


def check_scoring(name: str, value: object) -> Scoring:
    for scoring in SCORINGS:
        if value == scoring:
            return scoring
    raise ConfigurationError(f"{name} must be one of {', '.join(SCORINGS)}; got {value!r}")


def check_retry(name: str, value: object) -> RetryPolicy:
    if value is None:  # the default policy
        return RetryPolicy()
    if isinstance(value, RetryPolicy):
        return value
    if isinstance(value, Mapping):
        return _rebuilt(RetryPolicy, name, value)
    raise ConfigurationError(f"{name} must be a RetryPolicy or None, got {type(value).__name__}")


def check_cache(name: str, value: object) -> ResponseCache | None:
    if value is None or (hasattr(value, "aget") and hasattr(value, "aset")):  # ResponseCache
        return cast("ResponseCache | None", value)
    raise ConfigurationError(
        f"{name} must be None, MemoryCache(), SQLiteCache(path) or an object with aget/aset; "
        f"got {type(value).__name__}"
    )


def check_mapping(name: str, value: object) -> dict[str, object]:
    if value is None:
        return {}
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return dict(value)
    raise ConfigurationError(f"{name} must be a mapping of option names to values, got {value!r}")


def _rebuilt(kind: Callable[..., _T], name: str, value: Mapping[str, object]) -> _T:
    """A value given as its serialised mapping (an adapter's ``to_dict``), built again; a bad
    field names the option."""
    try:
        return kind(**value)
    except (TypeError, ConfigurationError) as exc:
        raise ConfigurationError(f"{name}: {exc}") from None


def option(
    default: object,
    help: str,
    check: Check,
    *,
    accepts: object = None,
    applies: str = "all",
    cli: Callable[[str], object] | None = None,
    cli_help: str | None = None,
) -> Any:
    """One option's field: its default, help and check; ``accepts``, the type of what a caller
    may give where it is more than the field's type (``adaptive=True``: ``AdaptiveGiven``),
    named here; ``cli``, the flag's type (None: no flag)."""
    meta = dict(help=help, check=check, accepts=accepts, applies=applies)
    meta.update(cli=cli, cli_help=cli_help)
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


def option_default(f: dataclasses.Field[object]) -> object:
    """An option's declared default (a fresh one where it is made by a factory)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def option_info(f: dataclasses.Field[object]) -> OptionInfo:
    """What the declaration of the option ``f`` says of it."""
    meta = f.metadata
    return OptionInfo(
        f.name, option_default(f), meta["help"], meta["applies"], meta["cli"], meta["cli_help"]
    )
