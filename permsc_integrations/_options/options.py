"""The ranking options, declared once: name, default, validation, help and where each applies.

:class:`~.PSCRanker`, the LangChain and LlamaIndex adapters and the ``permsc`` command line all
derive their options from :class:`RankingOptions`, so names, defaults and validation are the
same everywhere. A bad value raises :class:`ConfigurationError` naming the option; an unknown
name is refused with the closest known names. Each field has the type it keeps; what a caller
may give (``adaptive=True``) is typed in the generated :mod:`.keywords`. To add an
option, declare it here and run ``python scripts/generate_option_keywords.py`` (docs/options.md,
"Adding an option").

Example:
    >>> RankingOptions(num_permutations=5).num_permutations
    5
    >>> RankingOptions.from_kwargs(num_permutation=5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.ConfigurationError: unknown option 'num_permutation' ...
    >>> RankingOptions(max_words=0)
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.ConfigurationError: max_words must be an int >= 1 or None, got 0
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from permsc_integrations._calls.caps import Prices, SpendingCap, parse_cap, parse_prices
from permsc_integrations._calls.retry import RetryPolicy
from permsc_integrations._checks import (
    at_least,
    flag,
    integer,
    number,
    share,
    sliding_step,
    successes_needed,
    unknown_option,
)
from permsc_integrations._options.values import (
    APPLIES_TO,
    SCORINGS,
    AdaptiveGiven,
    BackendOptionsGiven,
    CapGiven,
    OptionInfo,
    PricesGiven,
    RetryGiven,
    Scoring,
    check_adaptive,
    check_aggregator,
    check_cache,
    check_mapping,
    check_prompt,
    check_retry,
    check_scoring,
    check_strategy,
    labelled,
    option_default,
    option_info,
    priced,
    scored_with,
    slides,
)
from permsc_integrations._options.values import option as _option
from permsc_integrations._registry import publish
from permsc_integrations.aggregators import Aggregator
from permsc_integrations.backends.base import GenerationSettings, ResponseCache
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.prompts import Prompt, first_token_prompt, get_prompt
from permsc_integrations.strategies import Adaptive, Plan, Strategy, choose

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from permsc_integrations._options.keywords import RankingKeywords

__all__ = [
    "RankingOptions",
    "OptionInfo",
    "DEFAULT_MAX_CONCURRENCY",
    "APPLIES_TO",
    "SCORINGS",
    "unknown_option",
]

DEFAULT_MAX_CONCURRENCY = 32
"""Calls in flight at once by default: above the default m = 20, so a window is one round."""


@dataclass(frozen=True)
class RankingOptions:
    """Every option of a PSC ranking, validated on construction (see the module docstring)."""

    num_permutations: int = _option(20, "shuffled prompts per window (m)", at_least(1), cli=int)
    aggregator: str | Aggregator = _option(
        "kemeny",
        "aggregator name (kemeny, borda, copeland, rrf, ...) or callable",
        check_aggregator,
        cli=str,
        cli_help="aggregator: kemeny, borda, copeland, rrf, local_search (or a plugin's name)",
    )
    prompt: str | Prompt = _option(
        "rankgpt",
        "prompt name or Prompt object",
        check_prompt,
        cli=str,
        cli_help="prompt: rankgpt, rankvicuna, mathsort, wordsort, gsm8ksort",
    )
    scoring: Scoring = _option(
        "generate",
        "generate (the model writes a ranking) or first_token (one output token: each item's "
        "label probability; docs/first_token.md)",
        check_scoring,
        cli=str,
    )
    calibrate: bool = _option(
        False,
        "first_token: divide each answer's label probabilities by the position prior read "
        "from content-free items (CapCal), estimated once per backend, prompt and window size",
        flag,
    )
    first_stage_weight: float = _option(
        0.0,
        "weight of the first-stage (input) order fused with each window's consensus "
        "(Borda points: 0 = off, 1 = the input order; docs/first_token.md)",
        share,
        cli=float,
    )
    strategy: str | Strategy = _option(
        "blocks",
        "how a list longer than a window is ranked: blocks (rounds in which every "
        "shuffle is cut into blocks, all at once) or sliding (RankGPT windows, one after "
        "another); docs/strategies.md",
        check_strategy,
        cli=str,
    )
    window_size: int = _option(20, "items per window (and per prompt)", at_least(2), cli=int)
    step: int = _option(
        10, "sliding-window step (1..window_size-1; the sliding strategy)", at_least(1), cli=int
    )
    top_k: int | None = _option(
        None,
        "settle the top k positions (sliding: more passes when k > window_size - step; "
        "blocks: the last round settles up to window_size)",
        at_least(1, optional=True),
        cli=int,
    )
    seed: int = _option(0, "seed of the permutations", integer, cli=int)
    include_identity: bool = _option(False, "the first sample shows the input order", flag)
    temperature: float = _option(
        0.0,
        "sampling temperature (0: greedy, as in the paper)",
        number(positive=False),
        applies="decoding",
        cli=float,
    )
    max_tokens: int | None = _option(
        None,
        "answer token limit (None: the backend's default)",
        at_least(1, optional=True),
        applies="decoding",
        cli=int,
    )
    timeout: float | None = _option(
        60.0,
        "seconds per call (None: no limit)",
        number(positive=True, optional=True),
        cli=float,
    )
    max_words: int | None = _option(
        300,
        "passage truncation in words, for prompts given by name (None: no cut)",
        at_least(1, optional=True),
        cli=int,
        cli_help="passage truncation in words",
    )
    max_concurrency: int = _option(
        DEFAULT_MAX_CONCURRENCY,
        "calls in flight at once, across everything this ranker runs",
        at_least(1),
        cli=int,
    )
    request_concurrency: int | None = _option(
        None,
        "calls in flight at once per request (None: no extra cap)",
        at_least(1, optional=True),
    )
    retry: RetryPolicy = _option(
        RetryPolicy(),
        "attempts, backoff and time budget for retryable failures (None: the default)",
        check_retry,
        accepts=RetryGiven,
    )
    reasks: int = _option(
        1, "re-asks of an unparseable answer before the sample fails", at_least(0), cli=int
    )
    breaker_cooldown: float = _option(
        60.0,
        "seconds a breaker opened by a cause that can recover (an exhausted quota) refuses "
        "calls before one probe call goes out; a bad key or unknown model waits for "
        "reset_breaker()",
        number(positive=False),
        cli=float,
        cli_help="seconds a breaker opened by an exhausted upstream quota refuses calls before "
        "one probe call goes out (a bad key or unknown model: until restart)",
    )
    min_successful: int | None = _option(
        None,
        "samples per window that must succeed (None: max(1, m // 2))",
        at_least(1, optional=True),
        cli=int,
        cli_help="samples per window that must succeed (default: half of m, at least 1)",
    )
    min_coverage: float = _option(
        0.0,
        "share of a window's items a partial answer must rank to count (0: any answer "
        "that ranks some items votes; measured best, docs/aggregation.md)",
        share,
        cli=float,
    )
    adaptive: Adaptive | None = _option(
        None,
        "sample in waves and stop once a sign test establishes every adjacent pair of the "
        "consensus at a confidence (default 0.9), or the list model settles them up to an "
        "indifference zone (Adaptive.zone, 0.5) and the consensus held over the last wave "
        "(True, an Adaptive or 'FIRST,WAVE[,TOP_K[,CONFIDENCE[,ZONE]]]'); num_permutations is "
        "the cap",
        check_adaptive,
        accepts=AdaptiveGiven,
        cli=str,
        cli_help="sample in waves: 'on' (the default waves) or "
        "'FIRST,WAVE[,TOP_K[,CONFIDENCE[,ZONE]]]' (e.g. '5,5'), and stop once a sign test "
        "establishes every adjacent pair of the consensus (its top TOP_K, and the pair across "
        "the cut) at CONFIDENCE (default 0.9), or the list model settles them up to an "
        "indifference zone of ZONE (default 0.5; 'off': the sign test alone) and the consensus "
        "held over the last wave; -m is the cap",
    )
    max_calls: int | None = _option(
        None,
        "model calls per request at most, re-asks and retries included: the strategy plans "
        "within it (blocks: rounds where the top k is uncertain; below one pass, the first "
        "items of the input, the rest in input order); docs/strategies.md",
        at_least(1, optional=True),
        cli=int,
        cli_help="model calls per query at most, re-asks and retries included: the strategy "
        "plans within it (docs/strategies.md)",
    )
    max_total_tokens: int | None = _option(
        None,
        "prompt + completion tokens per request at most, as the backend reports them: the "
        "strategy plans within it (the most calls whose estimated tokens fit, characters / 4) "
        "and no call is sent once it is spent; docs/strategies.md",
        at_least(1, optional=True),
        cli=int,
    )
    max_cost: float | None = _option(
        None,
        "cost per request at most, at prices= (needed): planned and spent as max_total_tokens",
        number(positive=True, optional=True),
        cli=float,
    )
    cache: ResponseCache | None = _option(
        None, "response cache: MemoryCache(), SQLiteCache(path) or None", check_cache
    )
    request_cap: SpendingCap | None = _option(
        None,
        "spending cap per request, 'calls=N,tokens=N,cost=X' (any of them) or a SpendingCap; "
        "no call is sent past it (SpendingCapError)",
        parse_cap,
        accepts=CapGiven,
        cli=str,
        cli_help="spending cap per query, 'calls=N,tokens=N,cost=X' (any of them): a query "
        "that would pass it fails, and no call is sent past it",
    )
    ranker_cap: SpendingCap | None = _option(
        None,
        "spending cap shared by every request of the ranker (adapter, command run), "
        "'calls=N,tokens=N,cost=X' or a SpendingCap",
        parse_cap,
        accepts=CapGiven,
        cli=str,
        cli_help="spending cap of the whole run, 'calls=N,tokens=N,cost=X': a query starts "
        "only when the cap can still pay for its whole plan; one it cannot is not started "
        "(permsc rank names those, and --resume ranks them later without paying twice)",
    )
    prices: Prices | None = _option(
        None,
        "prices per million prompt and completion tokens, 'PROMPT,COMPLETION' or Prices: "
        "usage then reports its cost, and a cap may set cost=",
        parse_prices,
        accepts=PricesGiven,
        cli=str,
        cli_help="'PROMPT,COMPLETION' prices per million tokens: records report their cost, "
        "and a cap may set cost=",
    )
    backend_options: dict[str, object] = _option(
        {},
        "options for a spec-string backend (base_url=, api_key=, device=, ...)",
        check_mapping,
        accepts=BackendOptionsGiven,
        applies="spec",
    )

    if TYPE_CHECKING:  # what a caller may give; the dataclass's own __init__ runs

        def __init__(self, **options: Unpack[RankingKeywords]) -> None: ...

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = f.metadata["check"](f.name, getattr(self, f.name))
            object.__setattr__(self, f.name, value)
        if slides(self.strategy):
            sliding_step(self.step, self.window_size)
        priced(self.request_cap, self.ranker_cap, prices=self.prices, cost=self.max_cost)
        successes_needed(self.min_successful, self.num_permutations)
        scored_with(self.scoring, self.aggregator, self.calibrate, self.cache)
        if self.scoring == "first_token":
            labelled(self.window_size, first_token_prompt(self.prompt, self.max_words).labels)

    def __repr__(self) -> str:  # backend_options may hold secrets: show their names only
        changed = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.name != "backend_options" and getattr(self, f.name) != option_default(f)
        ]
        if self.backend_options:
            changed.append(f"backend_options=<{', '.join(sorted(self.backend_options))}>")
        return f"RankingOptions({', '.join(changed)})"

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> RankingOptions:
        """Options from keyword arguments; an unknown name is refused with suggestions."""
        known = cls.names()
        for name in kwargs:
            if name not in known:
                raise ConfigurationError(unknown_option(name, known))
        return cls(**kwargs)

    def replace(self, **changes: Unpack[RankingKeywords]) -> RankingOptions:
        """A validated copy with ``changes`` (unknown names refused)."""
        return self.from_kwargs(**{**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, object]:
        """Every option by name (shallow: objects such as the cache are not copied)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def plan(self, n: int) -> Plan:
        """What ranking ``n`` items costs under these options, before it runs: the strategy's
        rounds and their calls (:mod:`permsc_integrations.strategies._plan`), as the chooser
        makes it (:func:`permsc_integrations.strategies.choose`: the frontier's, where it runs).

        >>> [str(RankingOptions(strategy=s).plan(100).calls) for s in ("blocks", "sliding")]
        ['120', '180']
        """
        return choose(self.strategy, n, self).plan

    @property
    def generation(self) -> GenerationSettings:
        """The decoding settings sent with every call."""
        return GenerationSettings(
            temperature=self.temperature, max_tokens=self.max_tokens, timeout=self.timeout
        )

    @property
    def spend(self) -> SpendingCap | None:
        """``max_total_tokens`` and ``max_cost``, the limits a request's meter stops at
        (:mod:`._options.spend` plans within them); None: neither is set."""
        if self.max_total_tokens is None and self.max_cost is None:
            return None
        return SpendingCap(tokens=self.max_total_tokens, cost=self.max_cost)

    def build_prompt(self) -> Prompt:
        """The prompt object; a prompt given by name gets ``max_words`` when it takes it.
        In first-token scoring, the first-token form of the prompt
        (:mod:`.prompts._first_token`)."""
        if self.scoring == "first_token":
            return first_token_prompt(self.prompt, self.max_words)
        if not isinstance(self.prompt, str):
            return get_prompt(self.prompt)
        try:
            return get_prompt(self.prompt, max_words=self.max_words)
        except ConfigurationError:  # prompts without passage truncation (sorting tasks)
            return get_prompt(self.prompt)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every option name, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def describe(cls) -> Iterator[OptionInfo]:
        """What the declaration says of each option, in declaration order."""
        return map(option_info, dataclasses.fields(cls))


publish("permsc_integrations", RankingOptions)
