"""A real OpenAI-compatible HTTP server on 127.0.0.1, scripted per request, for tests.

:class:`ScriptedOpenAIServer` runs a starlette app under uvicorn in a background thread and
serves ``POST /v1/chat/completions`` (non-streaming, OpenAI's schema, with usage) and
``GET /v1/models``. A *responder* decides every answer: it receives the parsed
:class:`ChatRequest` and returns text, a :class:`Reply` (text after a delay) or a
:class:`Fault` (an HTTP error, a dropped connection). Every request is recorded, with
timestamps and the peak number in flight, so tests can assert concurrency and retries.
Needs the ``testing`` extra (uvicorn, starlette): ``pip install 'permsc-integrations[testing]'``.
:class:`ScriptedBackend` plays the same responders in process (no HTTP, no extra), for tests
of everything above the backend. :class:`SimulatedJudge` is a model to test a pipeline with
offline: documents with hidden relevance, answers with noise, position bias and echo, in
RankGPT's, setwise's and pairwise's formats, over either transport (docs/judge.md).
:class:`BackendOpenAIServer` serves a real backend (the embedded model) the same way, and
:class:`AnswerStore` / :class:`StoredBackend` keep its answers in a fingerprint-keyed file to
replay a run without the model (benchmarks/real_answers.py).

Example:
    >>> from openai import OpenAI
    >>> with ScriptedOpenAIServer(lambda request: "[2] > [1]") as server:
    ...     client = OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    ...     answer = client.chat.completions.create(
    ...         model="m", messages=[{"role": "user", "content": "rank"}])
    ...     client.close()
    >>> answer.choices[0].message.content, server.request_count
    ('[2] > [1]', 1)
"""

from typing import TYPE_CHECKING

from permsc_integrations._registry import publish
from permsc_integrations.testing._answer_store import (
    AnswerMissingError,
    AnswerStore,
    StoredBackend,
    fingerprint,
)
from permsc_integrations.testing._backend import ScriptedBackend
from permsc_integrations.testing._backend_server import BackendOpenAIServer
from permsc_integrations.testing._judge import REGIMES, JudgeParams, SimulatedJudge
from permsc_integrations.testing._judge_prompts import hidden_keys
from permsc_integrations.testing._responders import (
    ChatRequest,
    Fault,
    Reply,
    best_first,
    first_token_responder,
    grade,
    noisy_responder,
    oracle_responder,
    sequence,
)
from permsc_integrations.testing._server import ScriptedOpenAIServer

if TYPE_CHECKING:
    from permsc_integrations.testing._spans import recording_spans

__all__ = [
    "ScriptedOpenAIServer",
    "ScriptedBackend",
    "ChatRequest",
    "Reply",
    "Fault",
    "sequence",
    "oracle_responder",
    "noisy_responder",
    "first_token_responder",
    "grade",
    "best_first",
    "SimulatedJudge",
    "JudgeParams",
    "REGIMES",
    "hidden_keys",
    "recording_spans",
    "BackendOpenAIServer",
    "AnswerStore",
    "StoredBackend",
    "AnswerMissingError",
    "fingerprint",
]

publish(__name__, *(globals()[name] for name in __all__ if name in globals()))


def __getattr__(name: str) -> object:
    if name == "recording_spans":
        # lazy: the OpenTelemetry SDK loads only for the tests that record spans
        from permsc_integrations.testing._spans import recording_spans

        return recording_spans
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
