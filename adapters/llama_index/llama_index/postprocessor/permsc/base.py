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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from llama_index.core.bridge.pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializeAsAny,
    create_model,
    field_serializer,
)
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from permsc_integrations.backends import Backend, resolve_backend
from permsc_integrations.backends.base import BatchBackend
from permsc_integrations.checks import at_least
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration import (
    OneRanker,
    check_backend,
    checked_options,
    public_backend_options,
    refuse_unknown,
    refuse_unknown_attribute,
    repr_args,
    traced,
    usage_dict,
)
from permsc_integrations.options import RankingOptions
from permsc_integrations.ranker import PSCRanker
from permsc_integrations.results import RankingResult
from permsc_integrations.run.bridge import run_sync

from .llm_backend import LlamaIndexLLMBackend, llm_event
from .prompts import to_core_prompt

__all__ = ["PSCRerank", "DEFAULT_TOP_N"]

dispatcher = get_dispatcher(__name__)

PROMPT_KEY = "rerank_prompt"
# what the core ranker is built from: setting one is validated and rebuilds it
_RANKER_FIELDS = frozenset(RankingOptions.names()) | {"backend", "llm", "top_n", "rerank_prompt"}
DEFAULT_TOP_N = 5  # as LlamaIndex's RankGPTRerank
PSC_KEY, RETRIEVAL_KEY = "psc", "retrieval_score"

_Options: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "PSCOptions",
    __config__=ConfigDict(arbitrary_types_allowed=True),
    **RankingOptions.pydantic_fields(),
)


class PSCRerank(_Options, BaseNodePostprocessor, PromptMixin):  # type: ignore[misc, valid-type]
    """Rerank nodes by permutation self-consistency (see the module docstring).

    Returned nodes are new ``NodeWithScore`` objects (their nodes shallow copies with their
    own metadata), best first, scored ``(n - rank) / n`` from the consensus; ``top_n`` of them
    (5 by default; ``None``: all), and the core's ``top_k`` defaults to ``top_n`` so the nodes
    returned are the settled ones. Each carries ``metadata["psc"]`` (rank, confidence, samples,
    failed, usage) and, with ``keep_retrieval_score``, the retriever's score as
    ``metadata["retrieval_score"]``; both are kept out of the text sent to the LLM and the
    embedder.
    """

    backend: Any = Field(default=None, description="Core spec string or backend object.")
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
    _one: OneRanker = PrivateAttr(default_factory=OneRanker)

    def __init__(self, backend: Any = None, **fields: Any) -> None:
        refuse_unknown(fields, type(self).model_fields)
        if isinstance(backend, LLM):  # an LLM given as the backend is the llm
            backend, fields["llm"] = None, backend
        if backend is None and fields.get("llm") is None:
            fields["llm"] = _settings_llm()
        super().__init__(backend=backend, **fields)  # type: ignore[call-arg]
        self._check()
        if not self.model_name:
            self.model_name = self._backend().name

    @classmethod
    def class_name(cls) -> str:
        return "PSCRerank"

    def _check(self) -> RankingOptions:
        """The options these fields describe; raises the library's typed error if bad."""
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
        check_backend(self.backend if self.llm is None else self.llm, self.backend_options)
        values = {n: getattr(self, n) for n in RankingOptions.names()}
        if self.rerank_prompt is not None:
            values["prompt"] = to_core_prompt(self.rerank_prompt, max_words=self.max_words)
        values["top_k"] = self.top_k if self.top_k is not None else self.top_n
        return checked_options(values)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _RANKER_FIELDS:
            refuse_unknown_attribute(self, name, type(self).model_fields)
            super().__setattr__(name, value)
            return
        changes = {name: value}
        if name in ("backend", "llm") and value is not None:  # one model at a time
            is_llm = isinstance(value, LLM)
            changes = {"llm": value, "backend": None} if is_llm else {"backend": value, "llm": None}
        old = {k: getattr(self, k) for k in changes}
        for key, new in changes.items():
            super().__setattr__(key, new)
        try:
            self._check()
        except Exception:
            for key, previous in old.items():
                super().__setattr__(key, previous)
            raise
        self._one.reset()
        if name in ("backend", "llm", "backend_options"):
            self.model_name = self._backend().name

    def __repr_args__(self) -> Any:
        return repr_args(self, type(self).model_fields)

    @field_serializer("backend_options", check_fields=False)
    def _public_backend_options(self, value: Mapping[str, Any]) -> dict[str, Any]:
        return public_backend_options(value)

    @field_serializer("backend")
    def _spec_only(self, value: Any) -> str | None:
        """A spec string round-trips through to_dict/from_dict; an object does not."""
        return value if isinstance(value, str) else None

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        shared = {"backend", "llm", "callback_manager"}  # models are configuration, shared
        data = {
            n: getattr(self, n) if n in shared else copy.deepcopy(getattr(self, n), memo)
            for n in type(self).model_fields
        }
        return type(self)(**data)

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
        return self.backend  # type: ignore[no-any-return]

    def _build(self) -> PSCRanker:
        options = self._check()
        backend = self._backend()
        if isinstance(self.backend, str):
            if not isinstance(backend, BatchBackend):
                backend = traced(backend, llm_event(lambda: self.callback_manager))
            self._one.own(backend)
            options = options.replace(backend_options={})
        return PSCRanker(backend, options=options)

    def core_ranker(self) -> PSCRanker:
        """The core ranker these settings describe (built on first use, shared by all)."""
        return self._one.get(self._build)

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
        payload: dict[str, Any] = {
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

    async def aclose(self) -> None:
        """Close what this object built from a spec string."""
        await self._one.aclose()

    def close(self) -> None:
        """Sync :meth:`aclose` (through the library's bridge)."""
        run_sync(self.aclose)


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
    common = {
        "confidence": result.confidence,
        "samples": len(result.samples),
        "failed": len(result.failures),
        "usage": usage_dict(result),
    }
    out = []
    for rank, i in enumerate(order, start=1):
        extra: dict[str, Any] = {PSC_KEY: {"rank": rank, **copy.deepcopy(common)}}
        if keep_score:
            extra[RETRIEVAL_KEY] = nodes[i].score
        out.append(NodeWithScore(node=_with_metadata(nodes[i].node, extra), score=result.scores[i]))
    return out


def _with_metadata(node: Any, extra: dict[str, Any]) -> Any:
    """A shallow copy of ``node`` with ``extra`` metadata, kept from the LLM and the embedder."""
    copied = node.model_copy()
    copied.metadata = {**copy.deepcopy(node.metadata), **extra}
    for attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        keys = list(getattr(node, attr, []) or [])
        setattr(copied, attr, keys + [k for k in extra if k not in keys])
    return copied
