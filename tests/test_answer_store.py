"""The answer store and the backend server (benchmarks/real_answers.py): a run recorded once
replays exactly, without the model, through the real openai client and a real loopback server."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from openai import BadRequestError, OpenAI

from permsc_integrations import PSCRanker
from permsc_integrations.backends.base import Completion, GenerationSettings, Message
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.results import Usage
from permsc_integrations.testing import (
    AnswerMissingError,
    AnswerStore,
    BackendOpenAIServer,
    ScriptedBackend,
    StoredBackend,
    fingerprint,
    oracle_responder,
)

WORDS = ["pear", "apple", "kiwi", "fig", "plum", "date", "lime", "yuzu", "sloe", "nut", "cherry",
         "quince"]


class SortingModel:
    """A tiny deterministic batch model: sorts the words of a wordsort prompt, and counts."""

    name = "sorting-model"

    def __init__(self) -> None:
        self.calls = 0
        self.batches: list[int] = []
        self.settings: list[GenerationSettings] = []
        self._lock = threading.Lock()

    def _answer(self, messages: Sequence[Message]) -> Completion:
        body = messages[-1]["content"].split("\n")[1:-1]  # the words, between the two lines
        words = sorted(w.removeprefix("- ") for w in body)
        return Completion("\n".join(words), Usage(prompt_tokens=len(body), completion_tokens=3))

    async def acomplete(self, messages: Sequence[Message], settings: GenerationSettings):
        return (await self.acomplete_batch([messages], settings))[0]

    async def acomplete_batch(self, batch, settings: GenerationSettings) -> list[Completion]:
        with self._lock:
            self.calls += len(batch)
            self.batches.append(len(batch))
            self.settings.append(settings)
        await anyio.sleep(0.01)
        return [self._answer(m) for m in batch]

    async def aclose(self) -> None:
        pass


def _rank(server: BackendOpenAIServer, seed: int, **options) -> tuple[int, ...]:
    backend = {"base_url": server.base_url, "api_key": "none"}
    with PSCRanker("openai:m", backend_options=backend, prompt="wordsort", window_size=5,
                   top_k=3, seed=seed, max_tokens=64, timeout=None, **options) as ranker:
        return ranker.rank("", WORDS).order


def _record(path: Path, model: SortingModel) -> list[tuple[int, ...]]:
    with AnswerStore(path, mode="record") as store:
        stored = StoredBackend(store, model, model="sorting-model")
        with BackendOpenAIServer(stored, max_tokens=64) as server:
            return [_rank(server, seed, num_permutations=m) for seed, m in ((0, 1), (1, 3))]


def test_a_recorded_run_replays_exactly_without_the_model(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    model = SortingModel()
    first = _record(path, model)
    assert model.calls > 0 and len(path.read_text().splitlines()) == model.calls
    assert first[0][0] == first[1][0] == WORDS.index("apple")  # the model sorts
    with AnswerStore(path) as store:  # replay: no backend at all
        stored = StoredBackend(store, None, model="sorting-model")
        with BackendOpenAIServer(stored, max_tokens=64, latency=0.01) as server:
            again = [_rank(server, seed, num_permutations=m) for seed, m in ((0, 1), (1, 3))]
    assert again == first
    assert stored.backend_calls == 0 and store.hits >= model.calls and store.missing == []
    # recording again over a full store asks the model nothing more
    more = SortingModel()
    assert _record(path, more) == first and more.calls == 0


def test_replay_refuses_a_prompt_it_lacks_naming_its_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    _record(path, SortingModel())
    messages = [{"role": "user", "content": "never asked"}]
    settings = GenerationSettings(temperature=0.0, max_tokens=64, timeout=None)
    key = fingerprint("sorting-model", messages, settings)
    with AnswerStore(path) as store:
        stored = StoredBackend(store, None, model="sorting-model")
        with pytest.raises(AnswerMissingError, match=key):
            anyio.run(stored.acomplete, messages, settings)
        with BackendOpenAIServer(stored, max_tokens=64) as server:  # over HTTP: a 400
            client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
            with pytest.raises(BadRequestError, match=key) as caught:
                client.chat.completions.create(model="m", messages=messages, max_tokens=64)
            client.close()
            assert caught.value.code == "answer_missing"
            with pytest.raises(Exception, match="answer_missing|no stored answer"):
                _rank(server, seed=7, num_permutations=1)  # a seed never recorded
        assert key in store.missing
    with pytest.raises(ConfigurationError, match="no answer store"):
        AnswerStore(tmp_path / "absent.jsonl")


def test_a_truncated_last_line_is_dropped_and_the_store_records_on(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    _record(path, SortingModel())
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # killed mid-line
    with AnswerStore(path) as store:
        assert len(store) == len(lines) - 1
    model = SortingModel()
    again = _record(path, model)  # resumes: only the lost answer reaches the model
    assert model.calls == 1
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == len(lines) and len({r["key"] for r in rows}) == len(lines)
    with AnswerStore(path) as store:
        stored = StoredBackend(store, None, model="sorting-model")
        with BackendOpenAIServer(stored, max_tokens=64) as server:
            assert [_rank(server, s, num_permutations=m) for s, m in ((0, 1), (1, 3))] == again
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n" + "".join(lines))
    with pytest.raises(ConfigurationError, match="line 1"):
        AnswerStore(broken)


def test_the_server_serves_a_backend_to_the_openai_client_greedily(tmp_path: Path) -> None:
    model = SortingModel()
    with BackendOpenAIServer(model, max_tokens=32) as server:
        client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        content = "Order these words alphabetically:\npear\n- apple\nOnly respond."
        answer = client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": content}],
            temperature=1.3, max_tokens=500,
        )
        assert [m.id for m in client.models.list()] == ["sorting-model"]
        client.close()
        assert answer.choices[0].message.content == "apple\npear"
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (2, 3)
        assert model.settings[-1].temperature == 0.0 and model.settings[-1].max_tokens == 32
        # PSC's m concurrent prompts reach a batch backend together
        assert _rank(server, seed=0, num_permutations=4)[0] == WORDS.index("apple")
    assert max(model.batches) > 1


def test_a_plain_backend_is_served_one_prompt_at_a_time() -> None:
    backend = ScriptedBackend(oracle_responder(len))
    with BackendOpenAIServer(backend) as server:
        with server.ranker(num_permutations=3) as ranker:
            assert ranker.rank("longest?", ["a", "ccc", "bb"]).order == (1, 2, 0)
    assert backend.request_count == 3 and backend.max_in_flight == 1
