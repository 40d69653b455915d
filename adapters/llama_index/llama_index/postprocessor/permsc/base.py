"""``PSCRerank``: permutation self-consistency reranking as a LlamaIndex node postprocessor.

The ranking model sees the retrieved passages in ``num_permutations`` shuffled orders
(concurrently); the answers are aggregated into one central ranking whose scores replace
the retriever's. All PSC logic lives in :class:`permsc_integrations.PSCRanker`; this class
adapts nodes, events and prompts.

Example (``backend="openai:gpt-4o-mini"`` or any LlamaIndex LLM ranks for real):
    >>> from llama_index.core.llms import MockLLM
    >>> rerank = PSCRerank(backend=MockLLM(), top_n=3, num_permutations=5)
    >>> rerank.model_name, rerank.ranker.engine.num_permutations
    ('llama_index:unknown', 5)
    >>> # index.as_query_engine(node_postprocessors=[rerank]).query("...")
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr, SerializeAsAny
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from permsc_integrations.backends import Backend, resolve_backend
from permsc_integrations.bridge import run_sync
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.prompts.template import TemplatePrompt
from permsc_integrations.ranker import DEFAULT_MAX_CONCURRENCY, PSCRanker
from permsc_integrations.results import RankingResult

from .llm_backend import LlamaIndexLLMBackend
from .prompts import to_core_prompt

__all__ = ["PSCRerank"]

dispatcher = get_dispatcher(__name__)

PROMPT_KEY = "rerank_prompt"
# Changing one of these rebuilds the ranker on the next call (the live backend is kept).
_RANKER_FIELDS = frozenset(
    {
        "top_n",
        "num_permutations",
        "aggregator",
        "prompt",
        "rerank_prompt",
        "window_size",
        "step",
        "seed",
        "include_identity",
        "max_concurrency",
        "temperature",
        "max_tokens",
        "timeout",
        "max_words",
        "min_successful",
        "ranker_options",
        "backend",
    }
)


class PSCRerank(BaseNodePostprocessor, PromptMixin):
    """Rerank nodes by permutation self-consistency over a listwise LLM ranker.

    ``backend`` is a core backend object, a spec string (``"openai:gpt-4o-mini"``,
    ``"embedded"``; ``backend_options`` go to its factory, e.g. ``base_url``) or a
    LlamaIndex ``LLM`` (called through ``achat``). Returned nodes are new
    ``NodeWithScore`` objects, best first, scored ``(n - rank) / n`` from the consensus.
    ``PromptMixin`` is mixed in explicitly: recent ``BaseNodePostprocessor`` releases define
    its hooks but no longer inherit ``get_prompts``/``update_prompts``.
    """

    backend: Any = Field(exclude=True, description="Core backend, spec string or LlamaIndex LLM.")
    backend_options: dict[str, Any] = Field(
        default_factory=dict, exclude=True, description="Options for a spec-string backend."
    )
    model_name: str = Field(default="", description="Backend name, reported in events.")
    top_n: int | None = Field(default=None, description="Nodes to return (None: all).")
    num_permutations: int = Field(default=20, description="Shuffled prompts per window (m).")
    aggregator: str | Callable[..., Any] = Field(
        default="kemeny", description="Aggregator name or callable (kemeny, rrf, borda, ...)."
    )
    prompt: str = Field(default="rankgpt", description="Core prompt used without rerank_prompt.")
    rerank_prompt: SerializeAsAny[BasePromptTemplate] | None = Field(
        default=None,
        description="LlamaIndex template with {query_str}, {context_str}, {num}; None: prompt.",
    )
    window_size: int = Field(default=20, description="Sliding-window size.")
    step: int = Field(default=10, description="Sliding-window step.")
    seed: int = Field(default=0, description="Seed of the permutations.")
    include_identity: bool = Field(default=False, description="First sample in input order.")
    max_concurrency: int = Field(
        default=DEFAULT_MAX_CONCURRENCY, description="Concurrent model calls."
    )
    temperature: float = Field(default=0.0, description="Sampling temperature.")
    max_tokens: int | None = Field(default=None, description="Answer token limit.")
    timeout: float | None = Field(default=60.0, description="Per-call timeout in seconds.")
    max_words: int | None = Field(default=300, description="Passage truncation in words.")
    min_successful: int | None = Field(default=None, description="Samples that must succeed.")
    ranker_options: dict[str, Any] = Field(
        default_factory=dict, exclude=True, description="More PSCRanker options (retry, cache)."
    )

    _backend: Backend = PrivateAttr()
    _ranker: PSCRanker | None = PrivateAttr(default=None)

    def __init__(self, backend: Any, **fields: Any) -> None:
        super().__init__(backend=backend, **fields)  # type: ignore[call-arg]
        # Resolved here, not in a validator, so a bad backend raises the library's typed error.
        self._backend = _live_backend(self.backend, self.backend_options)
        if not self.model_name:
            self.model_name = self._backend.name

    @classmethod
    def class_name(cls) -> str:
        return "PSCRerank"

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "backend":  # a spec-string backend replaced here is not closed
            self._backend = _live_backend(value, self.backend_options)
            self.model_name = self._backend.name
        if name in _RANKER_FIELDS:
            self._ranker = None

    def _get_prompts(self) -> PromptDictType:
        return {PROMPT_KEY: self.rerank_prompt} if self.rerank_prompt is not None else {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if PROMPT_KEY in prompts:
            to_core_prompt(prompts[PROMPT_KEY])  # fail now, not at query time
            self.rerank_prompt = prompts[PROMPT_KEY]

    @property
    def ranker(self) -> PSCRanker:
        """The core ranker these settings describe (built on first use)."""
        if self._ranker is None:
            self._ranker = self._build_ranker()
        return self._ranker

    def _build_ranker(self) -> PSCRanker:
        prompt: str | TemplatePrompt = self.prompt
        if self.rerank_prompt is not None:
            prompt = to_core_prompt(self.rerank_prompt, max_words=self.max_words)
        return PSCRanker(
            self._backend,
            num_permutations=self.num_permutations,
            aggregator=self.aggregator,
            prompt=prompt,  # type: ignore[arg-type]  # frozen-dataclass name vs Protocol
            window_size=self.window_size,
            step=self.step,
            max_concurrency=self.max_concurrency,
            seed=self.seed,
            include_identity=self.include_identity,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            timeout=self.timeout,
            max_words=self.max_words,
            min_successful=self.min_successful,
            top_k=self.top_n,
            **self.ranker_options,
        )

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query_str(query_bundle)
        if not nodes:
            return []
        with self._rerank_events(nodes, query_bundle) as finish:
            return finish(self.ranker.rank(query, _texts(nodes)))

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query_str(query_bundle)
        if not nodes:
            return []
        with self._rerank_events(nodes, query_bundle) as finish:
            return finish(await self.ranker.arank(query, _texts(nodes)))

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
        payload: dict[str, Any] = {
            EventPayload.NODES: nodes,
            EventPayload.MODEL_NAME: self.model_name,
            EventPayload.QUERY_STR: query_bundle.query_str if query_bundle else "",
            EventPayload.TOP_K: top_n,
        }
        with self.callback_manager.event(CBEventType.RERANKING, payload=payload) as event:

            def finish(result: RankingResult) -> list[NodeWithScore]:
                reranked = _reranked(nodes, result, self.top_n)
                event.on_end(payload={EventPayload.NODES: reranked})
                dispatcher.event(ReRankEndEvent(nodes=reranked))
                return reranked

            yield finish

    async def aclose(self) -> None:
        """Release the ranker and, when built here from a spec string, the backend."""
        ranker, self._ranker = self._ranker, None
        if ranker is not None:
            await ranker.aclose()
        if isinstance(self.backend, str):
            await self._backend.aclose()

    def close(self) -> None:
        """Sync :meth:`aclose` (through the library's bridge)."""
        run_sync(self.aclose)


def _live_backend(backend: Any, options: dict[str, Any]) -> Backend:
    if options and not isinstance(backend, str):
        raise ConfigurationError(
            "backend_options apply to a spec string backend only; configure a backend object "
            "or LLM yourself"
        )
    if isinstance(backend, LLM):
        return LlamaIndexLLMBackend(backend)
    return resolve_backend(backend, **options)


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
    nodes: list[NodeWithScore], result: RankingResult, top_n: int | None
) -> list[NodeWithScore]:
    order = result.order if top_n is None else result.order[:top_n]
    return [NodeWithScore(node=nodes[i].node, score=result.scores[i]) for i in order]
