"""testing.SimulatedJudge: a model with hidden relevance, its answer formats and its counts."""

from __future__ import annotations

import random
import statistics

import anyio
import openai
import pytest

from permsc_integrations import PSCRanker, testing
from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.permutations import to_original
from permsc_integrations.prompts import get_prompt
from permsc_integrations.prompts._first_token import first_token_prompt
from permsc_integrations.testing import REGIMES, JudgeParams, SimulatedJudge, hidden_keys
from permsc_integrations.testing._judge import JudgeStats
from permsc_integrations.testing._judge_prompts import count_tokens, hide, strip_markers

pytestmark = pytest.mark.timeout(60)

EXACT = JudgeParams(noise=0.0, doc_error=0.0, primacy=0.0, recency=0.0)
RANKGPT = get_prompt("rankgpt")


def joined(messages: list[dict]) -> str:  # what the judge counts: the contents, one a line
    return "\n".join(str(m["content"]) for m in messages)


def rankgpt(texts: list[str], query: str = "goldfish") -> list[dict]:
    return [dict(m) for m in RANKGPT.render(query, texts)]


def answer_order(judge: SimulatedJudge, texts: list[str]) -> list[int]:
    """The judge's RankGPT answer as indices into ``texts``, best first."""
    return list(RANKGPT.parse(judge.answer(rankgpt(texts)), len(texts)).ranking)


def setwise(texts: list[str]) -> list[dict]:
    """BlitzRank's setwise (and, with two passages, pairwise) prompt."""
    letters = "ABCDEFGHIJ"
    passages = "\n\n".join(f'Passage {letters[i]}: "{t}"' for i, t in enumerate(texts))
    return [
        {"role": "system", "content": "You are RankGPT, an intelligent assistant."},
        {
            "role": "user",
            "content": 'Given a query "goldfish", which of the following passages is the most '
            f"relevant one to the query?\n\n{passages}\n\nOutput only the passage label of "
            "the most relevant passage.",
        },
    ]


def test_the_public_names_are_pinned() -> None:
    judge_names = {"SimulatedJudge", "JudgeParams", "REGIMES", "hidden_keys"}
    assert judge_names <= set(testing.__all__)
    assert not {"JudgeStats", "hide", "strip_markers"} & set(testing.__all__)  # internal
    assert set(REGIMES) == set(JudgeParams.REGIMES) == {"mild", "position-biased", "noisy"}


def test_markers_are_invisible_and_survive_passage_preparation() -> None:
    text = hide(1234567, "Goldfish  grow\nslowly in ponds.")
    assert strip_markers(text) == "Goldfish  grow\nslowly in ponds." and hidden_keys(text) == [
        1234567
    ]
    cut = get_prompt("rankgpt", max_words=2).render("q", [text])[3]["content"]
    assert hidden_keys(cut) == [1234567] and strip_markers(cut) == "[1] Goldfish grow"
    with pytest.raises(ValueError, match="int >= 0"):
        hide(-1, "x")


def test_rankgpt_answers_rank_every_shown_document_by_grade_when_exact() -> None:
    judge = SimulatedJudge(EXACT)
    grades = [0, 3, 1, 2, 0]
    texts = judge.documents([f"passage {i}" for i in range(5)], grades)
    text = judge.answer(rankgpt(texts))
    assert text.startswith("[2] > [4] > [3] > ")
    assert sorted(answer_order(judge, texts)) == list(range(5))


def test_setwise_and_pairwise_answers_name_the_best_passage() -> None:
    judge = SimulatedJudge(EXACT)
    texts = judge.documents(["a", "b", "c", "d"], [1, 0, 3, 2])
    assert judge.answer(setwise(texts)) == "Passage C"
    assert judge.answer(setwise(texts[:2])) == "Passage A"
    assert judge.answer(setwise([texts[1], texts[3]])) == "Passage B"


def test_first_token_prompts_get_a_letter_with_logprobs_over_http(scripted_server) -> None:
    judge = SimulatedJudge(EXACT)
    texts = judge.documents(["a", "b", "c"], [0, 0, 3])
    messages = first_token_prompt("rankgpt").render("q", texts)
    server = scripted_server(judge.respond)
    with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
        out = client.chat.completions.create(
            model="judge", messages=messages, max_tokens=1, logprobs=True, top_logprobs=3
        )
    choice = out.choices[0]
    assert choice.message.content == "C"
    top = {t.token: t.logprob for t in choice.logprobs.content[0].top_logprobs}
    assert set(top) == {"A", "B", "C"} and top["C"] > top["A"] == top["B"]


def test_one_prompt_always_gets_the_same_answer_and_seeds_differ() -> None:
    judge = SimulatedJudge(REGIMES["noisy"], seed=3)
    texts = judge.documents([f"p{i}" for i in range(20)], [i % 4 for i in range(20)])
    first = judge.answer(rankgpt(texts))
    assert all(judge.answer(rankgpt(texts)) == first for _ in range(5))
    answers = {judge.answer(rankgpt(texts, query=f"q{k}")) for k in range(10)}
    assert len(answers) > 5, "another prompt text draws other noise"
    other = SimulatedJudge(REGIMES["noisy"], seed=4)
    other_texts = other.documents([f"p{i}" for i in range(20)], [i % 4 for i in range(20)])
    assert other_texts == texts and other.answer(rankgpt(texts)) != first


async def test_served_and_in_process_answers_agree(scripted_server) -> None:
    judge = SimulatedJudge(REGIMES["position-biased"], seed=1)
    texts = judge.documents([f"p{i}" for i in range(8)], [0, 1, 2, 3, 3, 2, 1, 0])
    messages = rankgpt(texts)
    local = await judge.backend().acomplete(messages, GenerationSettings())
    server = scripted_server(judge.respond)
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0) as c:
        served = await c.chat.completions.create(model="judge", messages=messages)
    assert served.choices[0].message.content == local.text == judge.answer(messages)
    counted = (count_tokens(joined(messages)), count_tokens(local.text))
    assert (served.usage.prompt_tokens, served.usage.completion_tokens) == counted
    assert (local.usage.prompt_tokens, local.usage.completion_tokens) == counted


def shuffled_answers(params: JudgeParams, grades: list[int], prompts: int) -> list[list[int]]:
    """``prompts`` answers to random shuffles, each as the prompt positions best first
    (``pos_of_rank``) together with the shown keys."""
    judge = SimulatedJudge(params, seed=7)
    texts = judge.documents([f"p{i}" for i in range(len(grades))], grades)
    rng, out = random.Random(0), []
    for _ in range(prompts):
        perm = list(range(len(texts)))
        rng.shuffle(perm)
        out.append([perm, answer_order(judge, [texts[i] for i in perm])])
    return out


def test_position_bias_is_u_shaped_and_measurable() -> None:
    params = JudgeParams(noise=1.0, doc_error=0.0, primacy=1.5, recency=1.0, curve=3.0)
    answers = shuffled_answers(params, [1] * 10, 400)
    mean_rank = [statistics.mean(ranking.index(p) for _, ranking in answers) for p in range(10)]
    middle = min(mean_rank[3:7])
    assert mean_rank[0] < mean_rank[9] < middle, mean_rank
    assert max(mean_rank[3:7]) > 5.0 > mean_rank[0] + 1.5
    unbiased = shuffled_answers(params.but(primacy=0.0, recency=0.0), [1] * 10, 400)
    flat = [statistics.mean(r.index(p) for _, r in unbiased) for p in range(10)]
    assert max(flat) - min(flat) < 1.2, flat


def test_echo_copies_the_order_shown_at_its_rate() -> None:
    grades = [0, 1, 2, 3] * 3
    for echo in (0.0, 0.3):
        answers = shuffled_answers(EXACT.but(echo=echo), grades, 300)
        copied = sum(ranking == list(range(12)) for _, ranking in answers) / len(answers)
        assert abs(copied - echo) < 0.07, (echo, copied)


def test_the_persistent_error_survives_every_shuffle() -> None:
    params = JudgeParams(noise=0.0, doc_error=1.0, primacy=0.0, recency=0.0)
    orders = {
        tuple(to_original(ranking, perm)) for perm, ranking in shuffled_answers(params, [2] * 8, 30)
    }
    assert len(orders) == 1, "equal grades, yet one fixed order in every shuffle"
    assert orders != {tuple(range(8))}


def test_calls_tokens_and_sequential_rounds_over_http(scripted_server) -> None:
    judge = SimulatedJudge(REGIMES["mild"], latency=0.0)
    texts = judge.documents(["a b", "c", "d e f"], [0, 2, 1], group="q1")
    other = judge.documents(["g"], [3], group="q2")
    server = scripted_server(judge.respond)
    sent, answered = 0, 0
    with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
        for messages in (rankgpt(texts), setwise(texts[:2]), rankgpt(texts[1:])):
            out = client.chat.completions.create(model="judge", messages=messages)
            sent += count_tokens("\n".join(m["content"] for m in messages))
            answered += count_tokens(out.choices[0].message.content)
        client.chat.completions.create(model="judge", messages=rankgpt(other))
        with pytest.raises(openai.BadRequestError, match="no document markers"):
            client.chat.completions.create(model="judge", messages=rankgpt(["plain"]))
    stats = judge.stats("q1")
    assert (stats.calls, stats.rounds) == (3, 3), "one after another: a round each"
    assert (stats.prompt_tokens, stats.completion_tokens) == (sent, answered)
    assert (judge.stats("q2").calls, judge.stats().calls, judge.stats().rounds) == (1, 5, 5)
    judge.reset()
    assert judge.stats() == JudgeStats()


async def test_calls_sent_together_share_a_round() -> None:
    judge = SimulatedJudge(REGIMES["mild"])
    texts = judge.documents([f"p{i}" for i in range(6)], [0, 1, 2, 3, 0, 1], group="q")
    backend = judge.backend()

    async def ask(window: list[str]) -> None:
        await backend.acomplete(rankgpt(window), GenerationSettings())

    async with anyio.create_task_group() as group:
        for start in range(0, 6, 2):
            group.start_soon(ask, texts[start : start + 2])
    await ask(texts[:3])
    assert (judge.stats("q").calls, judge.stats("q").rounds) == (4, 2)


def test_psc_ranks_through_the_judge_and_the_counts_agree() -> None:
    judge = SimulatedJudge(REGIMES["position-biased"], seed=2)
    grades = [random.Random(k).choice([0, 0, 0, 1, 2, 3]) for k in range(30)]
    texts = judge.documents([f"passage {k}" for k in range(30)], grades, group="q")
    with PSCRanker(judge.backend(), num_permutations=4, aggregator="borda", seed=0) as ranker:
        result = ranker.rank("goldfish", texts)
    assert judge.stats("q").calls == result.usage.calls == 4 * 2 + 4
    stats = judge.stats("q")  # what the answers report is what the judge counted
    assert stats.prompt_tokens + stats.completion_tokens == result.usage.total_tokens > 0
    top = [grades[i] for i in result.order[:5]]
    assert statistics.mean(top) > statistics.mean(grades) + 1.0, top


def test_window_noise_grows_the_noise_with_the_prompts_length() -> None:
    """At 10 documents the scale is the noise itself (the same answers); longer prompts are
    answered worse: fewer pairs in the grades' order."""
    grades = [k % 5 for k in range(20)]
    params = JudgeParams(noise=0.6, doc_error=0.0, primacy=0.0, recency=0.0)

    def agreement(p: JudgeParams, n: int) -> float:
        pairs = [
            grades[perm[a]] > grades[perm[b]]
            for perm, ranking in shuffled_answers(p, grades[:n], 60)
            for i, a in enumerate(ranking)
            for b in ranking[i + 1 :]
            if grades[perm[a]] != grades[perm[b]]
        ]
        return sum(pairs) / len(pairs)

    growing = params.but(window_noise=1.5)
    assert shuffled_answers(growing, grades[:10], 20) == shuffled_answers(params, grades[:10], 20)
    assert agreement(growing, 20) < agreement(params, 20) - 0.05
    with pytest.raises(ValueError, match="window_noise must be >= 0"):
        JudgeParams(window_noise=-1.0)


def test_params_are_checked_and_regimes_named() -> None:
    with pytest.raises(ValueError, match="noise must be >= 0"):
        JudgeParams(noise=-1.0)
    with pytest.raises(ValueError, match="probability"):
        JudgeParams(echo=1.5)
    with pytest.raises(ValueError, match="known: mild"):
        JudgeParams.regime("loud")
    varied = JudgeParams.regime("noisy").but(echo=0.5)
    assert varied.echo == 0.5 and varied.name == "noisy[echo=0.5]"
