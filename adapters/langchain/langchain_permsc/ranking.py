"""The shared PSC settings of every runnable here, and the general listwise ranking runnable.

:class:`PSCListwiseRanker` ranks anything listwise inside LCEL pipelines: its input is
``{"query": str, "items": [...]}`` (strings, documents or mappings with ``"text"``) and its
output the items best first, each as ``{"item", "index", "score", "rank"}``.

Progress goes out as LangChain custom events named ``psc_<kind>`` (``psc_request_start``,
``psc_window_start``, ``psc_sample_end``, ``psc_window_end``, ...), visible in
``astream_events(version="v2")`` and to every callback handler's ``on_custom_event``.

Example:
    >>> from langchain_core.language_models import FakeListChatModel
    >>> model = FakeListChatModel(responses=["[2] > [1] > [3]"])  # always the same answer
    >>> ranker = PSCListwiseRanker(backend=model, num_permutations=1, include_identity=True)
    >>> [r["item"] for r in ranker.invoke({"query": "q", "items": ["a", "b", "c"]})]
    ['b', 'a', 'c']
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.callbacks.manager import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends.base import Backend, Completion
from permsc_integrations.bridge import run_sync
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.events import Event
from permsc_integrations.ranker import DEFAULT_MAX_CONCURRENCY, PSCRanker
from permsc_integrations.results import RankingResult

from .chat_backend import ChatModelBackend, run_config

__all__ = ["PSCRankingSettings", "PSCListwiseRanker", "RankedItem"]

EVENT_PREFIX = "psc_"


class RankedItem(TypedDict):
    """One output row of :class:`PSCListwiseRanker`: ``rank`` is 1-based, ``index`` the input's."""

    item: Any
    index: int
    score: float
    rank: int


class _Unused:
    """A backend that is never called: only used to validate the options at construction."""

    name = "unused"

    async def acomplete(self, messages: Any, settings: Any) -> Completion:  # pragma: no cover
        raise AssertionError("never called")

    async def aclose(self) -> None:
        pass


def _payload(event: Event) -> dict[str, Any]:
    head = {"request_id": event.request_id, "window": event.window, "sample": event.sample}
    return {**head, "total": event.total, **dict(event.detail)}


class PSCRankingSettings(BaseModel):
    """The PSC options (those of :class:`permsc_integrations.PSCRanker`) and the engine glue.

    ``backend`` is a core backend, a spec string (``"openai:gpt-4o-mini"``, ``"embedded"``;
    ``backend_kwargs`` go to its factory, e.g. ``base_url``) or a LangChain chat model.
    ``max_concurrency`` caps the LLM calls in flight (the config's ``max_concurrency``
    separately caps how many inputs ``batch`` runs at once). One engine runs per event loop.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    backend: Any
    backend_kwargs: dict[str, Any] = Field(default_factory=dict)
    num_permutations: int = 20
    aggregator: Any = "kemeny"
    prompt: Any = "rankgpt"
    window_size: int = 20
    step: int = 10
    seed: int = 0
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    include_identity: bool = False
    temperature: float = 0.0
    max_tokens: int | None = None
    timeout: float | None = 60.0
    max_words: int | None = 300
    retry: Any = None
    reasks: int = 1
    min_successful: int | None = None
    cache: Any = None
    _rankers: weakref.WeakKeyDictionary[Any, PSCRanker] = PrivateAttr(
        default_factory=weakref.WeakKeyDictionary
    )

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # checked here, not in a pydantic validator, so the typed error reaches the caller
        if not isinstance(self.backend, (str, BaseChatModel, Backend)):
            raise ConfigurationError(
                "backend must be a spec string like 'openai:gpt-4o-mini', a core backend object "
                f"or a LangChain chat model; got {type(self.backend).__name__}"
            )
        if self.backend_kwargs and not isinstance(self.backend, str):
            raise ConfigurationError(
                "backend_kwargs apply to a spec string backend only; configure the backend "
                f"object ({type(self.backend).__name__}) itself"
            )
        self._new_ranker(_Unused())  # raises ConfigurationError on a bad option

    def _new_ranker(self, backend: Backend) -> PSCRanker:
        fields = set(PSCRankingSettings.model_fields) - {"backend", "backend_kwargs"}
        return PSCRanker(backend, **{name: getattr(self, name) for name in fields})

    def _ranker(self) -> PSCRanker:
        """This event loop's engine (clients and limiters never cross loops)."""
        loop = asyncio.get_running_loop()
        ranker = self._rankers.get(loop)
        if ranker is None:
            if isinstance(self.backend, BaseChatModel):
                backend: Backend = ChatModelBackend(self.backend)
            else:
                backend = resolve_backend(self.backend, **self.backend_kwargs)
            ranker = self._rankers[loop] = self._new_ranker(backend)
        return ranker

    async def _arank(
        self, query: str, items: Sequence[Any], config: RunnableConfig, *, sync_events: bool = False
    ) -> RankingResult:
        """Rank inside the run of ``config``: its events, and its chat-model calls as children.

        ``sync_events`` (sync entry points) hands events to the sync callback manager.
        """

        async def hook(event: Event) -> None:
            name, data = EVENT_PREFIX + event.kind, _payload(event)
            if sync_events:
                dispatch_custom_event(name, data, config=config)
            else:
                await adispatch_custom_event(name, data, config=config)

        with run_config(config):
            return await self._ranker().arank(query, items, on_event=hook)

    def _rank(self, query: str, items: Sequence[Any], config: RunnableConfig) -> RankingResult:
        """Sync :meth:`_arank`, on the core's one bridge loop."""
        return run_sync(self._arank, query, items, config, sync_events=True)

    async def aclose(self) -> None:
        """Close the backend this object created from a spec string (for the running loop)."""
        ranker = self._rankers.pop(asyncio.get_running_loop(), None)
        if ranker is not None and isinstance(self.backend, str):  # made from the spec: ours
            await ranker.backend.aclose()

    def close(self) -> None:
        """Close what sync calls created (they run on the core's bridge loop)."""
        run_sync(self.aclose)


def _query_and(input: Any, key: str) -> tuple[str, Sequence[Any]]:
    if not isinstance(input, Mapping) or "query" not in input or key not in input:
        raise ConfigurationError(
            f'input must be a mapping {{"query": str, "{key}": [...]}}, got {type(input).__name__}'
            + (f" with keys {sorted(input)}" if isinstance(input, Mapping) else "")
        )
    query, items = input["query"], input[key]
    if not isinstance(query, str):
        raise ConfigurationError(f"input['query'] must be a string, got {type(query).__name__}")
    return query, items


def _rows(items: Sequence[Any], result: RankingResult) -> list[RankedItem]:
    return [
        RankedItem(item=items[i], index=i, score=result.scores[i], rank=rank)
        for rank, i in enumerate(result.order, start=1)
    ]


class PSCListwiseRanker(PSCRankingSettings, RunnableSerializable[dict[str, Any], list[RankedItem]]):
    """Rank ``{"query", "items"}`` with PSC; output :class:`RankedItem` rows, best first."""

    def _run(
        self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> list[RankedItem]:
        query, items = _query_and(input, "items")
        return _rows(items, self._rank(query, items, config))

    async def _arun(
        self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[RankedItem]:
        query, items = _query_and(input, "items")
        return _rows(items, await self._arank(query, items, config))

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[RankedItem]:
        return self._call_with_config(self._run, input, config, **kwargs)

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[RankedItem]:
        return await self._acall_with_config(self._arun, input, config, **kwargs)
