"""An OpenAI-compatible chat-completions server on 127.0.0.1 that answers from a Backend.

:class:`BackendOpenAIServer` is :class:`ScriptedOpenAIServer` (its HTTP machinery, records
and counters) with a responder that asks a core
:class:`~permsc_integrations.backends.base.Backend`: the embedded model, or a
:class:`~._answer_store.StoredBackend` in front of it, so that any OpenAI client (the
``openai:`` backend of ``PSCRanker``, LiteLLM at ``OPENAI_BASE_URL``) gets that model's
answers. Decoding is greedy whatever the request asks (temperature 0; ``max_tokens`` capped
at ``max_tokens``), and the usage is the backend's own token counts. Requests that arrive
together are answered as one batch when the backend has ``acomplete_batch`` (at most
``batch_size`` a batch; one batch at a time, since one model runs one batch at a time).

Example:
    >>> from openai import OpenAI
    >>> from permsc_integrations.testing import ScriptedBackend
    >>> with BackendOpenAIServer(ScriptedBackend(lambda r: "[2] > [1]")) as server:
    ...     client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    ...     answer = client.chat.completions.create(
    ...         model="any", messages=[{"role": "user", "content": "rank"}])
    ...     client.close()
    >>> answer.choices[0].message.content, answer.usage.completion_tokens
    ('[2] > [1]', 3)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from permsc_integrations.backends.base import (
    Backend,
    BatchBackend,
    Completion,
    GenerationSettings,
    Message,
)
from permsc_integrations.errors import BackendError
from permsc_integrations.testing._answer_store import AnswerMissingError
from permsc_integrations.testing._responders import ChatRequest, Fault, Reply
from permsc_integrations.testing._server import ScriptedOpenAIServer

__all__ = ["BackendOpenAIServer"]


@dataclass
class _Waiting:
    messages: Sequence[Message]
    settings: GenerationSettings
    answer: asyncio.Future[Completion]


class _Batcher:
    """Collects the requests that arrive while the model is busy into its next batch."""

    def __init__(self, backend: Backend, size: int, wait: float) -> None:
        self.backend, self.size, self.wait = backend, size, wait
        self.pending: list[_Waiting] = []
        self._task: asyncio.Task[None] | None = None

    async def ask(self, messages: Sequence[Message], settings: GenerationSettings) -> Completion:
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self.pending.append(_Waiting(messages, settings, future))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        await asyncio.sleep(self.wait)  # let the requests sent together arrive together
        while self.pending:
            first = self.pending[0].settings
            same = [w for w in self.pending if w.settings == first][: self.size]
            self.pending = [w for w in self.pending if w not in same]
            await self._run(same)

    async def _run(self, batch: list[_Waiting]) -> None:
        prompts = [w.messages for w in batch]
        try:
            if isinstance(self.backend, BatchBackend) and len(batch) > 1:
                answers = await self.backend.acomplete_batch(prompts, batch[0].settings)
            else:
                answers = [await self.backend.acomplete(p, batch[0].settings) for p in prompts]
        except Exception as exc:  # every waiting request gets the backend's error
            for w in batch:
                if not w.answer.done():
                    w.answer.set_exception(exc)
            return
        for w, answer in zip(batch, answers, strict=True):
            if not w.answer.done():
                w.answer.set_result(answer)


class BackendOpenAIServer(ScriptedOpenAIServer):
    """An OpenAI-compatible server answering every request from ``backend``, greedily.

    ``model``: the name ``/v1/models`` lists (default: the backend's name); ``max_tokens``:
    the answer cap (a request's own ``max_tokens`` below it is kept); ``latency``: seconds
    each answer waits before it is sent (a replay's stand-in for the model's time, so that
    concurrent calls overlap as they did). A backend error is answered as an HTTP error: a
    missing stored answer 400 (``code: "answer_missing"``, not retried), a retryable error
    503, any other 500.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        model: str | None = None,
        max_tokens: int = 256,
        batch_size: int = 8,
        batch_wait: float = 0.05,
        latency: float = 0.0,
    ) -> None:
        super().__init__(self._respond, model=model or backend.name, logprobs=False)
        self.backend, self.max_tokens, self.latency = backend, max_tokens, latency
        self._batcher = _Batcher(backend, batch_size, batch_wait)

    def reset(self) -> None:
        """Forget recorded requests and their token counts (``usage``: request index to
        prompt + completion tokens)."""
        super().reset()
        self.usage: dict[int, int] = {}

    def settings(self, request: ChatRequest) -> GenerationSettings:
        """The greedy decoding settings a request is answered with."""
        asked = request.max_tokens
        cap = self.max_tokens if not isinstance(asked, int) else min(asked, self.max_tokens)
        stop = request.body.get("stop")
        stops = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop or ())  # type: ignore[attr-defined]
        return GenerationSettings(temperature=0.0, max_tokens=cap, timeout=None, stop=stops)

    async def _respond(self, request: ChatRequest) -> Reply | Fault:
        messages = [
            {"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
            for m in request.messages
        ]
        try:
            answer = await self._batcher.ask(messages, self.settings(request))
        except AnswerMissingError as exc:
            return Fault.status(400, message=str(exc), code="answer_missing")
        except BackendError as exc:
            return Fault.status(503 if exc.retryable else 500, message=str(exc))
        usage = {
            "prompt_tokens": answer.usage.prompt_tokens,
            "completion_tokens": answer.usage.completion_tokens,
            "total_tokens": answer.usage.total_tokens,
        }
        self.usage[request.index] = answer.usage.total_tokens
        reason = answer.finish_reason or "stop"
        return Reply(answer.text, delay=self.latency, finish_reason=reason, fields={"usage": usage})
