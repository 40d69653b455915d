"""The shared PSC settings of every runnable here, and the general listwise ranking runnable.

The options are the core's (:class:`permsc_integrations.RankingOptions`: the same names,
defaults and validation, declared once); an unknown keyword is refused with the closest
names, and a value set after construction is validated and used from the next call on. One
core ranker serves each object, from any mix of threads, event loops and coroutines:
``max_concurrency`` caps the model calls of all of them together (the config's
``max_concurrency`` separately caps how many inputs ``batch`` runs at once).

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

from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any, TypedDict, cast

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.callbacks.manager import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.runnables import (
    ConfigurableField,
    Runnable,
    RunnableConfig,
    RunnableSerializable,
)
from langchain_core.runnables.utils import AnyConfigurableField
from pydantic import ConfigDict, Field

from permsc_integrations import Event, PSCRanker, RankingOptions
from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends.base import Backend, BatchBackend
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration import PSCOptionsModel, option_annotation, run_sync, traced
from permsc_integrations.results import RankingResult

from .chat_backend import ChatModelBackend, chat_model, chat_model_run, run_config
from .prompts import core_prompt

__all__ = ["PSCRankingSettings", "PSCListwiseRanker", "RankedItem"]

Input = dict[str, Any]
"""What a ranking runnable is invoked with: ``{"query": ..., "items" or "documents": [...]}``
(LangChain types a runnable's input as it is declared; the values are the caller's, so
``Any``: a ``dict`` is invariant, and ``dict[str, object]`` refuses the dict literal a user
writes, ``{"query": "q", "documents": docs}``; tests/test_typed_guides.py checks it)."""

EVENT_PREFIX = "psc_"
OPTIONS = frozenset(RankingOptions.names())


class RankedItem(TypedDict):
    """One output row of :class:`PSCListwiseRanker`: ``rank`` is 1-based, ``index`` the input's."""

    item: object
    index: int
    score: float
    rank: int


def _payload(event: Event) -> dict[str, object]:
    head = {"request_id": event.request_id, "window": event.window, "sample": event.sample}
    detail = {
        k: asdict(v) if is_dataclass(v) and not isinstance(v, type) else v
        for k, v in event.detail.items()
    }
    return {**head, "total": event.total, **detail}


class PSCRankingSettings(PSCOptionsModel):
    """The PSC options (docs/options.md) and the engine glue.

    ``backend`` is a spec string (``"openai:gpt-4o-mini"``, ``"embedded"``; ``backend_options``
    go to its factory, e.g. ``base_url``; secrets in them never show in a repr or a dump), a
    core backend object, or a LangChain chat model (or a Runnable around one). ``prompt`` may
    also be a ``PromptTemplate``/``ChatPromptTemplate`` (``{query}``, ``{items}``, ``{num}``).
    """

    backend: object = Field(
        description="spec string ('openai:gpt-4o-mini'), core backend object, or LangChain "
        "chat model (or a Runnable around one)"
    )

    def _checked_model(self) -> object:
        if not isinstance(self.backend, (str, Backend)) and chat_model(self.backend) is None:
            raise ConfigurationError(
                "backend must be a spec string like 'openai:gpt-4o-mini', a core backend object "
                f"or a LangChain chat model; got {type(self.backend).__name__}"
            )
        return self.backend

    def _core_values(self, values: dict[str, object]) -> dict[str, object]:
        words = values["max_words"]  # an int or None, as the options checked it
        limit = words if isinstance(words, int) else None
        return {**values, "prompt": core_prompt(values["prompt"], limit)}

    def configurable_fields(self, **kwargs: AnyConfigurableField) -> RunnableSerializable[Any, Any]:
        """LangChain's, where an option's config schema is its typed statement: LangChain
        would take the field's bare annotation, whose Python objects (a ``ResponseCache``, a
        ``Prompt``) have no JSON schema."""
        runnable: Any = super()  # a Runnable: this class is mixed into one
        fields = {name: _with_statement(name, field) for name, field in kwargs.items()}
        configured: RunnableSerializable[Any, Any] = runnable.configurable_fields(**fields)
        return configured

    def _build(self) -> PSCRanker:
        options = self._check()
        meter = self._one.meter(options)  # the ranker cap's, kept across rebuilds
        if isinstance(self.backend, str):
            backend = resolve_backend(self.backend, **self.backend_options)
            wrapped = (
                backend if isinstance(backend, BatchBackend) else traced(backend, chat_model_run)
            )
            self._one.own(wrapped)
            return PSCRanker(wrapped, options=options.replace(backend_options={}), meter=meter)
        if isinstance(self.backend, Runnable):
            return PSCRanker(ChatModelBackend(self.backend), options=options, meter=meter)
        return PSCRanker(cast(Backend, self.backend), options=options, meter=meter)

    async def _arank(
        self,
        query: str,
        items: Sequence[object],
        config: RunnableConfig,
        *,
        sync_events: bool = False,
    ) -> RankingResult:
        """Rank inside the run of ``config``: its events, and its model calls as children.

        ``sync_events`` (sync entry points) hands events to the sync callback manager.
        """

        async def hook(event: Event) -> None:
            name, data = EVENT_PREFIX + event.kind, _payload(event)
            if sync_events:
                dispatch_custom_event(name, data, config=config)
            else:
                await adispatch_custom_event(name, data, config=config)

        with run_config(config):
            return await self.core_ranker().arank(query, items, on_event=hook)

    def _rank(self, query: str, items: Sequence[object], config: RunnableConfig) -> RankingResult:
        """Sync :meth:`_arank`, on the core's one bridge loop."""
        return run_sync(self._arank, query, items, config, sync_events=True)


def _with_statement(name: str, field: AnyConfigurableField) -> AnyConfigurableField:
    if isinstance(field, ConfigurableField) and field.annotation is None and name in OPTIONS:
        return field._replace(annotation=option_annotation(name))
    return field


def _query_and(input: object, key: str) -> tuple[str, Sequence[Any]]:
    if not isinstance(input, Mapping) or "query" not in input or key not in input:
        raise ConfigurationError(
            f'input must be a mapping {{"query": str, "{key}": [...]}}, got {type(input).__name__}'
            + (f" with keys {sorted(input)}" if isinstance(input, Mapping) else "")
        )
    query, items = input["query"], input[key]
    if not isinstance(query, str):
        raise ConfigurationError(f"input['query'] must be a string, got {type(query).__name__}")
    return query, items


def _rows(items: Sequence[object], result: RankingResult) -> list[RankedItem]:
    return [
        RankedItem(item=items[i], index=i, score=result.scores[i], rank=rank)
        for rank, i in enumerate(result.order, start=1)
    ]


class PSCListwiseRanker(PSCRankingSettings, RunnableSerializable[Input, list[RankedItem]]):
    """Rank ``{"query", "items"}`` with PSC; output :class:`RankedItem` rows, best first."""

    model_config = ConfigDict(extra="forbid")  # over RunnableSerializable's extra="ignore"

    def _run(
        self, input: object, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> list[RankedItem]:
        query, items = _query_and(input, "items")
        return _rows(items, self._rank(query, items, config))

    async def _arun(
        self, input: object, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[RankedItem]:
        query, items = _query_and(input, "items")
        return _rows(items, await self._arank(query, items, config))

    def invoke(
        self, input: Input, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[RankedItem]:
        return self._call_with_config(self._run, input, config, **kwargs)

    async def ainvoke(
        self, input: Input, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[RankedItem]:
        return await self._acall_with_config(self._arun, input, config, **kwargs)
