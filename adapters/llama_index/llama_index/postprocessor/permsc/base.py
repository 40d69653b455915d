"""``PSCRerank``: permutation self-consistency reranking as a LlamaIndex node postprocessor.

The ranking model sees the retrieved passages in ``num_permutations`` shuffled orders
(concurrently); the answers are aggregated into one central ranking whose scores replace
the retriever's. All PSC logic lives in :class:`permsc_integrations.PSCRanker`; this class
adapts nodes, events and prompts.

Like LlamaIndex's ``LLMRerank``, the model is ``llm=`` (any LlamaIndex ``LLM``) and defaults
to ``Settings.llm``; ``backend=`` takes a core spec string (``"openai:gpt-4o-mini"``,
``"embedded"``) or a core backend object instead. The options are the core's (same names,
defaults and validation, docs/options.md); an unknown keyword is refused. One object may
serve threads, event loops and coroutines at once: ``max_concurrency`` caps their model
calls together.

Example (``backend="openai:gpt-4o-mini"`` or any LlamaIndex LLM ranks for real):
    >>> from llama_index.core.llms import MockLLM
    >>> rerank = PSCRerank(llm=MockLLM(), top_n=3, num_permutations=5)
    >>> rerank.model_name, rerank.core_ranker().options.num_permutations
    ('llama_index:unknown', 5)
    >>> # index.as_query_engine(node_postprocessors=[rerank]).query("...")
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, cast

from llama_index.core.bridge.pydantic import Field, SerializeAsAny, field_serializer
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle

from permsc_integrations import PSCRanker
from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends.base import Backend, BatchBackend
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration import PSCOptionsModel, at_least, psc_metadata, traced
from permsc_integrations.results import RankingResult

from .llm_backend import LlamaIndexLLMBackend, llm_event
from .prompts import to_core_prompt

__all__ = ["PSCRerank", "DEFAULT_TOP_N"]

dispatcher = get_dispatcher(__name__)

PROMPT_KEY = "rerank_prompt"
DEFAULT_TOP_N = 5  # as LlamaIndex's RankGPTRerank
PSC_KEY, RETRIEVAL_KEY = "psc", "retrieval_score"


class PSCRerank(PSCOptionsModel, BaseNodePostprocessor, PromptMixin):
    """Rerank nodes by permutation self-consistency (see the module docstring).

    Returned nodes are new ``NodeWithScore`` objects (their nodes shallow copies with their
    own metadata), best first, scored ``(n - rank) / n`` from the consensus; ``top_n`` of them
    (5 by default; ``None``: all), and the core's ``top_k`` defaults to ``top_n`` so the nodes
    returned are the settled ones. Each carries ``metadata["psc"]`` (rank, confidence, samples,
    failed, usage, head, stopped, and its ``top_probability`` of the top k when the ranking
    has a k: docs/scores.md) and, with ``keep_retrieval_score``, the retriever's score as
    ``metadata["retrieval_score"]``; both are kept out of the text sent to the LLM and the
    embedder.
    """

    # what the core ranker is built from besides the options: setting one is checked
    _ranker_fields: ClassVar[frozenset[str]] = frozenset({"backend", "llm", "top_n", PROMPT_KEY})
    _shared_on_copy: ClassVar[frozenset[str]] = frozenset({"backend", "llm", "callback_manager"})

    backend: object = Field(default=None, description="Core spec string or backend object.")
    llm: SerializeAsAny[LLM] | None = Field(
        default=None, exclude=True, description="The LlamaIndex LLM that ranks."
    )
    model_name: str = Field(default="", description="Backend name, reported in events.")
    top_n: int | None = Field(default=DEFAULT_TOP_N, description="Nodes to return (None: all).")
    keep_retrieval_score: bool = Field(
        default=False, description="Keep the retriever's score in metadata['retrieval_score']."
    )
    rerank_prompt: SerializeAsAny[BasePromptTemplate] | None = Field(
        default=None,
        description="LlamaIndex template with {query_str}, {context_str}, {num}; None: prompt.",
    )

    def _init(self, backend: object = None, **fields: Any) -> None:
        super().__init__(**{"backend": backend, **fields})
        if not self.model_name:
            self.model_name = self._backend().name

    if not TYPE_CHECKING:  # mypy reads the fields' own __init__: every keyword typed
        __init__ = _init

    @classmethod
    def _given(cls, data: dict[str, object]) -> dict[str, object]:
        if isinstance(data.get("backend"), LLM):  # an LLM given as the backend is the llm
            data = {**data, "backend": None, "llm": data["backend"]}
        if data.get("backend") is None and data.get("llm") is None:
            data = {**data, "llm": _settings_llm()}
        return data

    @classmethod
    def class_name(cls) -> str:
        return "PSCRerank"

    def _checked_model(self) -> object:
        at_least(1, optional=True)("top_n", self.top_n)
        if (self.backend is None) == (self.llm is None):
            raise ConfigurationError("give either llm= (a LlamaIndex LLM) or backend=, not both")
        if self.llm is not None and not isinstance(self.llm, LLM):
            raise ConfigurationError(f"llm must be a LlamaIndex LLM, got {type(self.llm).__name__}")
        if self.backend is not None and not isinstance(self.backend, (str, Backend)):
            raise ConfigurationError(
                "backend must be a spec string like 'openai:gpt-4o-mini' or a core backend "
                f"object (a LlamaIndex LLM goes in llm=); got {type(self.backend).__name__}"
            )
        return self.backend if self.llm is None else self.llm

    def _core_values(self, values: dict[str, object]) -> dict[str, object]:
        if self.rerank_prompt is None:
            return values
        max_words = at_least(1, optional=True)("max_words", values["max_words"])
        prompt = to_core_prompt(self.rerank_prompt, max_words=max_words)
        return {**values, "prompt": prompt}

    def _returned(self) -> int | None:
        return self.top_n

    def _assignment(self, name: str, value: object) -> dict[str, object]:
        if name in ("backend", "llm") and value is not None:  # one model at a time
            is_llm = isinstance(value, LLM)
            return {"llm": value, "backend": None} if is_llm else {"backend": value, "llm": None}
        return {name: value}

    def _changed(self, name: str) -> None:
        if name in ("backend", "llm", "backend_options"):
            self.model_name = self._backend().name

    @field_serializer("backend")
    def _spec_only(self, value: object) -> str | None:
        """A spec string round-trips through to_dict/from_dict; an object does not."""
        return value if isinstance(value, str) else None

    def _get_prompts(self) -> PromptDictType:
        return {PROMPT_KEY: self.rerank_prompt} if self.rerank_prompt is not None else {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if PROMPT_KEY in prompts:
            self.rerank_prompt = prompts[PROMPT_KEY]

    def _backend(self) -> Backend:
        if self.llm is not None:
            return LlamaIndexLLMBackend(self.llm)
        if isinstance(self.backend, str):
            return resolve_backend(self.backend, **self.backend_options)
        return cast(Backend, self.backend)  # a Backend: _checked_model refused anything else

    def _build(self) -> PSCRanker:
        options = self._check()
        backend = self._backend()
        if isinstance(self.backend, str):
            if not isinstance(backend, BatchBackend):
                backend = traced(backend, llm_event(lambda: self.callback_manager))
            self._one.own(backend)
            options = options.replace(backend_options={})
        return PSCRanker(backend, options=options, meter=self._one.meter(options))

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query_str(query_bundle)
        if not nodes:
            return []
        with self._rerank_events(nodes, query_bundle) as finish:
            return finish(self.core_ranker().rank(query, _texts(nodes)))

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query_str(query_bundle)
        if not nodes:
            return []
        with self._rerank_events(nodes, query_bundle) as finish:
            return finish(await self.core_ranker().arank(query, _texts(nodes)))

    @contextmanager
    def _rerank_events(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> Iterator[Callable[[RankingResult], list[NodeWithScore]]]:
        """Start and end events (instrumentation and callback manager) around one rerank."""
        top_n = self.top_n if self.top_n is not None else len(nodes)
        dispatcher.event(
            ReRankStartEvent(
                query=query_bundle, nodes=nodes, top_n=top_n, model_name=self.model_name
            )
        )
        payload: dict[str, object] = {
            EventPayload.NODES: nodes,
            EventPayload.MODEL_NAME: self.model_name,
            EventPayload.QUERY_STR: query_bundle.query_str if query_bundle else "",
            EventPayload.TOP_K: top_n,
        }
        with self.callback_manager.event(CBEventType.RERANKING, payload=payload) as event:

            def finish(result: RankingResult) -> list[NodeWithScore]:
                reranked = _reranked(nodes, result, self.top_n, self.keep_retrieval_score)
                event.on_end(payload={EventPayload.NODES: reranked})
                dispatcher.event(ReRankEndEvent(nodes=reranked))
                return reranked

            yield finish


def _settings_llm() -> LLM:
    """``Settings.llm``, the default model of LlamaIndex, as ``LLMRerank`` takes it."""
    from llama_index.core import Settings

    try:
        return Settings.llm
    except Exception as exc:  # no default LLM can be made (no key, no package)
        raise ConfigurationError(
            f"no llm= or backend= given and Settings.llm is not usable ({exc}); pass llm=, or "
            "backend='openai:...' / backend='embedded'"
        ) from exc


def _query_str(query_bundle: QueryBundle | None) -> str:
    if query_bundle is None:
        raise ConfigurationError(
            "PSCRerank needs the query: pass query_bundle= or query_str= to postprocess_nodes "
            "(query engines and retrievers pass it for you)"
        )
    return query_bundle.query_str


def _texts(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]


def _reranked(
    nodes: list[NodeWithScore], result: RankingResult, top_n: int | None, keep_score: bool
) -> list[NodeWithScore]:
    order = result.order if top_n is None else result.order[:top_n]
    out = []
    for rank, i in enumerate(order, start=1):
        extra: dict[str, object] = {PSC_KEY: psc_metadata(result, i, rank)}
        if keep_score:
            extra[RETRIEVAL_KEY] = nodes[i].score
        out.append(NodeWithScore(node=_with_metadata(nodes[i].node, extra), score=result.scores[i]))
    return out


def _with_metadata(node: BaseNode, extra: dict[str, object]) -> BaseNode:
    """A shallow copy of ``node`` with ``extra`` metadata, kept from the LLM and the embedder."""
    copied = node.model_copy()
    copied.metadata = {**copy.deepcopy(node.metadata), **extra}
    for attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        keys = list(getattr(node, attr, []) or [])
        setattr(copied, attr, keys + [k for k in extra if k not in keys])
    return copied
