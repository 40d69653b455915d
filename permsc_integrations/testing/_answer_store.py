"""A file of a model's answers keyed by each prompt's fingerprint, to replay a run offline.

With greedy decoding the same prompt gets the same answer, so a benchmark that saw a model
answer once can be re-run from the file: :class:`AnswerStore` keeps every (prompt, answer)
as one JSON line, keyed by :func:`fingerprint` (sha256 of the model id, the messages and the
decoding settings; nothing else, so only the prompt's content decides). The file is
append-only and flushed after every answer: a kill loses at most the line being written, and
a truncated last line is dropped on load (and cut off before the next append).

:class:`StoredBackend` puts a store in front of any backend. In ``"record"`` mode a miss
goes to the backend and is kept; in ``"replay"`` mode a miss raises
:class:`AnswerMissingError`, naming the prompt's fingerprint, and the model is never called.

Example:
    >>> import anyio, tempfile
    >>> from pathlib import Path
    >>> from permsc_integrations.backends.base import GenerationSettings
    >>> from permsc_integrations.testing import ScriptedBackend
    >>> path = Path(tempfile.mkdtemp()) / "answers.jsonl"
    >>> messages = [{"role": "user", "content": "[1] a\\n[2] b"}]
    >>> with AnswerStore(path, mode="record") as store:
    ...     backend = StoredBackend(store, ScriptedBackend(lambda r: "[2] > [1]"), model="m")
    ...     anyio.run(backend.acomplete, messages, GenerationSettings()).text
    '[2] > [1]'
    >>> with AnswerStore(path) as store:  # replay: no backend at all
    ...     again = StoredBackend(store, None, model="m")
    ...     anyio.run(again.acomplete, messages, GenerationSettings()).text, again.backend_calls
    ('[2] > [1]', 0)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, ClassVar, Literal

from permsc_integrations.backends.base import (
    Backend,
    BatchBackend,
    Completion,
    GenerationSettings,
    Message,
)
from permsc_integrations.errors import BackendError, ConfigurationError
from permsc_integrations.results import Usage

__all__ = ["AnswerStore", "StoredBackend", "AnswerMissingError", "fingerprint", "StoredAnswer"]

Mode = Literal["record", "replay"]
_MODES = ("record", "replay")


class AnswerMissingError(BackendError):
    """A replayed prompt has no answer in the store (replay never calls the model)."""

    fatal: ClassVar[bool] = True

    def __init__(self, key: str, path: Path) -> None:
        super().__init__(
            f"no stored answer for prompt {key} in {path} (replay mode never calls the model; "
            "record it first)",
            retryable=False,
        )
        self.key = key


def fingerprint(model: str, messages: Sequence[Message], settings: GenerationSettings) -> str:
    """sha256 of the model id, the messages (role and content) and the decoding settings.

    >>> settings = GenerationSettings(max_tokens=8)
    >>> a = fingerprint("m", [{"role": "user", "content": "x"}], settings)
    >>> a == fingerprint("m", [{"role": "user", "content": "x"}], settings), len(a)
    (True, 64)
    >>> a == fingerprint("m", [{"role": "user", "content": "y"}], settings)
    False
    """
    payload = {
        "model": model,
        "messages": [[str(m.get("role", "")), str(m.get("content", ""))] for m in messages],
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "stop": list(settings.stop),
        "seed": settings.seed,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """One kept answer: its text, finish reason and token counts."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def completion(self, model: str) -> Completion:
        usage = Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)
        return Completion(self.text, usage, model, self.finish_reason)


class AnswerStore:
    """The JSONL file of answers at ``path``; ``mode``: ``"replay"`` (default) or ``"record"``.

    Thread-safe. ``hits`` and ``misses`` count look-ups; ``misses`` in replay mode are kept
    in ``missing`` (fingerprints) so a caller can fail a run that swallowed a failed call.
    """

    def __init__(self, path: str | Path, *, mode: Mode = "replay") -> None:
        if mode not in _MODES:
            raise ConfigurationError(f"mode must be one of {_MODES}, not {mode!r}")
        self.path, self.mode = Path(path), mode
        self._lock = threading.Lock()
        self._answers: dict[str, StoredAnswer] = {}
        self._file: IO[str] | None = None
        self.hits = 0
        self.missing: list[str] = []
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            if self.mode == "replay":
                raise ConfigurationError(f"no answer store at {self.path} to replay")
            return
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        good = 0  # bytes up to the end of the last whole line
        for number, line in enumerate(lines):
            last = number == len(lines) - 1
            if not line.strip():
                good += len(line) + (0 if last else 1)
                continue
            try:
                row = json.loads(line)
                self._answers[row["key"]] = _answer(row)
            except (ValueError, KeyError, TypeError) as exc:
                if last:  # a line cut by a kill while it was written: dropped
                    break
                raise ConfigurationError(
                    f"answer store {self.path}, line {number + 1}, is not an answer: {exc}"
                ) from exc
            if last:  # a whole row without its newline: kept, and the newline restored
                good = -1
                break
            good += len(line) + 1
        if self.mode == "record" and good >= 0 and good < len(raw):
            with self.path.open("r+b") as f:  # cut the broken tail before appending
                f.truncate(good)

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> StoredAnswer | None:
        with self._lock:
            found = self._answers.get(key)
            if found is None:
                if self.mode == "replay":
                    self.missing.append(key)
            else:
                self.hits += 1
            return found

    def put(
        self,
        key: str,
        model: str,
        messages: Sequence[Message],
        settings: GenerationSettings,
        completion: Completion,
    ) -> StoredAnswer:
        """Keep an answer: in memory and as one flushed line of the file."""
        if self.mode != "record":
            raise ConfigurationError("a replaying answer store keeps no new answers")
        answer = StoredAnswer(
            completion.text,
            completion.finish_reason,
            completion.usage.prompt_tokens,
            completion.usage.completion_tokens,
        )
        row = {
            "key": key,
            "model": model,
            "messages": [{"role": m.get("role"), "content": m.get("content")} for m in messages],
            "max_tokens": settings.max_tokens,
            "text": answer.text,
            "finish_reason": answer.finish_reason,
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
        }
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock:
            if key in self._answers:
                return self._answers[key]
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self._open()
            self._file.write(line)
            self._file.flush()
            self._answers[key] = answer
        return answer

    def _open(self) -> IO[str]:
        f = self.path.open("a+", encoding="utf-8")
        if f.tell() > 0:  # a last row kept without its newline
            f.seek(f.tell() - 1)
            if f.read(1) != "\n":
                f.write("\n")
        return f

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> AnswerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _answer(row: Mapping[str, object]) -> StoredAnswer:
    text = row["text"]
    if not isinstance(text, str):
        raise TypeError("text is not a string")
    reason = row.get("finish_reason")
    return StoredAnswer(
        text,
        reason if isinstance(reason, str) else None,
        _count(row.get("prompt_tokens")),
        _count(row.get("completion_tokens")),
    )


def _count(value: object) -> int:
    """A stored token count (none stored: 0)."""
    if isinstance(value, str | int | float):
        return int(value or 0)
    if value is None:
        return 0
    raise TypeError(f"a token count is a number, not {type(value).__name__}")


class StoredBackend:
    """A backend answering from ``store``, and from ``backend`` for what it lacks (record mode).

    ``model`` is the model id in the fingerprint (default: ``backend.name``; needed without a
    backend). ``backend_calls`` counts the prompts that reached the model. Batches go to the
    backend as one batch when it has ``acomplete_batch``.
    """

    def __init__(self, store: AnswerStore, backend: Backend | None, *, model: str = "") -> None:
        if not model and backend is None:
            raise ConfigurationError("StoredBackend without a backend needs model=")
        self.store, self.backend = store, backend
        self.model = model or (backend.name if backend is not None else "")
        self.name = f"stored:{self.model}"
        self.backend_calls = 0

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        return (await self.acomplete_batch([messages], settings))[0]

    async def acomplete_batch(
        self, batch: Sequence[Sequence[Message]], settings: GenerationSettings
    ) -> list[Completion]:
        keys = [fingerprint(self.model, messages, settings) for messages in batch]
        stored = {key: self.store.get(key) for key in dict.fromkeys(keys)}
        found = {k: v for k, v in stored.items() if v is not None}
        todo = [k for k, v in stored.items() if v is None]
        if todo:
            if self.store.mode == "replay" or self.backend is None:
                raise AnswerMissingError(todo[0], self.store.path)
            prompts = [batch[keys.index(k)] for k in todo]
            answers = await self._ask(prompts, settings)
            for key, messages, answer in zip(todo, prompts, answers, strict=True):
                found[key] = self.store.put(key, self.model, messages, settings, answer)
        return [found[k].completion(self.model) for k in keys]

    async def _ask(
        self, prompts: list[Sequence[Message]], settings: GenerationSettings
    ) -> list[Completion]:
        assert self.backend is not None
        self.backend_calls += len(prompts)
        if isinstance(self.backend, BatchBackend):
            return await self.backend.acomplete_batch(prompts, settings)
        backend = self.backend
        return list(await asyncio.gather(*(backend.acomplete(p, settings) for p in prompts)))

    async def aclose(self) -> None:
        if self.backend is not None:
            await self.backend.aclose()
