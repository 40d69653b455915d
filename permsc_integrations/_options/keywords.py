"""The ranking options as a caller gives them, typed: GENERATED from the declaration
(:class:`~permsc_integrations.RankingOptions`) by
``scripts/generate_option_keywords.py``. Do not edit: change the declaration and run the
script (tests/test_option_keywords.py fails while this file is stale).

- :class:`RankingKeywords`: the keywords of ``PSCRanker(...)`` and ``RankingOptions(...)``.
- :class:`OptionFields`: the same options as fields; the adapters' pydantic models
  (``integration_model.PSCOptionsModel``) get them, so that mypy reads each with its type.

Each type is what the option accepts (``adaptive=True``, ``request_cap="calls=60"``); the
declaration checks the value and keeps its normalised form (``RankingOptions.adaptive`` is an
``Adaptive`` or None). Defaults are the declaration's (docs/options.md).
"""

from __future__ import annotations

import sys
from typing import Any, TypedDict, TypeVar

from permsc_integrations._options.values import (
    AdaptiveGiven,
    BackendOptionsGiven,
    CapGiven,
    PricesGiven,
    RetryGiven,
    Scoring,
)
from permsc_integrations.aggregators import Aggregator
from permsc_integrations.backends.base import ResponseCache
from permsc_integrations.prompts import Prompt
from permsc_integrations.strategies import Strategy

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10
    from typing_extensions import dataclass_transform

__all__ = ["RankingKeywords", "OptionFields"]

_C = TypeVar("_C", bound=type)

_DECLARED: Any = None
"""Stands for the declared default of each field of :class:`OptionFields`."""


@dataclass_transform(kw_only_default=True)
def _fields(cls: _C) -> _C:
    """Marks :class:`OptionFields` as fields for type checkers; changes nothing at run time."""
    return cls


class RankingKeywords(TypedDict, total=False):
    """``PSCRanker``'s and ``RankingOptions``' keywords, in declaration order, each with what it
    accepts (docs/options.md)."""

    num_permutations: int
    """shuffled prompts per window (m)"""
    aggregator: str | Aggregator
    """aggregator name (kemeny, borda, copeland, rrf, ...) or callable"""
    prompt: str | Prompt
    """prompt name or Prompt object"""
    scoring: Scoring
    """generate (the model writes a ranking) or first_token (one output token: each item's label
    probability; docs/first_token.md)"""
    calibrate: bool
    """first_token: divide each answer's label probabilities by the position prior read from
    content-free items (CapCal), estimated once per backend, prompt and window size"""
    first_stage_weight: float
    """weight of the first-stage (input) order fused with each window's consensus (Borda points:
    0 = off, 1 = the input order; docs/first_token.md)"""
    strategy: str | Strategy
    """how a list longer than a window is ranked: blocks (rounds in which every shuffle is cut
    into blocks, all at once) or sliding (RankGPT windows, one after another);
    docs/strategies.md"""
    window_size: int
    """items per window (and per prompt)"""
    step: int
    """sliding-window step (1..window_size-1; the sliding strategy)"""
    top_k: int | None
    """settle the top k positions (sliding: more passes when k > window_size - step; blocks: the
    last round settles up to window_size)"""
    seed: int
    """seed of the permutations"""
    include_identity: bool
    """the first sample shows the input order"""
    temperature: float
    """sampling temperature (0: greedy, as in the paper)"""
    max_tokens: int | None
    """answer token limit (None: the backend's default)"""
    timeout: float | None
    """seconds per call (None: no limit)"""
    max_words: int | None
    """passage truncation in words, for prompts given by name (None: no cut)"""
    max_concurrency: int
    """calls in flight at once, across everything this ranker runs"""
    request_concurrency: int | None
    """calls in flight at once per request (None: no extra cap)"""
    retry: RetryGiven
    """attempts, backoff and time budget for retryable failures (None: the default)"""
    reasks: int
    """re-asks of an unparseable answer before the sample fails"""
    breaker_cooldown: float
    """seconds a breaker opened by a cause that can recover (an exhausted quota) refuses calls
    before one probe call goes out; a bad key or unknown model waits for reset_breaker()"""
    min_successful: int | None
    """samples per window that must succeed (None: max(1, m // 2))"""
    min_coverage: float
    """share of a window's items a partial answer must rank to count (0: any answer that ranks
    some items votes; measured best, docs/aggregation.md)"""
    adaptive: AdaptiveGiven
    """sample in waves and stop once a sign test establishes every adjacent pair of the consensus
    at a confidence (default 0.9), or the list model settles them up to an indifference zone
    (Adaptive.zone, 0.5) and the consensus held over the last wave (True, an Adaptive or
    'FIRST,WAVE[,TOP_K[,CONFIDENCE[,ZONE]]]'); num_permutations is the cap"""
    max_calls: int | None
    """model calls per request at most, re-asks and retries included: the strategy plans within
    it (blocks: rounds where the top k is uncertain; below one pass, the first items of the
    input, the rest in input order); docs/strategies.md"""
    max_total_tokens: int | None
    """prompt + completion tokens per request at most, as the backend reports them: the strategy
    plans within it (the most calls whose estimated tokens fit, characters / 4) and no call is
    sent once it is spent; docs/strategies.md"""
    max_cost: float | None
    """cost per request at most, at prices= (needed): planned and spent as max_total_tokens"""
    cache: ResponseCache | None
    """response cache: MemoryCache(), SQLiteCache(path) or None"""
    request_cap: CapGiven
    """spending cap per request, 'calls=N,tokens=N,cost=X' (any of them) or a SpendingCap; no
    call is sent past it (SpendingCapError)"""
    ranker_cap: CapGiven
    """spending cap shared by every request of the ranker (adapter, command run),
    'calls=N,tokens=N,cost=X' or a SpendingCap"""
    prices: PricesGiven
    """prices per million prompt and completion tokens, 'PROMPT,COMPLETION' or Prices: usage then
    reports its cost, and a cap may set cost="""
    backend_options: BackendOptionsGiven
    """options for a spec-string backend (base_url=, api_key=, device=, ...)"""


@_fields
class OptionFields:
    """Every option as a field with what it accepts and its declared default (the adapters'
    pydantic models get these fields: ``integration_model.PSCOptionsModel``)."""

    num_permutations: int = _DECLARED
    aggregator: str | Aggregator = _DECLARED
    prompt: str | Prompt = _DECLARED
    scoring: Scoring = _DECLARED
    calibrate: bool = _DECLARED
    first_stage_weight: float = _DECLARED
    strategy: str | Strategy = _DECLARED
    window_size: int = _DECLARED
    step: int = _DECLARED
    top_k: int | None = _DECLARED
    seed: int = _DECLARED
    include_identity: bool = _DECLARED
    temperature: float = _DECLARED
    max_tokens: int | None = _DECLARED
    timeout: float | None = _DECLARED
    max_words: int | None = _DECLARED
    max_concurrency: int = _DECLARED
    request_concurrency: int | None = _DECLARED
    retry: RetryGiven = _DECLARED
    reasks: int = _DECLARED
    breaker_cooldown: float = _DECLARED
    min_successful: int | None = _DECLARED
    min_coverage: float = _DECLARED
    adaptive: AdaptiveGiven = _DECLARED
    max_calls: int | None = _DECLARED
    max_total_tokens: int | None = _DECLARED
    max_cost: float | None = _DECLARED
    cache: ResponseCache | None = _DECLARED
    request_cap: CapGiven = _DECLARED
    ranker_cap: CapGiven = _DECLARED
    prices: PricesGiven = _DECLARED
    backend_options: BackendOptionsGiven = _DECLARED
