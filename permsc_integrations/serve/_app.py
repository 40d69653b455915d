"""The ASGI app: routes, the rerank handler, auth, limits, disconnects and metrics.

Every model name maps to one :class:`~permsc_integrations.PSCRanker`; all requests for it
share its cap on upstream calls (``max_concurrency``), and each client key may have at most
``limits.key_concurrency`` requests being ranked at once (the rest wait their turn), so one
client cannot fill the cap alone. A client that disconnects cancels its ranking, and with it
every upstream call still in flight. Empty documents are ranked last, score 0, without a call.
A server without client keys answers only what a web page cannot send it (:mod:`._browsers`).

Example:
    >>> from permsc_integrations.serve import ModelConfig, ServeConfig
    >>> model = ModelConfig("psc", "openai:m", base_url="http://127.0.0.1:8000/v1")
    >>> app = create_app(ServeConfig(models=(model,)))
    >>> sorted({route.path for route in app.routes})[:3]
    ['/health', '/metrics', '/openapi.json']
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypedDict

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from permsc_integrations import __version__
from permsc_integrations._registry import publish
from permsc_integrations.results import RankingResult
from permsc_integrations.serve._auth import KeyRing, Unauthorized
from permsc_integrations.serve._bodies import read_body
from permsc_integrations.serve._browsers import browser_middleware
from permsc_integrations.serve._config import ServeConfig
from permsc_integrations.serve._connections import SLOW_BODY, Tally
from permsc_integrations.serve._errors import HttpError, http_error
from permsc_integrations.serve._metrics import ServeMetrics
from permsc_integrations.serve._openapi import RERANK_PATHS, openapi_document
from permsc_integrations.serve._schemas import (
    BadRequest,
    RerankRequest,
    parse_rerank,
    request_model,
)
from permsc_integrations.serve._scoring import SCALES, cut_words, score_documents
from permsc_integrations.serve._slots import Busy, KeySlots

if TYPE_CHECKING:  # built by ServeConfig's models
    from permsc_integrations._ranker.ranker import PSCRanker

__all__ = ["create_app"]

logger = logging.getLogger("permsc_integrations.serve")
_GONE = "499"  # the client closed the connection before the answer (nginx's convention)


class _Outcome(TypedDict, total=False):
    """A ranking's outcome (:func:`_rank`): its result or its error, and the documents it
    ranked; neither when the client left or the server is stopping."""

    kept: list[int]
    result: RankingResult
    error: Exception


def _text(body: bytes, media_type: str) -> Response:
    return Response(body, media_type=media_type)


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status, headers=headers)


class _Service:
    """The state behind the routes (built once per app)."""

    def __init__(self, config: ServeConfig, rankers: Mapping[str, PSCRanker]) -> None:
        self.config, self.rankers = config, dict(rankers)
        self.scales = {m.name: SCALES[m.relevance_score] for m in config.models}
        self.keys = KeyRing(config.keys)
        self.metrics = ServeMetrics()
        self.slow = Tally(on_count=self.metrics.slow_client)  # one log line per 10 s at most
        limits = config.limits
        self.slots = KeySlots(limits.key_concurrency, limits.queue, limits.queue_timeout)
        self.request_model = request_model(config.limits.max_documents)
        self.secrets = config.secrets
        self.stopping = False  # the grace period is over: rankings are cancelled, 503
        self.rankings: set[anyio.CancelScope] = set()

    def stop_rankings(self) -> None:
        """Cancel every ranking still running; each is answered 503 (the grace period
        after SIGTERM is over)."""
        self.stopping = True
        for scope in list(self.rankings):
            scope.cancel()

    def gone(self, route: str, model: str) -> Response:
        """The answer nobody reads: the client closed its connection during its ranking."""
        self.metrics.requests.labels(route=route, model=model, status=_GONE).inc()
        logger.info("%s %s: client disconnected; its upstream calls were cancelled", route, model)
        return Response(status_code=499)

    def fail(self, route: str, model: str, error: HttpError, log: bool = True) -> JSONResponse:
        """The error answer, counted, and logged in one line (``log``)."""
        error = error.redacted(self.secrets)
        self.metrics.requests.labels(route=route, model=model, status=str(error.status)).inc()
        if log:
            say = logger.warning if error.status >= 500 else logger.info
            say("%s %s -> %d: %s", route, model or "-", error.status, error.message)
        return _error(error.status, error.message, dict(error.headers))

    def authorize(self, request: Request) -> str:
        return self.keys.identify(request.headers.get("authorization"))

    def check(self, req: RerankRequest) -> PSCRanker:
        """The ranker for ``req.model``, after the limits; :class:`BadRequest` if not."""
        ranker = self.rankers.get(req.model)
        if ranker is None:
            known = ", ".join(self.rankers)
            raise BadRequest(f"unknown model {req.model!r}; this server serves: {known}", 404)
        limits = self.config.limits
        if not req.query.strip():
            raise BadRequest("query: must not be empty")
        if len(req.query) > limits.max_query_chars:
            raise BadRequest(f"query: longer than the limit of {limits.max_query_chars} characters")
        if len(req.documents) > limits.max_documents:
            raise BadRequest(
                f"documents: {len(req.documents)} given, the limit is {limits.max_documents}"
            )
        return ranker

    def answer(
        self,
        route: str,
        req: RerankRequest,
        texts: list[str],
        ranker: PSCRanker,
        outcome: _Outcome,
        s: float,
    ) -> Response:
        """The HTTP answer for a ranking's outcome (see :func:`_rank`), counted."""
        model = req.model
        if "result" in outcome:
            self.metrics.count_usage(model, outcome["result"].usage)
            self.metrics.latency.labels(model=model).observe(s)
            self.metrics.requests.labels(route=route, model=model, status="200").inc()
            scale = self.scales.get(model, SCALES["win_share"])
            return JSONResponse(_answer(req, texts, outcome["result"], outcome["kept"], scale))
        if "error" in outcome:
            failure = outcome["error"]
            self.metrics.count_usage(model, getattr(failure, "usage", None))
            error = http_error(failure, ranker.backend.name)
            if error.status == 500:  # not the caller's, nor the upstream's: ours
                logger.error("%s %s: unexpected error %r", route, model, failure, exc_info=failure)
            return self.fail(route, model, error)
        if self.stopping:
            message = "the server is shutting down and could not finish this request; retry it"
            return self.fail(route, model, HttpError(503, message, (("retry-after", "1"),)))
        return self.gone(route, model)


async def _until_disconnect(request: Request, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` when the client goes away (uvicorn's ``http.disconnect``)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def _rank(
    service: _Service, request: Request, ranker: PSCRanker, query: str, texts: list[str]
) -> _Outcome:
    """``{"result": ..., "kept": ...}`` (the ranking of the non-empty documents, ``kept``),
    ``{"error": exc}``, or ``{}`` when the client disconnected or the server is stopping."""
    kept = [k for k, text in enumerate(texts) if text.strip()]
    outcome: _Outcome = {"kept": kept}
    if len(kept) < 2:  # nothing to compare: no call
        outcome["result"] = RankingResult(
            tuple(range(len(kept))), (1.0,) * len(kept), head=len(kept)
        )
        return outcome
    if service.stopping:  # the grace period is over: no ranking starts
        return outcome
    tg = anyio.create_task_group()
    service.rankings.add(tg.cancel_scope)  # cancelled by stop_rankings
    try:
        async with tg:

            async def work() -> None:
                try:
                    outcome["result"] = await ranker.arank(query, [texts[k] for k in kept])
                except Exception as exc:  # answered as an HTTP error by the caller
                    outcome["error"] = exc
                tg.cancel_scope.cancel()

            tg.start_soon(_until_disconnect, request, tg.cancel_scope)
            tg.start_soon(work)
    finally:
        service.rankings.discard(tg.cancel_scope)
    return outcome


def _answer(
    req: RerankRequest,
    texts: list[str],
    result: RankingResult,
    kept: list[int],
    scale: Callable[[RankingResult], tuple[float, ...]],
) -> dict[str, object]:
    """Cohere's answer: ``result`` ranks the documents ``kept`` (the non-empty ones), each
    scored on the model's ``scale``; the empty ones follow, score 0, in the order sent. Each
    result says whether the model saw it (``shown``); ``meta`` adds the ranking's ``head``
    and ``stopped``, and a warning when some documents were never shown (docs/serve.md)."""
    documents = score_documents(result, kept, len(texts), scale)
    results = []
    for doc in documents if req.top_n is None else documents[: req.top_n]:
        item: dict[str, object] = {
            "index": doc.index,
            "relevance_score": doc.relevance_score,
            "shown": doc.shown,
        }
        if req.return_documents:
            item["document"] = {"text": req.texts[doc.index]}
        results.append(item)
    u = result.usage
    unseen = sum(not doc.shown for doc in documents)
    return {
        "id": f"permsc-{uuid.uuid4().hex}",
        "model": req.model,
        "results": results,
        "meta": _meta(result, len(texts), unseen),
        "usage": {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens,
            "upstream_calls": u.calls,
        },
    }


def _meta(result: RankingResult, n: int, unseen: int) -> dict[str, object]:
    """Cohere's ``meta``, with ``head``, ``stopped`` and warnings: ``unseen`` of the ``n``
    documents never shown, many answers degenerate (``RankingResult.degenerate_note``)."""
    u = result.usage
    meta: dict[str, object] = {
        "api_version": {"version": "2", "is_experimental": False},
        "billed_units": {
            "search_units": math.ceil(n / 100),
            "input_tokens": u.prompt_tokens,
            "output_tokens": u.completion_tokens,
        },
        "tokens": {"input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens},
        "head": result.head,
        "stopped": result.stopped,
    }
    unseen_note = (
        f"{unseen} of {n} documents were never shown to the model (blank ones, and those past "
        "meta.head under a call budget): they follow in the order sent, with shown false"
    )
    notes = (unseen_note if unseen else None, result.degenerate_note)
    if any(notes):
        meta["warnings"] = [note for note in notes if note]
    return meta


async def rerank(service: _Service, request: Request) -> Response:
    """``POST /v2/rerank``: admit, rank under the caller's key cap, answer."""
    route, model = request.url.path, ""
    try:
        key_id = service.authorize(request)
        req = parse_rerank(await read_body(request, service.config.limits), service.request_model)
        model = req.model
        ranker = service.check(req)
    except Unauthorized as exc:
        return service.fail(route, model, HttpError(401, str(exc)))
    except BadRequest as exc:  # after a 413 or 408 the connection closes: the rest is not read
        close = (("connection", "close"),) if exc.status in (408, 413) else ()
        error = HttpError(exc.status, str(exc), close)
        if exc.status == 408:  # a slow client: summed up in the slow clients' log line
            service.slow.count(SLOW_BODY)
        return service.fail(route, model if exc.status != 404 else "", error, exc.status != 408)
    except ClientDisconnect:  # left before its request was read (or closed to make room)
        service.metrics.requests.labels(route=route, model=model, status=_GONE).inc()
        return Response(status_code=499)
    texts = [cut_words(t, req.max_tokens_per_doc) for t in req.texts]
    started = time.perf_counter()
    try:
        async with service.slots.turn(key_id, service.metrics.waiting.track_inprogress()):
            with service.metrics.in_flight.track_inprogress():
                outcome = await _rank(service, request, ranker, req.query, texts)
    except Busy as busy:  # the key's queue is full, or its wait too long
        return service.fail(route, model, busy.error)
    return service.answer(route, req, texts, ranker, outcome, time.perf_counter() - started)


def _routes(service: _Service) -> list[Route]:
    def guarded(route: str, make: Callable[[], Response]) -> Route:
        """A GET route that needs a key when keys are set; its answers are counted."""

        async def handler(request: Request) -> Response:
            try:
                service.authorize(request)
            except Unauthorized as exc:
                return service.fail(route, "", HttpError(401, str(exc)))
            response: Response = make()
            labels = {"route": route, "model": "", "status": str(response.status_code)}
            service.metrics.requests.labels(**labels).inc()
            return response

        return Route(route, handler, methods=["GET"])

    async def post(request: Request) -> Response:
        return await rerank(service, request)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    document = openapi_document(tuple(service.rankers), __version__, service.request_model)

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    cards = [
        {"id": n, "object": "model", "created": 0, "owned_by": "permsc"} for n in service.rankers
    ]
    return [
        *(Route(path, post, methods=["POST"]) for path in RERANK_PATHS),
        guarded("/v1/models", lambda: JSONResponse({"object": "list", "data": cards})),
        guarded("/metrics", lambda: _text(*service.metrics.render())),
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return _error(405, f"method {request.method} not allowed on {request.url.path}")
    return _error(exc.status_code, f"no such endpoint: {request.url.path}")


async def _internal(request: Request, exc: Exception) -> Response:
    logger.exception("unexpected error on %s", request.url.path, exc_info=exc)
    return _error(500, f"internal error ({type(exc).__name__}); see the server's log")


def create_app(config: ServeConfig, rankers: Mapping[str, PSCRanker] | None = None) -> Starlette:
    """The app for ``config``; each model's ranker is built now (or taken from ``rankers``,
    by name) and closed when the app shuts down (only those built here)."""
    owned = {m.name: m.build() for m in config.models if not rankers or m.name not in rankers}
    service = _Service(config, {**owned, **(rankers or {})})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for ranker in owned.values():
                await ranker.aclose()

    app = Starlette(
        routes=_routes(service),
        middleware=browser_middleware(config, service.fail),
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal},
    )
    app.state.service = service
    return app


publish("permsc_integrations.serve", create_app)
