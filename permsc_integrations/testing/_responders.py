"""What the scripted server answers: requests, replies, faults and ready-made responders.

Example:
    >>> responder = sequence(Fault.status(429, retry_after=0.1), then="[1] > [2]")
    >>> callable(responder)
    True
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ChatRequest",
    "Reply",
    "Fault",
    "RequestRecord",
    "ReplyLike",
    "Responder",
    "shown_passages",
    "sequence",
    "oracle_responder",
    "grade",
    "best_first",
    "noisy_responder",
    "labelled_items",
    "first_token_responder",
]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One parsed chat-completions request; ``index`` counts requests from 0 in arrival order."""

    index: int
    model: str
    messages: tuple[Mapping[str, object], ...]
    temperature: float | None = None
    max_tokens: int | None = None
    body: Mapping[str, object] = field(default_factory=dict)
    path: str = "/v1/chat/completions"
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """All message contents joined by newlines."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful answer, sent after ``delay`` seconds (a delay past the client's timeout
    makes a slow answer). ``fields`` replace top-level fields of the JSON answer, to play a
    misbehaving provider (``{"usage": "ten"}``).

    ``top_tokens``: the first token's candidates and their probabilities; the server sends the
    request's ``top_logprobs`` most likely of them in OpenAI's shape when the request asks for
    ``logprobs`` (a reply without them answers ``"logprobs": null``). Made by
    :meth:`first_token`. ``tokens``: the (prompt, completion) tokens the answer reports (None:
    whitespace words of each; the simulated judge reports its own count).
    """

    text: str
    delay: float = 0.0
    finish_reason: str = "stop"
    fields: Mapping[str, object] = field(default_factory=dict)
    top_tokens: tuple[tuple[str, float], ...] | None = None
    tokens: tuple[int, int] | None = None

    @classmethod
    def first_token(
        cls, probabilities: Mapping[str, float] | Iterable[tuple[str, float]], *, delay: float = 0.0
    ) -> Reply:
        """A one-token answer, the most likely of ``probabilities`` (token text to probability;
        a text may repeat, as different token ids can decode alike), with them as its logprobs.

        >>> reply = Reply.first_token({"B": 0.7, " A": 0.2, "A": 0.1})
        >>> reply.text, reply.finish_reason, reply.top_tokens[0]
        ('B', 'length', ('B', 0.7))
        """
        pairs = probabilities.items() if isinstance(probabilities, Mapping) else probabilities
        top = tuple(sorted(((str(t), float(p)) for t, p in pairs), key=lambda tp: -tp[1]))
        if not top or any(not 0.0 <= p <= 1.0 for _, p in top) or sum(p for _, p in top) > 1.001:
            raise ValueError(f"probabilities must be in [0, 1] summing to at most 1, got {top}")
        return cls(top[0][0], delay=delay, finish_reason="length", top_tokens=top)


@dataclass(frozen=True, slots=True)
class Fault:
    """A scripted failure: an HTTP error status or a dropped connection.

    >>> Fault.status(429, retry_after=1.0).headers
    (('retry-after', '1.0'),)
    """

    kind: str  # "status" | "drop"
    status_code: int = 0
    message: str = ""
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0

    @classmethod
    def status(
        cls,
        status_code: int,
        *,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        message: str | None = None,
        code: str | None = None,
        delay: float = 0.0,
    ) -> Fault:
        """An HTTP error with OpenAI's error body; optional ``Retry-After`` headers."""
        headers: list[tuple[str, str]] = []
        if retry_after is not None:
            headers.append(("retry-after", str(retry_after)))
        if retry_after_ms is not None:
            headers.append(("retry-after-ms", str(retry_after_ms)))
        text = message or f"scripted error {status_code}"
        return cls("status", status_code, text, code, tuple(headers), delay)

    @classmethod
    def context_length(cls) -> Fault:
        """The 400 an OpenAI server gives for a prompt longer than the context window."""
        return cls.status(
            400,
            code="context_length_exceeded",
            message="This model's maximum context length is 128 tokens. "
            "However, your messages resulted in 4096 tokens.",
        )

    @classmethod
    def drop(cls, *, delay: float = 0.0, after_headers: bool = False) -> Fault:
        """Close the connection without an answer (``after_headers``: mid-response)."""
        return cls("drop", 200 if after_headers else 0, delay=delay)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """When a request arrived and finished (``time.perf_counter`` seconds) and its outcome."""

    request: ChatRequest
    start: float
    end: float
    outcome: str  # "ok", "status 429", "drop", ...


ReplyLike = str | Reply | Fault
Responder = Callable[[ChatRequest], ReplyLike | Awaitable[ReplyLike]]

_MARKER = re.compile(r"^\[(\d+)\][ \t]*(?!>)(.*)$", re.M)


def shown_passages(messages: Iterable[Mapping[str, object]]) -> list[str]:
    """Passage texts in prompt order from RankGPT-style ``[i] text`` lines of user messages.

    >>> shown_passages([{"role": "user", "content": "[1] a\\n[2] b"},
    ...                 {"role": "user", "content": "answer like [1] > [2]"}])
    ['a', 'b']
    """
    found: dict[int, str] = {}
    for message in messages:
        if message.get("role") != "user":
            continue
        for match in _MARKER.finditer(str(message.get("content") or "")):
            found.setdefault(int(match.group(1)), match.group(2).strip())
    return [found[i] for i in sorted(found)]


def sequence(*replies: ReplyLike, then: ReplyLike | Responder | None = None) -> Responder:
    """A responder giving ``replies`` in arrival order, then ``then`` (a reply or responder).

    >>> r = sequence(Fault.status(500), then="[1] > [2]")
    >>> [r(ChatRequest(i, "m", ())) for i in range(2)][1]
    '[1] > [2]'
    """
    lock, queue = threading.Lock(), list(replies)

    def respond(request: ChatRequest) -> ReplyLike | Awaitable[ReplyLike]:
        with lock:
            if queue:
                return queue.pop(0)
        if then is None:
            raise LookupError(f"script exhausted at request {request.index}")
        return then(request) if callable(then) else then

    return respond


def _rng(seed: int, request: ChatRequest) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{request.text}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _format(order: Sequence[int]) -> str:
    return " > ".join(f"[{p + 1}]" for p in order)


def grade(text: str) -> float:
    """The relevance a test text carries: its last number (``"doc 7"``,
    ``"passage about goldfish, grade 7"``: 7.0), -1 without one; a relevance for the responders.

    >>> grade("item 3 of list 5, grade 42"), grade("no number")
    (42.0, -1.0)
    """
    numbers = _NUMBER.findall(text)
    return float(numbers[-1]) if numbers else -1.0


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def best_first(texts: Sequence[str], relevance: Callable[[str], float] = grade) -> list[int]:
    """The indices of ``texts``, most relevant first (ties in input order): a perfect answer.

    >>> best_first(["doc 1", "doc 7", "doc 3"])
    [1, 2, 0]
    """
    return sorted(range(len(texts)), key=lambda i: -relevance(texts[i]))


def oracle_responder(relevance: Callable[[str], float], *, delay: float = 0.0) -> Responder:
    """Answer ranking prompts perfectly: shown passages sorted by ``relevance(text)``, high first.

    >>> r = oracle_responder(len)
    >>> r(ChatRequest(0, "m", ({"role": "user", "content": "[1] a\\n[2] abc"},))).text
    '[2] > [1]'
    """

    def respond(request: ChatRequest) -> Reply:
        shown = shown_passages(request.messages)
        order = sorted(range(len(shown)), key=lambda p: -relevance(shown[p]))
        return Reply(_format(order), delay=delay)

    return respond


def noisy_responder(
    relevance: Callable[[str], float],
    *,
    keep: float = 0.5,
    position_bias: float = 0.0,
    seed: int = 0,
    delay: float = 0.0,
) -> Responder:
    """The paper's noise model: the true order, a random concordant subset kept in place
    (each item with probability ``keep``), the rest shuffled into the free slots.

    ``position_bias`` > 0 adds "lost in the middle": shuffled items shown first or last
    tend to take the better free slots. Seeded by ``seed`` and the prompt text, so an
    answer does not depend on arrival order.

    >>> r = noisy_responder(len, keep=1.0)
    >>> r(ChatRequest(0, "m", ({"role": "user", "content": "[1] a\\n[2] abc"},))).text
    '[2] > [1]'
    """

    def respond(request: ChatRequest) -> Reply:
        shown = shown_passages(request.messages)
        rng, n = _rng(seed, request), len(shown)
        truth = sorted(range(n), key=lambda p: -relevance(shown[p]))
        kept = [rng.random() < keep for _ in truth]
        loose = [p for p, k in zip(truth, kept, strict=True) if not k]
        centre = (n - 1) / 2 or 1.0
        loose.sort(key=lambda p: rng.random() - position_bias * abs(p - centre) / centre)
        it = iter(loose)
        order = [p if k else next(it) for p, k in zip(truth, kept, strict=True)]
        return Reply(_format(order), delay=delay)

    return respond


_LABELLED = re.compile(r"^\[([^\]\s]+)\][ \t]+(.*)$", re.M)


def labelled_items(messages: Iterable[Mapping[str, object]]) -> list[tuple[str, str]]:
    """``(label, text)`` of the ``[A] text`` lines of user messages, in prompt order (the
    first-token prompts' items).

    >>> labelled_items([{"role": "user", "content": "[A] a cat\\n[B] a dog"}])
    [('A', 'a cat'), ('B', 'a dog')]
    """
    found: list[tuple[str, str]] = []
    for message in messages:
        if message.get("role") == "user":
            content = str(message.get("content") or "")
            found += [(m.group(1), m.group(2).strip()) for m in _LABELLED.finditer(content)]
    return found


def first_token_responder(
    relevance: Callable[[str], float],
    *,
    sharpness: float = 1.0,
    position_bias: float = 0.0,
    other: float = 0.1,
    delay: float = 0.0,
) -> Responder:
    """Answer first-token prompts with logprobs: the shown items' labels get probabilities
    in proportion to ``exp(sharpness * relevance(text) + position_bias * primacy)``, where
    ``primacy`` falls from 1 for the first item shown to 0 for the last (a model that favours
    what it reads first); ``other`` of the mass goes to a token that is no label.

    >>> r = first_token_responder(len, other=0.0)
    >>> r(ChatRequest(0, "m", ({"role": "user", "content": "[A] a\\n[B] abc"},))).text
    'B'
    """

    def respond(request: ChatRequest) -> Reply:
        shown = labelled_items(request.messages)
        if not shown:
            return Reply.first_token({"I": 1.0}, delay=delay)
        last = max(len(shown) - 1, 1)
        logits = [
            sharpness * relevance(text) + position_bias * (1 - i / last)
            for i, (_, text) in enumerate(shown)
        ]
        weights = [math.exp(z - max(logits)) for z in logits]
        total = sum(weights)
        top = [(s[0], (1 - other) * w / total) for s, w in zip(shown, weights, strict=True)]
        return Reply.first_token([*top, ("The", other)] if other else top, delay=delay)

    return respond
