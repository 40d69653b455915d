"""What both framework adapters share, so that they stay thin: checked options, one core
ranker per adapter object, safe serialisation of backend options, usage as plain data.

Example:
    >>> options = checked_options({"num_permutations": 5}, extra={"top_n"})
    >>> options.num_permutations
    5
    >>> public_backend_options({"api_key": "sk-secret", "base_url": "http://u:p@h/v1"})
    {'api_key': '***', 'base_url': 'http://***@h/v1'}
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from permsc_integrations._calls.spending import Meter
from permsc_integrations._options.options import RankingOptions, unknown_option
from permsc_integrations._ranker.ranker import PSCRanker
from permsc_integrations.backends import MASK, check_backend_options, is_secret_name, redact_url
from permsc_integrations.backends.base import (
    Backend,
    Completion,
    FirstTokenBackend,
    GenerationSettings,
    LabelProbabilities,
    Message,
)
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.results import RankingResult, Usage

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo  # the adapters' models; pydantic is theirs

__all__ = [
    "checked_options",
    "refuse_unknown",
    "refuse_unknown_attribute",
    "check_backend",
    "public_backend_options",
    "usage_dict",
    "psc_metadata",
    "repr_args",
    "OneRanker",
    "Done",
    "Trace",
    "TracedBackend",
    "TracedFirstTokenBackend",
    "traced",
]


def refuse_unknown(given: Iterable[str], known: Iterable[str]) -> None:
    """Refuse keyword arguments that are not fields, with the closest known names."""
    names = tuple(sorted(known))
    for name in given:
        if name not in names:
            raise ConfigurationError(unknown_option(name, names))


def refuse_unknown_attribute(obj: object, name: str, fields: Iterable[str]) -> None:
    """Refuse setting ``name`` on an adapter object when it is neither a field nor anything
    the class defines (a typo such as ``reranker.num_permutation = 3``)."""
    if name.startswith("_") or name in fields or hasattr(type(obj), name):
        return
    raise ConfigurationError(unknown_option(name, tuple(sorted(fields))))


def check_backend(backend: object, backend_options: Mapping[str, object]) -> None:
    """Refuse, at construction, backend options the spec string's backend does not take, and
    any for a backend object or a framework model."""
    check_backend_options(backend, backend_options)


def checked_options(values: Mapping[str, object], *, extra: Iterable[str] = ()) -> RankingOptions:
    """The :class:`RankingOptions` among ``values`` (other known keys: ``extra``), validated."""
    refuse_unknown(values, (*RankingOptions.names(), *extra))
    return RankingOptions.from_kwargs(
        **{k: v for k, v in values.items() if k in RankingOptions.names()}
    )


def public_backend_options(options: Mapping[str, object]) -> dict[str, object]:
    """``backend_options`` as they may be shown or serialised: secrets masked, URLs redacted."""
    out: dict[str, object] = {}
    for key, value in options.items():
        if is_secret_name(key):
            out[key] = MASK
        elif isinstance(value, str) and "://" in value:
            out[key] = redact_url(value)
        else:
            out[key] = value
    return out


_NOT_CONFIGURATION = frozenset({"callback_manager", "callbacks", "verbose", "tags", "metadata"})


class _Shown(str):
    """A description that a pydantic repr prints as is (no quotes)."""

    def __repr__(self) -> str:
        return str(self)


def repr_args(obj: object, fields: Mapping[str, FieldInfo]) -> Iterator[tuple[str, object]]:
    """``__repr_args__`` for an adapter: the fields that differ from their defaults, each as
    what identifies it (a framework model by its class and model name: no clients, no keys,
    no callback managers), secrets masked and URLs redacted."""
    for name, info in fields.items():
        value = getattr(obj, name, None)
        if name in _NOT_CONFIGURATION or _is_default(value, info):
            continue
        yield (
            name,
            public_backend_options(value or {}) if name == "backend_options" else _shown(value),
        )


def _is_default(value: object, info: FieldInfo) -> bool:
    try:
        return bool(value == info.get_default(call_default_factory=True))
    except Exception:  # an object whose == cannot compare with the default
        return False


def _shown(value: object) -> object:
    if isinstance(value, str):
        return redact_url(value) if "://" in value else value
    if value is None or isinstance(value, (int, float, bool)):
        return value
    if dataclasses.is_dataclass(value):  # RetryPolicy, SpendingCap, Prices, Adaptive
        return value
    kind = type(value).__name__
    named = getattr(value, "name", None)
    if hasattr(value, "acomplete") and isinstance(named, str):  # a core backend
        return _Shown(f"{kind}({named!r})")
    for attr in ("model_name", "model", "model_id"):
        model = getattr(value, attr, None)
        if isinstance(model, str) and model:
            return _Shown(f"{kind}({attr}={redact_url(model) if '://' in model else model!r})")
    return _Shown(f"{kind}(...)")


def usage_dict(result: RankingResult) -> dict[str, int | float]:
    """A ranking's cost and agreement as plain data (document or node metadata)."""
    return result.usage.as_dict()


def psc_metadata(result: RankingResult, item: int, rank: int) -> dict[str, object]:
    """What both adapters put in an item's ``metadata["psc"]``: its ``rank`` (1-based), the
    ranking's ``samples``, ``failed``, ``confidence``, ``usage``, ``head`` and ``stopped``, and
    the item's ``top_probability`` when the result has one (docs/scores.md).

    >>> r = RankingResult((1, 0), (0.5, 1.0), head=2, top_probability=(0.25, 0.75))
    >>> psc_metadata(r, 1, 1)["top_probability"], psc_metadata(r, 1, 1)["stopped"]
    (0.75, 'complete')
    """
    out: dict[str, object] = {
        "rank": rank,
        "samples": len(result.samples),
        "failed": len(result.failures),
        "confidence": result.confidence,
        "usage": usage_dict(result),
        "head": result.head,
        "stopped": result.stopped,
    }
    if result.top_probability:
        out["top_probability"] = result.top_probability[item]
    return out


Done = Callable[[str, Usage, "str | None", "Mapping[str, object] | None"], Awaitable[None]]
"""``done(text, usage, model, extra)``: report one answer (``extra``: the first-token
scorer's label probabilities and mass)."""

Trace = Callable[[str, Sequence[Message]], AbstractAsyncContextManager[Done]]
"""``trace(name, messages)``: an async context manager around one call, in the framework's
tracing; it yields :data:`Done` for the answer and sees any error raised."""


class TracedBackend:
    """A core backend (built by an adapter from a spec string) whose calls are model calls of
    the framework's tracing, with their token usage, as ``trace`` reports them. Build it with
    :func:`traced`, which keeps first-token scoring where the backend has it."""

    def __init__(self, inner: Backend, trace: Trace) -> None:
        self.inner = inner
        self.name = inner.name
        self.fingerprint = getattr(inner, "fingerprint", None) or inner.name
        self._trace = trace

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        async with self._trace(self.name, messages) as done:
            completion = await self.inner.acomplete(messages, settings)
            await done(completion.text, completion.usage, completion.model, None)
        return completion

    async def aclose(self) -> None:
        await self.inner.aclose()


class TracedFirstTokenBackend(TracedBackend):
    """A traced backend that also scores first tokens: each ``afirst_token`` call is traced
    with the most likely label as its answer and the label probabilities as ``extra``."""

    inner: FirstTokenBackend

    async def afirst_token(
        self, messages: Sequence[Message], labels: Sequence[str], settings: GenerationSettings
    ) -> LabelProbabilities:
        async with self._trace(self.name, messages) as done:
            scored = await self.inner.afirst_token(messages, labels, settings)
            probabilities = dict(zip(labels, scored.probabilities, strict=True))
            best = max(probabilities, key=probabilities.__getitem__)
            extra = {"label_probabilities": probabilities, "label_mass": scored.mass}
            await done(best, scored.usage, scored.model, extra)
        return scored


def traced(inner: Backend, trace: Trace) -> TracedBackend:
    """``inner`` traced; a first-token backend stays one (:class:`TracedFirstTokenBackend`)."""
    if isinstance(inner, FirstTokenBackend):
        return TracedFirstTokenBackend(inner, trace)
    return TracedBackend(inner, trace)


class OneRanker:
    """One core ranker per adapter object, built on first use under a lock and rebuilt after
    a change of option; any number of threads, event loops and coroutines share it (its
    :class:`~permsc_integrations._calls.limiter.CallLimiter` caps their calls together). Replaced
    rankers are kept until :meth:`aclose`, which closes the backends they made. The
    ``ranker_cap``'s meter (:meth:`meter`, which a build passes as ``PSCRanker(meter=...)``)
    carries over to a rebuilt ranker while the cap and the prices stay the same: changing
    another option does not refill the cap."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # a build may call own()
        self._ranker: PSCRanker | None = None
        self._retired: list[PSCRanker] = []
        self._owned: list[Backend] = []
        self._meter: Meter | None = None

    def own(self, backend: Backend) -> None:
        """Close ``backend`` (built by the adapter from a spec string) in :meth:`aclose`."""
        with self._lock:
            self._owned.append(backend)

    def get(self, build: Callable[[], PSCRanker]) -> PSCRanker:
        with self._lock:
            if self._ranker is None:
                self._ranker = build()
            return self._ranker

    def meter(self, options: RankingOptions) -> Meter | None:
        """The ``ranker_cap`` meter of a ranker built with ``options`` (None without a cap):
        the one kept while the cap and the prices stay the same, else a new one."""
        cap, prices = options.ranker_cap, options.prices
        with self._lock:
            kept = self._meter
            if cap is None:
                self._meter = None
            elif kept is None or (kept.cap, kept.prices) != (cap, prices):
                self._meter = Meter(cap, "ranker", prices)
            return self._meter

    def reset(self) -> None:
        """Forget the ranker: the next call builds one from the current options."""
        with self._lock:
            if self._ranker is not None:
                self._retired.append(self._ranker)
            self._ranker = None

    async def aclose(self) -> None:
        with self._lock:
            rankers = [r for r in (*self._retired, self._ranker) if r is not None]
            owned, self._owned = self._owned, []
            self._retired, self._ranker = [], None
        for ranker in rankers:
            await ranker.aclose()
        for backend in owned:
            await backend.aclose()

    def __deepcopy__(self, memo: dict[int, object]) -> OneRanker:
        return OneRanker()  # a copy builds its own ranker

    def __getstate__(self) -> dict[str, object]:
        return {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__()  # type: ignore[misc]
