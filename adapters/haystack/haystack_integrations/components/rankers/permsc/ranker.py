"""``PSCRanker``: permutation self-consistency reranking as a Haystack component.

The ranking model sees the documents in ``num_permutations`` shuffled orders (the calls run
concurrently); the answers are aggregated into one central ranking (Kemeny by default) whose
rank scores replace the retriever's. All PSC logic is the core's
(:class:`permsc_integrations.PSCRanker`); this component adapts documents, serialisation and
Haystack's component contract.

The model is ``chat_generator=`` (any Haystack chat generator: the one your pipeline already
configured) or ``backend=`` (a core spec string such as ``"openai:gpt-4o-mini"``, or a core
backend object). Every ranking option of the core is an init parameter with the core's name,
default and validation (docs/options.md); an unknown one is refused with the closest names.

Example (a chat generator or ``backend="openai:gpt-4o-mini"`` ranks for real):
    >>> from haystack import Document
    >>> from permsc_integrations.testing import ScriptedBackend, oracle_responder
    >>> model = ScriptedBackend(oracle_responder(lambda text: text.count("goldfish")))
    >>> ranker = PSCRanker(backend=model, num_permutations=3, top_k=1)
    >>> docs = [Document(content="cats", id="a"), Document(content="goldfish goldfish", id="b")]
    >>> best = ranker.run(query="goldfish?", documents=docs)["documents"]
    >>> best[0].id, best[0].score, best[0].meta["psc"]["rank"]
    ('b', 1.0, 1)
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import typing
from collections.abc import Callable, Sequence
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.generators.chat.types import ChatGenerator
from haystack.core.serialization import component_to_dict
from haystack.utils import deserialize_chatgenerator_inplace

from permsc_integrations import PSCRanker as CoreRanker
from permsc_integrations import RankingOptions
from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends.base import Backend
from permsc_integrations.errors import ConfigurationError, PermscError
from permsc_integrations.integration import (
    OneRanker,
    RankingKeywords,
    check_backend,
    checked_options,
    psc_metadata,
    run_sync,
)
from permsc_integrations.results import RankingResult

from ._serialization import options_from_dict, options_to_dict, resolved_backend_options
from .chat_backend import HaystackChatBackend

if typing.TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["PSCRanker", "META_KEY"]

logger = logging.getLogger(__name__)

META_KEY = "psc"
"""The key of PSC's extras in each returned ``Document.meta`` (docs/integrations/haystack.md)."""

_OWN = ("chat_generator", "backend", "raise_on_failure")


@component
class PSCRanker:
    """Rank documents for a query by permutation self-consistency (module docstring).

    ``run(query, documents, top_k=None)`` returns ``{"documents": [...]}`` best first: copies
    of the input documents (same ``id``, ``content`` and ``meta``), ``Document.score`` the
    rank score ``(n - rank) / n`` (1.0 for the best; docs/scores.md) and ``meta["psc"]``
    holding ``rank``, ``confidence``, ``samples``, ``failed``, ``usage``, ``head``, ``stopped``
    and, when the ranking has a k, the document's ``top_probability``. ``top_k`` (init: the
    core's option, which also settles those positions; run: a cut of the list returned)
    returns that many; None: all. ``raise_on_failure=False`` returns a failed ranking's
    documents in their input order, their scores as given, marked ``meta["psc"]["fallback"]``.
    """

    def __init__(
        self,
        *,
        chat_generator: ChatGenerator | None = None,
        backend: str | Backend | None = None,
        raise_on_failure: bool = True,
        **options: Unpack[RankingKeywords],
    ) -> None:
        if (chat_generator is None) == (backend is None):
            raise ConfigurationError(
                "PSCRanker needs one model: chat_generator= (any Haystack chat generator, e.g. "
                "OpenAIChatGenerator(...)) or backend= ('openai:gpt-4o-mini'), not both"
            )
        if backend is not None and not isinstance(backend, (str, Backend)):
            raise ConfigurationError(
                "backend must be a spec string like 'openai:gpt-4o-mini' or a core backend "
                f"object (a Haystack chat generator goes in chat_generator=); got "
                f"{type(backend).__name__}"
            )
        if not isinstance(raise_on_failure, bool):
            raise ConfigurationError(f"raise_on_failure must be a bool, got {raise_on_failure!r}")
        self.chat_generator = chat_generator
        self.backend = backend
        self.raise_on_failure = raise_on_failure
        self._given: dict[str, Any] = dict(options)
        self.options: RankingOptions = checked_options(self._given)
        check_backend(
            backend if backend is not None else chat_generator, self.options.backend_options
        )
        self._model = None if chat_generator is None else HaystackChatBackend(chat_generator)
        self._one = OneRanker()

    def _build(self) -> CoreRanker:
        meter = self._one.meter(self.options)  # the ranker cap's, kept across rebuilds
        if self._model is not None:
            return CoreRanker(self._model, options=self.options, meter=meter)
        if isinstance(self.backend, str):
            options = resolved_backend_options(self.options.backend_options)
            backend = resolve_backend(self.backend, **options)
            self._one.own(backend)
            core = self.options.replace(backend_options={})
            return CoreRanker(backend, options=core, meter=meter)
        assert self.backend is not None  # checked at construction
        return CoreRanker(self.backend, options=self.options, meter=meter)

    def core_ranker(self) -> CoreRanker:
        """The core ranker these settings describe (built on first use, shared by all)."""
        return self._one.get(self._build)

    def warm_up(self) -> None:
        """Build the core ranker and warm the chat generator up (its sync client)."""
        self.core_ranker()
        _call_if(_hook(self.chat_generator, "warm_up"))

    async def warm_up_async(self) -> None:
        """Build the core ranker and warm the chat generator up on the serving loop."""
        self.core_ranker()
        await _either(self.chat_generator, "warm_up_async", "warm_up")

    def close(self) -> None:
        """Release what the ranker built (a spec string's backend) and the generator's client."""
        run_sync(self._one.aclose)
        _call_if(_hook(self.chat_generator, "close"))

    async def close_async(self) -> None:
        """Async :meth:`close`: the generator's async client too."""
        await self._one.aclose()
        await _either(self.chat_generator, "close_async", "close")

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, documents: list[Document], top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """Rank ``documents`` for ``query``, best first (see the class docstring).

        :param query: the query the documents are ranked for (not empty).
        :param documents: the candidates, each with text ``content``; an empty list returns
            an empty list without a call.
        :param top_k: how many to return, for this call (default: the init's ``top_k``).
        :returns: ``{"documents": [...]}``, best first.
        """
        texts, cut = _checked(query, documents, top_k, self.options.top_k)
        if not texts:
            return {"documents": []}
        try:
            result = self.core_ranker().rank(query, texts)
        except PermscError as exc:
            return {"documents": self._fallback(documents, exc)}
        return {"documents": _ranked(documents, result, cut)}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, documents: list[Document], top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """Async :meth:`run`, natively: the model calls run on the caller's event loop."""
        texts, cut = _checked(query, documents, top_k, self.options.top_k)
        if not texts:
            return {"documents": []}
        try:
            result = await self.core_ranker().arank(query, texts)
        except PermscError as exc:
            return {"documents": self._fallback(documents, exc)}
        return {"documents": _ranked(documents, result, cut)}

    def _fallback(self, documents: list[Document], exc: PermscError) -> list[Document]:
        """A failed ranking: raise (the default), or the documents in their input order."""
        if self.raise_on_failure or isinstance(exc, ConfigurationError):
            raise exc
        logger.warning("PSCRanker: ranking failed, documents kept in their input order: %s", exc)
        mark = {"fallback": True, "error": f"{type(exc).__name__}: {exc}"}
        return [dataclasses.replace(d, meta={**d.meta, META_KEY: mark}) for d in documents]

    def to_dict(self) -> dict[str, Any]:
        """Serialise: the chat generator by Haystack's ``component_to_dict``, a spec string as
        is, the options given, secrets as ``Secret`` dicts (never their values)."""
        if self.backend is not None and not isinstance(self.backend, str):
            raise ConfigurationError(
                f"a backend object ({type(self.backend).__name__}) cannot be serialised: use "
                "chat_generator= or a spec string backend= to save the pipeline"
            )
        generator = None
        if self.chat_generator is not None:
            generator = component_to_dict(obj=self.chat_generator, name="chat_generator")
        return default_to_dict(
            self,
            chat_generator=generator,
            backend=self.backend,
            raise_on_failure=self.raise_on_failure,
            **options_to_dict(self._given),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PSCRanker:
        """Deserialise what :meth:`to_dict` wrote (also through ``Pipeline.loads``)."""
        params = options_from_dict(data.get("init_parameters", {}))
        if params.get("chat_generator"):
            deserialize_chatgenerator_inplace(params, key="chat_generator")
        return default_from_dict(cls, {**data, "init_parameters": params})  # type: ignore[no-any-return]


def _init_signature() -> inspect.Signature:
    """``__init__``'s signature with every option as a keyword (the declaration's default and
    typed statement): Haystack's loader and ``inspect`` see each name, declared once."""
    own = inspect.signature(PSCRanker.__init__).parameters
    hints = typing.get_type_hints(RankingKeywords)
    options = [
        inspect.Parameter(
            info.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=info.default,
            annotation=hints[info.name],
        )
        for info in RankingOptions.describe()
    ]
    kept = [p for name, p in own.items() if name in ("self", *_OWN)]
    return inspect.Signature([*kept, *options])


PSCRanker.__init__.__signature__ = _init_signature()  # type: ignore[attr-defined]


def _hook(generator: object, name: str) -> Callable[[], Any] | None:
    """The generator's optional lifecycle method ``name`` (Haystack's warm_up/close family)."""
    method = getattr(generator, name, None)
    return method if callable(method) else None


def _call_if(method: Callable[[], Any] | None) -> None:
    if method is not None:
        method()


async def _either(generator: object, native: str, blocking: str) -> None:
    """The generator's async ``native`` hook where it has one, else its sync ``blocking``."""
    method = _hook(generator, native)
    if method is not None:
        await method()
    else:
        _call_if(_hook(generator, blocking))


def _checked(
    query: Any, documents: Any, top_k: Any, default: int | None
) -> tuple[list[str], int | None]:
    """The documents' texts and how many to return; bad input refused with the fix."""
    if not isinstance(query, str) or not query.strip():
        raise ConfigurationError(
            f"PSCRanker needs a query (a non-empty string), got {query!r}: connect one to "
            "the ranker's 'query' input or pass run(query=...)"
        )
    if not isinstance(documents, Sequence) or isinstance(documents, str):
        raise ConfigurationError(
            f"documents must be a list of Haystack Documents, got {type(documents).__name__}"
        )
    wrong = [type(d).__name__ for d in documents if not isinstance(d, Document)]
    if wrong:
        raise ConfigurationError(f"documents must be Haystack Documents, got {sorted(set(wrong))}")
    empty = [d.id for d in documents if not isinstance(d.content, str) or not d.content.strip()]
    if empty:
        raise ConfigurationError(
            f"documents {empty[:5]} have no text content; PSCRanker ranks text: give them "
            "content or drop them before the ranker"
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ConfigurationError(f"top_k must be an int >= 1 or None, got {top_k!r}")
    return [d.content or "" for d in documents], top_k if top_k is not None else default


def _ranked(documents: list[Document], result: RankingResult, top_k: int | None) -> list[Document]:
    order = result.order if top_k is None else result.order[:top_k]
    return [
        dataclasses.replace(
            documents[i],
            score=result.scores[i],
            meta={**documents[i].meta, META_KEY: psc_metadata(result, i, rank)},
        )
        for rank, i in enumerate(order, start=1)
    ]
