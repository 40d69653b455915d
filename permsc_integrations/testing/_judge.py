"""A simulated LLM judge: test a ranking pipeline offline, with known relevance.

:class:`SimulatedJudge` answers ranking prompts (RankGPT's ``[3] > [1] > ...``, setwise's and
pairwise's ``Passage B``, first-token letters) the way a real model errs, from the hidden
relevance of the documents it is shown. Register each document with
:meth:`~SimulatedJudge.document` (its text comes back with an invisible marker the judge
reads), rank the marked texts with any pipeline, through the real loopback server
(:meth:`~SimulatedJudge.serve`: an OpenAI-compatible endpoint for the ``openai`` SDK,
LiteLLM, LangChain...) or in process (:meth:`~SimulatedJudge.backend`), and score the result
against the grades you gave.

For the prompt's documents in positions ``p = 0..w-1`` the judge draws a score per document
``gain * grade + error(doc) + bias(p, w) + noise * N(0, 1)`` and answers best score first:

- ``noise``: fresh for every prompt, so shuffling and voting average it away;
- ``doc_error``: a persistent error per document (seeded), the same in every prompt: no
  shuffle removes it, so even infinite votes disagree with the grades;
- ``bias``: U-shaped in the relative position (``primacy`` at the first, ``recency`` at the
  last, least in the middle, "lost in the middle"; ``curve`` sets how fast it falls);
- ``echo``: the chance that an answer merely copies the order shown;
- ``window_noise``: how the noise grows with the prompt's length, as real models' does: its
  scale is ``noise * (w / 10) ** window_noise`` for ``w`` documents shown (0: the same at
  every length).

Answers are seeded by the judge's ``seed`` and the prompt's text: one prompt always gets the
same answer, in any order and from any client. The judge counts calls, prompt and completion
tokens and *sequential rounds*: a logical clock gives each call the round after the latest
round answered before it arrived, so calls sent together share a round and a call sent after
an answer is one round later (a client cannot look more parallel than it is).

Example:
    >>> judge = SimulatedJudge(JudgeParams.regime("mild"), seed=1)
    >>> docs = [judge.document(t, g) for t, g in [("Cats purr.", 0), ("Goldfish grow.", 3)]]
    >>> messages = [{"role": "user", "content": f"[{i + 1}] {d}"} for i, d in enumerate(docs)]
    >>> judge.answer(messages)
    '[2] > [1]'
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import anyio

from permsc_integrations.testing._backend import ScriptedBackend
from permsc_integrations.testing._judge_prompts import answer, count_tokens, hide, read_prompt
from permsc_integrations.testing._responders import ChatRequest, Fault, Reply
from permsc_integrations.testing._server import ScriptedOpenAIServer

__all__ = ["JudgeParams", "JudgeStats", "SimulatedJudge", "REGIMES"]


@dataclass(frozen=True, slots=True)
class JudgeParams:
    """How the simulated model errs (module docstring); scores are in grade units.

    >>> JudgeParams.regime("noisy").echo
    0.3
    >>> JudgeParams.regime("mild").but(noise=1.0).noise  # vary one part of a regime
    1.0
    """

    gain: float = 1.0
    noise: float = 0.5
    doc_error: float = 0.2
    primacy: float = 0.3
    recency: float = 0.1
    curve: float = 2.0
    echo: float = 0.0
    window_noise: float = 0.0
    name: str = "custom"

    REGIMES: ClassVar[tuple[str, ...]] = ("mild", "position-biased", "noisy")

    def __post_init__(self) -> None:
        for name in ("gain", "noise", "doc_error", "curve", "window_noise"):
            if getattr(self, name) < 0:
                raise ValueError(f"JudgeParams.{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.echo <= 1:
            raise ValueError(f"JudgeParams.echo is a probability, got {self.echo}")

    @classmethod
    def regime(cls, name: str) -> JudgeParams:
        """A named regime: ``mild``, ``position-biased`` or ``noisy`` (a small model that
        also echoes the order it is shown)."""
        try:
            return REGIMES[name]
        except KeyError:
            raise ValueError(f"no judge regime {name!r}; known: {', '.join(REGIMES)}") from None

    def but(self, **changes: Any) -> JudgeParams:
        """This regime with some parameters changed (its name marks the change)."""
        label = ",".join(f"{k}={v}" for k, v in changes.items() if k != "name")
        return replace(self, **{"name": f"{self.name}[{label}]", **changes})

    def bias(self, position: int, shown: int) -> float:
        """The score bonus of prompt ``position`` (0-based) among ``shown`` documents.

        >>> p = JudgeParams(primacy=1.0, recency=0.5, curve=2.0)
        >>> [round(p.bias(i, 5), 3) for i in range(5)]
        [1.0, 0.594, 0.375, 0.344, 0.5]
        """
        x = position / (shown - 1) if shown > 1 else 0.0
        return self.primacy * (1 - x) ** self.curve + self.recency * x**self.curve


REGIMES: dict[str, JudgeParams] = {
    "mild": JudgeParams(noise=0.5, doc_error=0.15, primacy=0.3, recency=0.1, echo=0.0, name="mild"),
    "position-biased": JudgeParams(
        noise=0.6, doc_error=0.15, primacy=1.6, recency=0.8, echo=0.02, name="position-biased"
    ),
    "noisy": JudgeParams(
        noise=1.9, doc_error=0.25, primacy=0.8, recency=0.4, echo=0.3, name="noisy"
    ),
}


@dataclass(frozen=True, slots=True)
class JudgeStats:
    """What one group's prompts (or all of them) cost: calls, tokens, sequential rounds."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    rounds: int = 0


@dataclass(slots=True)
class _Ledger:
    """One group's counts and logical clock (``answered``: the latest round answered)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    rounds: int = 0
    answered: int = 0

    def stats(self) -> JudgeStats:
        return JudgeStats(self.calls, self.prompt_tokens, self.completion_tokens, self.rounds)


@dataclass(slots=True)
class _Docs:
    grades: list[float] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)


class SimulatedJudge:
    """An OpenAI-compatible simulated model with hidden relevance (module docstring).

    ``latency``: seconds each answer waits (in the event loop) before it goes out; calls sent
    together overlap in it, so they share a round even over HTTP.
    """

    def __init__(
        self, params: JudgeParams | None = None, *, seed: int = 0, latency: float = 0.01
    ) -> None:
        self.params = params or REGIMES["mild"]
        self.seed, self.latency = seed, latency
        self._docs = _Docs()
        self._lock = threading.Lock()
        self._ledgers: dict[str | None, _Ledger] = {}

    # documents -----------------------------------------------------------------------
    def document(self, text: str, grade: float, *, group: str = "") -> str:
        """Register a document of relevance ``grade`` (0-3, as TREC's) and return ``text``
        with its marker; ``group`` (e.g. the query's id) keeps its own counts."""
        with self._lock:
            key = len(self._docs.grades)
            self._docs.grades.append(float(grade))
            self._docs.groups.append(group)
            digest = hashlib.sha256(f"{self.seed}\x00doc\x00{key}".encode()).digest()
            self._docs.errors.append(random.Random(digest).gauss(0.0, 1.0))
        return hide(key, text)

    def documents(
        self, texts: Iterable[str], grades: Iterable[float], *, group: str = ""
    ) -> list[str]:
        """:meth:`document` for each text and grade."""
        return [self.document(t, g, group=group) for t, g in zip(texts, grades, strict=True)]

    def utility(self, key: int) -> float:
        """Document ``key``'s score without noise or bias: gain * grade + its own error."""
        p = self.params
        return p.gain * self._docs.grades[key] + p.doc_error * self._docs.errors[key]

    # answers -------------------------------------------------------------------------
    def judge(self, keys: Sequence[int], prompt: str) -> tuple[list[int], list[float]]:
        """The prompt positions best first and each position's score, for documents
        ``keys`` shown in that order in a prompt whose text is ``prompt`` (the seed)."""
        digest = hashlib.sha256(f"{self.seed}\x00{prompt}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        p, w = self.params, len(keys)
        echo = rng.random() < p.echo
        noise = p.noise * (w / 10) ** p.window_noise
        scores = [
            self.utility(k) + p.bias(i, w) + noise * rng.gauss(0.0, 1.0)
            for i, k in enumerate(keys)
        ]
        if echo:  # the order shown, as if it were the model's
            scores = [float(w - i) for i in range(w)]
        return sorted(range(w), key=lambda i: -scores[i]), scores

    def reply(self, messages: Iterable[Mapping[str, object]]) -> Reply | Fault:
        """The answer to ``messages`` (no counting): a Reply, or a 400 for a prompt that
        shows no registered document."""
        messages = list(messages)
        shown = read_prompt(messages)
        unknown = [s.key for s in shown if s.key >= len(self._docs.grades)]
        if not shown or unknown:
            what = f"unknown document keys {unknown}" if unknown else "no document markers"
            return Fault.status(400, message=f"simulated judge: {what} in the prompt")
        text = "\n".join(f"{m.get('role')}: {m.get('content')}" for m in messages)
        order, scores = self.judge([s.key for s in shown], text)
        return answer(shown, order, scores)

    def answer(self, messages: Iterable[Mapping[str, object]]) -> str:
        """The answer's text (no counting); raises ValueError where :meth:`reply` faults."""
        reply = self.reply(messages)
        if isinstance(reply, Fault):
            raise ValueError(reply.message)
        return reply.text

    async def respond(self, request: ChatRequest) -> Reply | Fault:
        """The responder behind :meth:`serve` and :meth:`backend`: answers and counts (and
        reports in the answer's usage the tokens it counted)."""
        keys, prompt = [s.key for s in read_prompt(request.messages)], count_tokens(request.text)
        ledgers, completion = self._arrive(keys, prompt), 0
        try:
            await anyio.sleep(self.latency)
            reply = self.reply(request.messages)
            if isinstance(reply, Reply):
                completion = count_tokens(reply.text)
                reply = replace(reply, tokens=(prompt, completion))
        finally:
            self._answered(ledgers, completion)
        return reply

    # counting ------------------------------------------------------------------------
    def _group(self, keys: Sequence[int]) -> str:
        known = [k for k in keys if k < len(self._docs.groups)]
        return self._docs.groups[known[0]] if known else ""

    def _arrive(self, keys: Sequence[int], prompt_tokens: int) -> list[tuple[_Ledger, int]]:
        with self._lock:
            stamped = []
            for name in (None, self._group(keys)):
                ledger = self._ledgers.setdefault(name, _Ledger())
                stamp = ledger.answered + 1
                ledger.calls += 1
                ledger.prompt_tokens += prompt_tokens
                ledger.rounds = max(ledger.rounds, stamp)
                stamped.append((ledger, stamp))
            return stamped

    def _answered(self, stamped: list[tuple[_Ledger, int]], completion_tokens: int) -> None:
        with self._lock:
            for ledger, stamp in stamped:
                ledger.answered = max(ledger.answered, stamp)
                ledger.completion_tokens += completion_tokens

    def stats(self, group: str | None = None) -> JudgeStats:
        """Counts since the last :meth:`reset`: of ``group``, or of every call (None)."""
        with self._lock:
            ledger = self._ledgers.get(group)
            return ledger.stats() if ledger else JudgeStats()

    def reset(self) -> None:
        """Forget the counts (the documents stay registered)."""
        with self._lock:
            self._ledgers.clear()

    # transports ----------------------------------------------------------------------
    def serve(self, **options: Any) -> ScriptedOpenAIServer:
        """A real OpenAI-compatible server on 127.0.0.1 answering as this judge (use it as a
        context manager; ``base_url`` ends in ``/v1``)."""
        return ScriptedOpenAIServer(self.respond, **options)

    def backend(self, **options: Any) -> ScriptedBackend:
        """An in-process backend answering as this judge (no HTTP)."""
        return ScriptedBackend(self.respond, **options)
