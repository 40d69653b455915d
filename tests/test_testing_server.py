"""ScriptedOpenAIServer: a real uvicorn server, spoken to by the real openai client."""

from __future__ import annotations

import math

import anyio
import httpx
import openai
import pytest

from permsc_integrations.prompts import get_prompt
from permsc_integrations.testing import (
    ChatRequest,
    Fault,
    Reply,
    ScriptedOpenAIServer,
    first_token_responder,
    noisy_responder,
    oracle_responder,
    sequence,
)
from permsc_integrations.testing._responders import labelled_items, shown_passages

pytestmark = pytest.mark.timeout(30)

MESSAGES = [{"role": "user", "content": "[1] a\n[2] bb"}]


def client(server: ScriptedOpenAIServer, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=timeout)


def ask(server: ScriptedOpenAIServer, timeout: float = 5.0) -> object:
    with client(server, timeout) as c:
        return c.chat.completions.create(model="m", messages=MESSAGES, temperature=0.3)


def test_answers_in_openai_schema_and_records_the_request(scripted_server):
    server = scripted_server(lambda request: "[2] > [1]")
    answer = ask(server)
    assert answer.choices[0].message.content == "[2] > [1]"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "m"
    assert answer.usage.prompt_tokens == 4 and answer.usage.completion_tokens == 3
    (request,) = server.requests
    assert request.index == 0 and request.model == "m" and request.temperature == 0.3
    assert request.messages[0]["content"] == MESSAGES[0]["content"]
    assert server.records[0].outcome == "ok" and server.records[0].end >= server.records[0].start


def test_lists_models(scripted_server):
    server = scripted_server(model="local-model")
    with client(server) as c:
        assert [m.id for m in c.models.list()] == ["local-model"]


def test_rate_limit_carries_retry_after_headers(scripted_server):
    server = scripted_server(sequence(Fault.status(429, retry_after=1.5, retry_after_ms=1500)))
    with pytest.raises(openai.RateLimitError) as caught:
        ask(server)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "1.5"
    assert caught.value.response.headers["retry-after-ms"] == "1500"
    assert server.records[0].outcome == "status 429"


def test_server_error_and_context_length(scripted_server):
    server = scripted_server(sequence(Fault.status(503), Fault.context_length()))
    with pytest.raises(openai.InternalServerError) as caught:
        ask(server)
    assert caught.value.status_code == 503
    with pytest.raises(openai.BadRequestError) as caught:
        ask(server)
    assert caught.value.code == "context_length_exceeded"
    assert "maximum context length" in caught.value.message


@pytest.mark.parametrize("after_headers", [False, True])
def test_dropped_connection_is_a_connection_error(scripted_server, after_headers):
    server = scripted_server(sequence(Fault.drop(after_headers=after_headers), then="fine"))
    with pytest.raises(openai.APIConnectionError) as caught:
        ask(server)
    assert not isinstance(caught.value, openai.APITimeoutError)
    assert isinstance(caught.value.__cause__, httpx.RemoteProtocolError)
    assert ask(server).choices[0].message.content == "fine"  # the server lives on
    assert [r.outcome for r in server.records] == ["drop", "ok"]


def test_slow_answer_past_the_client_timeout(scripted_server):
    server = scripted_server(sequence(Reply("late", delay=2.0), then="quick"))
    with pytest.raises(openai.APITimeoutError):
        ask(server, timeout=0.3)
    assert ask(server).choices[0].message.content == "quick"


def test_a_failing_responder_answers_500_instead_of_hanging(scripted_server):
    server = scripted_server(sequence("only one"))
    ask(server)
    with pytest.raises(openai.InternalServerError) as caught:
        ask(server)
    assert "script exhausted at request 1" in caught.value.message
    assert server.records[-1].outcome == "responder error"


def test_malformed_request_gets_400(scripted_server):
    server = scripted_server()
    response = httpx.post(server.base_url + "/chat/completions", content=b"{not json")
    assert response.status_code == 400
    assert "bad request" in response.json()["error"]["message"]
    assert server.request_count == 0


async def test_async_context_manager_counts_concurrency(until):
    async def responder(request: ChatRequest) -> Reply:
        await until(lambda: server.max_in_flight >= 8)  # async responders work too
        return Reply(f"answer {request.index}")

    async with ScriptedOpenAIServer(responder) as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0) as c:
            texts: list[str] = []

            async def one() -> None:
                answer = await c.chat.completions.create(model="m", messages=MESSAGES)
                texts.append(answer.choices[0].message.content)

            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(one)
    assert sorted(texts) == sorted(f"answer {i}" for i in range(8))
    assert server.max_in_flight == 8 and server.in_flight == 0  # the eight calls overlapped


def test_stop_does_not_wait_for_abandoned_answers():
    server = ScriptedOpenAIServer(lambda request: Reply("never", delay=30)).start()
    with pytest.raises(openai.APITimeoutError):
        ask(server, timeout=0.2)
    server.stop()  # does not wait 30 s for the abandoned answer (test timeout)
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.base_url + "/models")


def test_shown_passages_reads_the_rankgpt_prompt():
    texts = ["alpha", "beta gamma", "delta"]
    messages = get_prompt("rankgpt").render("query", texts)
    assert shown_passages(messages) == texts


def test_oracle_answers_are_parsed_by_the_prompt_into_the_true_order():
    prompt = get_prompt("rankgpt")
    texts = ["x" * 3, "x" * 9, "x", "x" * 5]
    request = ChatRequest(0, "m", tuple(prompt.render("q", texts)))
    answer = oracle_responder(len)(request)
    assert answer.text == "[2] > [4] > [1] > [3]"
    assert prompt.parse(answer.text, 4).ranking == (1, 3, 0, 2)


def noisy_order(texts: list[str], **options) -> tuple[int, ...]:
    prompt = get_prompt("rankgpt")
    request = ChatRequest(0, "m", tuple(prompt.render("q", texts)))
    return prompt.parse(noisy_responder(len, **options)(request).text, len(texts)).ranking


def test_noisy_responder_keeps_truth_when_keep_is_one_and_is_seeded():
    texts = ["x" * k for k in (4, 1, 7, 3, 9, 2)]
    assert noisy_order(texts, keep=1.0) == (4, 2, 0, 3, 5, 1)
    assert noisy_order(texts, keep=0.3, seed=1) == noisy_order(texts, keep=0.3, seed=1)
    assert len({noisy_order(texts, keep=0.3, seed=s) for s in range(10)}) > 1


def test_noisy_responder_keeps_a_concordant_subset_in_place():
    texts = ["x" * k for k in range(1, 13)]
    truth = tuple(range(11, -1, -1))
    for seed in range(20):
        order = noisy_order(texts, keep=0.5, seed=seed)
        assert sorted(order) == sorted(truth)  # a full permutation, nothing lost
    matches = [
        sum(a == b for a, b in zip(noisy_order(texts, keep=0.5, seed=s), truth, strict=True))
        for s in range(40)
    ]
    assert 0.35 < sum(matches) / (40 * 12) < 0.8  # about half stay in place (+ lucky shuffles)


def test_lost_in_the_middle_bias_favours_the_ends():
    texts = ["x"] * 9  # all equally relevant: only position decides
    tops = [noisy_order(texts, keep=0.0, position_bias=5.0, seed=s)[0] for s in range(40)]
    at_ends = sum(top in (0, 8) for top in tops)
    assert at_ends > 30  # unbiased would put about 40 * 2 / 9 ≈ 9 there


def test_a_first_token_reply_answers_logprobs_in_openai_s_shape(scripted_server):
    top = {"B": 0.6, " A": 0.25, "A": 0.1, "C": 0.05}
    server = scripted_server(lambda request: Reply.first_token(top))
    with client(server) as c:
        answer = c.chat.completions.create(
            model="m", messages=MESSAGES, max_tokens=1, logprobs=True, top_logprobs=3
        )
        plain = c.chat.completions.create(model="m", messages=MESSAGES, max_tokens=1)
    choice = answer.choices[0]  # parsed by the SDK's own models
    assert choice.message.content == "B" and answer.usage.completion_tokens == 1
    first = choice.logprobs.content[0]
    assert first.token == "B" and first.logprob == pytest.approx(math.log(0.6))
    assert [(t.token, round(math.exp(t.logprob), 6)) for t in first.top_logprobs] == [
        ("B", 0.6),
        (" A", 0.25),
        ("A", 0.1),
    ]
    assert first.top_logprobs[1].bytes == [32, 65]
    assert plain.choices[0].logprobs is None  # not asked: none sent


def test_a_server_told_to_omit_logprobs_and_a_plain_reply_send_none(scripted_server):
    for server, reply in (
        (scripted_server(logprobs=False), Reply.first_token({"A": 1.0})),
        (scripted_server(), Reply("A")),
    ):
        server.responder = lambda request, reply=reply: reply
        with client(server) as c:
            answer = c.chat.completions.create(
                model="m", messages=MESSAGES, logprobs=True, top_logprobs=5
            )
        assert answer.choices[0].message.content == "A" and answer.choices[0].logprobs is None


def test_first_token_probabilities_are_checked():
    for bad in ({}, {"A": 1.5}, {"A": 0.7, "B": 0.7}, {"A": -0.1}):
        with pytest.raises(ValueError, match="probabilities"):
            Reply.first_token(bad)
    assert Reply.first_token([("A", 0.3), ("A", 0.3), ("B", 0.4)]).text == "B"


def test_the_first_token_responder_scores_labelled_items_with_a_primacy_bias(scripted_server):
    relevance = {"goldfish grow": 2.0, "cats purr": 0.0, "dogs bark": 0.0}.__getitem__
    shown = "[A] cats purr\n[B] goldfish grow\n[C] dogs bark"
    messages = [
        {"role": "system", "content": "[Z] not an item"},
        {"role": "user", "content": shown},
    ]
    server = scripted_server(first_token_responder(relevance, position_bias=1.0, other=0.2))
    with client(server) as c:
        answer = c.chat.completions.create(
            model="m", messages=messages, max_tokens=1, logprobs=True, top_logprobs=10
        )
    top = {t.token: math.exp(t.logprob) for t in answer.choices[0].logprobs.content[0].top_logprobs}
    weights = {"A": math.exp(0 + 1.0), "B": math.exp(2.0 + 0.5), "C": math.exp(0.0)}
    expected = {k: 0.8 * w / sum(weights.values()) for k, w in weights.items()}
    assert top == pytest.approx({**expected, "The": 0.2})
    assert answer.choices[0].message.content == "B"
    assert labelled_items(messages) == [
        ("A", "cats purr"),
        ("B", "goldfish grow"),
        ("C", "dogs bark"),
    ]
