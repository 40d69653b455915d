"""First-token scoring (issue 22): the option, the prompt, the engine path through both
strategies and adaptive m, the probability aggregators and the saved samples.

The backend here is an in-process first-token scorer whose probabilities follow a number
written in each item (a known truth for the strategies); the real logits are tested on the
embedded model in tests/test_first_token_local.py."""

from __future__ import annotations

import re

import pytest

from permsc_integrations import PSCRanker
from permsc_integrations._options.options import RankingOptions
from permsc_integrations.aggregators import aggregate, available
from permsc_integrations.backends.base import Completion, LabelProbabilities
from permsc_integrations.errors import BackendError, ConfigurationError
from permsc_integrations.eval._datasets import SortingExample
from permsc_integrations.eval._passages import acollect_passages
from permsc_integrations.eval._samples import ListSamples, SampleLog, read_priors, read_samples
from permsc_integrations.eval._trec import Candidate, Query
from permsc_integrations.prompts._first_token import FirstTokenPrompt, first_token_prompt
from permsc_integrations.results import Usage
from permsc_integrations.testing import best_first

ITEM = re.compile(r"^\[([A-Z])\] value (\d+)", re.M)


class ValueScorer:
    """Probabilities proportional to 1 + the value written in each item (best: largest), with
    a position bias towards label A; counts its calls and batches."""

    name = "value-scorer"

    def __init__(self, bias: float = 0.0) -> None:
        self.bias, self.calls, self.batches = bias, 0, 0
        self.seen_labels: list[tuple[str, ...]] = []

    async def acomplete(self, messages, settings):  # pragma: no cover - never called
        raise AssertionError("first-token scoring must not generate")

    def _one(self, messages, labels) -> LabelProbabilities:
        found = dict(ITEM.findall(messages[-1]["content"]))  # placeholders count as 0
        weights = [1.0 + int(found.get(label, 0)) for label in labels]
        weights[0] += self.bias * sum(weights)
        total = sum(weights)
        self.seen_labels.append(tuple(labels))
        return LabelProbabilities(
            tuple(w / total for w in weights), 0.9, Usage(prompt_tokens=50, completion_tokens=1)
        )

    async def afirst_token(self, messages, labels, settings):
        self.calls += 1
        return self._one(messages, labels)

    async def aclose(self):
        pass


class BatchValueScorer(ValueScorer):
    async def afirst_token_batch(self, batch, labels, settings):
        self.batches += 1
        return [self._one(m, labels) for m in batch]


def items(n: int, seed: int = 1) -> list[str]:
    import random

    values = list(range(n))
    random.Random(seed).shuffle(values)
    return [f"value {v}" for v in values]


# --- the option ---------------------------------------------------------------------------


def test_scoring_option_is_declared_once_with_its_values():
    assert RankingOptions().scoring == "generate"
    assert RankingOptions(scoring="first_token").scoring == "first_token"
    info = {i.name: i for i in RankingOptions.describe()}["scoring"]
    assert info.cli_type is str and "first_token" in info.help
    with pytest.raises(ConfigurationError, match="scoring must be one of generate, first_token"):
        RankingOptions(scoring="logits")


def test_a_window_larger_than_the_labels_is_refused():
    with pytest.raises(ConfigurationError, match="has 26 labels; window_size=27"):
        RankingOptions(scoring="first_token", window_size=27)
    RankingOptions(scoring="first_token", window_size=26)
    RankingOptions(window_size=27)  # generation has no labels


def test_probability_aggregators_need_first_token_scoring():
    assert {"mean_probability", "mean_log_probability"} <= set(available())
    with pytest.raises(ConfigurationError, match="reads first-token probabilities"):
        RankingOptions(aggregator="mean_probability")
    with pytest.raises(ConfigurationError, match="reads first-token probabilities"):
        aggregate([[0, 1]], method="mean_probability", n_items=2)
    RankingOptions(aggregator="mean_probability", scoring="first_token")


def test_the_cache_is_refused_in_first_token_mode():
    from permsc_integrations._calls.cache import MemoryCache

    with pytest.raises(ConfigurationError, match="first_token scoring does not use it"):
        RankingOptions(scoring="first_token", cache=MemoryCache())


# --- the prompt ---------------------------------------------------------------------------


def test_prompt_labels_items_and_asks_for_one_label():
    p = first_token_prompt("rankgpt", max_words=2)
    [system, user] = p.render("goldfish", ["one two three", "four"])
    assert "[A] one two\n[B] four" in user["content"]
    assert user["content"].endswith("Answer with its letter only (A-B).")
    assert "Search Query: goldfish" in user["content"]
    assert first_token_prompt("wordsort").task == "wordsort"
    assert first_token_prompt("wordsort").max_words is None
    assert first_token_prompt(p) is p
    with pytest.raises(ConfigurationError, match="has no first-token form"):
        first_token_prompt("template")
    with pytest.raises(ConfigurationError, match="needs 3 labels; this prompt has 2"):
        FirstTokenPrompt(labels=("X", "Y")).render("q", ["a", "b", "c"])
    with pytest.raises(ConfigurationError, match="distinct"):
        FirstTokenPrompt(labels=("X", "X"))


def test_build_prompt_gives_the_first_token_form():
    assert RankingOptions(scoring="first_token", max_words=7).build_prompt() == FirstTokenPrompt(
        "passages", 7
    )


# --- the engine ---------------------------------------------------------------------------


def test_a_window_is_one_batch_and_samples_keep_their_probabilities():
    backend = BatchValueScorer()
    texts = items(6)
    with PSCRanker(
        backend, scoring="first_token", num_permutations=5, aggregator="mean_probability"
    ) as ranker:
        result = ranker.rank("largest?", texts)
    assert backend.batches == 1 and backend.calls == 0
    assert list(result.order) == best_first(texts)
    assert result.usage.calls == 5 and result.usage.completion_tokens == 5  # one pass, 5 prompts
    assert result.usage.prompt_tokens == 250
    for s in result.samples:
        assert s.ok and len(s.probabilities) == 6 and abs(sum(s.probabilities) - 1) < 1e-9
        assert s.label_mass == 0.9 and s.usage.completion_tokens == 1
        probs = s.item_probabilities()
        assert list(s.ranking) == sorted(probs, key=lambda i: (-probs[i], s.permutation.index(i)))
        assert s.raw_text == "ABCDEF"[s.permutation.index(s.ranking[0])]
    # the result's scores are the mean probabilities: in [0, 1], summing to 1 over one window
    assert abs(sum(result.scores) - 1) < 1e-9
    assert result.scores[result.order[0]] == max(result.scores)


def test_ties_break_by_prompt_position():
    from permsc_integrations._run.first_token import scored_sample

    s = scored_sample((3, 1, 2), LabelProbabilities((0.25, 0.5, 0.25)), ("A", "B", "C"))
    assert s.ranking == (1, 3, 2)


@pytest.mark.parametrize("strategy", ["blocks", "sliding"])
@pytest.mark.parametrize("aggregator", ["kemeny", "mean_probability", "mean_log_probability"])
def test_both_strategies_rank_long_lists(strategy, aggregator):
    # a position bias moves the mean probability of the item shown first by 0.2 / m: more
    # than neighbouring values differ by, so the probability aggregators get none here
    backend = BatchValueScorer(bias=0.0 if aggregator.startswith("mean") else 0.2)
    texts = items(30, seed=3)
    with PSCRanker(
        backend,
        scoring="first_token",
        strategy=strategy,
        window_size=8,
        step=4,
        num_permutations=4,
        aggregator=aggregator,
        top_k=5,
    ) as ranker:
        result = ranker.rank("largest?", texts)
    assert list(result.order[:5]) == best_first(texts)[:5]
    assert sorted(result.order) == list(range(30))
    assert all(len(labels) <= 8 for labels in backend.seen_labels)
    assert result.usage.completion_tokens == len(result.samples)


def test_blocks_of_unequal_sizes_get_their_own_labels():
    backend = BatchValueScorer()
    with PSCRanker(
        backend, scoring="first_token", window_size=7, num_permutations=2, top_k=3
    ) as ranker:
        ranker.rank("largest?", items(20))
    sizes = {len(labels) for labels in backend.seen_labels}
    assert sizes >= {6, 7}  # 20 items in blocks of at most 7: 7, 7, 6
    for labels in backend.seen_labels:
        assert labels == tuple("ABCDEFG"[: len(labels)])


def test_adaptive_m_stops_early_on_probabilities():
    backend = BatchValueScorer()
    with PSCRanker(
        backend,
        scoring="first_token",
        num_permutations=20,
        adaptive="4,2",
        aggregator="mean_probability",
    ) as ranker:
        result = ranker.rank("largest?", items(8))
    assert 4 <= len(result.samples) < 20
    assert result.usage.saved_calls == 20 - len(result.samples)
    assert list(result.order) == best_first(items(8))


def test_a_backend_without_batches_gets_one_call_a_sample():
    backend = ValueScorer()
    with PSCRanker(backend, scoring="first_token", num_permutations=3) as ranker:
        result = ranker.rank("largest?", items(5))
    assert backend.calls == 3 and result.usage.calls == 3


def test_a_generating_backend_is_refused_by_name():
    class Generator:
        name = "gen-only"

        async def acomplete(self, messages, settings):
            return Completion(text="[1] > [2]")

        async def aclose(self):
            pass

    with pytest.raises(ConfigurationError, match="'gen-only' has none.*scoring='generate'"):
        PSCRanker(Generator(), scoring="first_token")
    PSCRanker(Generator())  # generation stays available


def test_a_failing_batch_fails_its_samples_and_never_generates():
    class Broken(BatchValueScorer):
        async def afirst_token_batch(self, batch, labels, settings):
            raise BackendError("no logits today", retryable=False)

    from permsc_integrations.errors import InsufficientSamplesError

    with PSCRanker(Broken(), scoring="first_token", num_permutations=3) as ranker:
        with pytest.raises(InsufficientSamplesError):
            ranker.rank("largest?", items(4))


def test_malformed_probabilities_fail_the_sample():
    class Short(BatchValueScorer):
        async def afirst_token_batch(self, batch, labels, settings):
            return [LabelProbabilities((1.0,)) for _ in batch]

    from permsc_integrations.errors import InsufficientSamplesError

    with PSCRanker(Short(), scoring="first_token", num_permutations=2) as ranker:
        with pytest.raises(InsufficientSamplesError) as info:
            ranker.rank("largest?", items(4))
    assert "1 probabilities for 4 labels" in str(info.value.failures[0])


# --- aggregators --------------------------------------------------------------------------


def test_mean_and_mean_log_probability_differ_on_a_confident_outlier():
    # item 0: 0.9, 0.001, 0.6 (mean 0.5003, geometric 0.081); item 1: 0.1, 0.999, 0.4
    probs = [{0: 0.9, 1: 0.1}, {0: 0.001, 1: 0.999}, {0: 0.6, 1: 0.4}]
    rankings = [[0, 1], [1, 0], [0, 1]]
    by_mean = aggregate(rankings, method="mean_probability", n_items=2, probabilities=probs)
    by_log = aggregate(rankings, method="mean_log_probability", n_items=2, probabilities=probs)
    assert (by_mean, by_log) == ([0, 1], [1, 0])
    from permsc_integrations.aggregators._probability import mean_log_probability

    geo = mean_log_probability.item_scores(probs, n_items=2)
    assert geo[0] == pytest.approx(0.00054 ** (1 / 3)) and geo[1] == pytest.approx(
        0.03996 ** (1 / 3)
    )


def test_an_item_no_sample_showed_goes_last():
    from permsc_integrations.aggregators._probability import mean_probability

    probs = [{1: 0.7, 2: 0.3}]
    assert mean_probability([[1, 2]], n_items=3, probabilities=probs) == [1, 2, 0]
    assert mean_probability.item_scores(probs, n_items=3) == [0.0, 0.7, 0.3]


# --- saved samples ------------------------------------------------------------------------


def test_samples_files_keep_probabilities_and_resume_to_a_larger_m(tmp_path):
    queries = [
        Query(
            f"q{k}", "largest?", tuple(Candidate(f"d{k}{i}", t) for i, t in enumerate(items(6, k)))
        )
        for k in range(2)
    ]
    path = tmp_path / "s.jsonl"
    config = {"task": "trec", "m": 2, "scoring": "first_token", "window": 3}
    log = SampleLog.create(path, config)
    backend = BatchValueScorer()
    first = _collect(queries, backend, 2, log)
    log.close()
    assert backend.batches == 1 + 2  # the prior of blocks of 3, then one batch per query
    _, done = read_samples(path)
    assert done["q0"].probabilities == first[0].probabilities
    assert done["q0"].permutations[:2] == ((0, 1, 2), (3, 4, 5))  # the first-stage order first
    with pytest.raises(ConfigurationError, match="window: 3 in the file, 2 now"):
        SampleLog.resume(path, {**config, "window": 2}, extend=True)
    log, done = SampleLog.resume(path, {**config, "m": 3}, extend=True)
    more = _collect(queries, backend, 3, log, done)
    log.close()
    assert backend.batches == 3 + 2  # the prior is in the file already
    assert len(backend.seen_labels) == 3 + 2 * 2 * 2 + 2 * 2  # only the third orders were drawn
    header, again = read_samples(path)
    assert header["m"] == 3 and len(again["q1"].rankings) == 6
    assert again["q1"] == more[1]
    assert more[1].permutations[:4] == first[1].permutations
    with pytest.raises(ConfigurationError, match="scoring: 'first_token' in the file"):
        SampleLog.resume(path, {**config, "m": 3, "scoring": "generate"}, extend=True)
    with pytest.raises(ConfigurationError, match="m: 3 in the file, 2 now"):
        SampleLog.resume(path, {**config, "m": 2}, extend=True)


def _collect(queries, backend, m, log, done=None, window=3):
    import anyio

    return anyio.run(
        lambda: acollect_passages(
            queries, backend, m=m, log=log, done=done, window=window, scoring="first_token"
        )
    )


def test_older_files_resume_as_generated(tmp_path):
    path = tmp_path / "old.jsonl"
    log = SampleLog.create(path, {"task": "wordsort", "m": 1})
    ex = SortingExample("w", ("b", "a"), ("b", "a"), "wordsort")
    log.write(ListSamples(ex, ((0, 1),), ((1, 0),), ("ok",), ("a\nb",)))
    log.close()
    SampleLog.resume(path, {"task": "wordsort", "m": 1, "scoring": "generate"})[0].close()
    with pytest.raises(ConfigurationError, match="scoring: 'generate' in the file"):
        SampleLog.resume(path, {"task": "wordsort", "m": 1, "scoring": "first_token"})


# --- where the option shows -----------------------------------------------------------------


def test_permsc_rank_and_eval_offer_scoring_from_the_declaration(capsys):
    from permsc_integrations.cli import main

    for command in ("rank", "eval"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "--scoring SCORING" in out and "first_token (one output token" in out


def test_both_adapters_declare_scoring():
    pytest.importorskip("langchain_core")
    from langchain_permsc import PSCReranker

    assert PSCReranker.model_fields["scoring"].default == "generate"
    pytest.importorskip("llama_index.core")
    from llama_index.postprocessor.permsc import PSCRerank

    assert PSCRerank.model_fields["scoring"].default == "generate"
    with pytest.raises(ConfigurationError, match="scoring must be one of"):
        PSCReranker(backend="openai:m", scoring="logits")


# --- calibration and the first-stage vote -------------------------------------------------


class Biased(BatchValueScorer):
    """A strong pull to label A, whatever the items are (placeholders included)."""

    def _one(self, messages, labels):
        found = dict(ITEM.findall(messages[-1]["content"]))
        weights = [1.0 + int(found.get(label, 0)) for label in labels]
        weights[0] *= 50
        total = sum(weights)
        self.seen_labels.append(tuple(labels))
        return LabelProbabilities(tuple(w / total for w in weights), 0.9, Usage(10, 1))


def test_the_prior_comes_from_placeholders_and_is_cached():
    import anyio

    from permsc_integrations._run.calibration import PLACEHOLDERS, PriorCache
    from permsc_integrations.prompts._first_token import FirstTokenPrompt

    backend, cache, prompt = Biased(), PriorCache(), FirstTokenPrompt()
    prior = anyio.run(cache.aget, backend, prompt, 4)
    assert backend.batches == 1 and len(backend.seen_labels) == len(PLACEHOLDERS)
    assert prior.probabilities == pytest.approx((50 / 53, 1 / 53, 1 / 53, 1 / 53))
    assert anyio.run(cache.aget, backend, prompt, 4) is prior and backend.batches == 1
    anyio.run(cache.aget, backend, prompt, 3)
    assert backend.batches == 2  # one prior per window size


def test_the_prior_cache_persists_to_a_file(tmp_path):
    import anyio

    from permsc_integrations._run.calibration import PriorCache
    from permsc_integrations.prompts._first_token import FirstTokenPrompt

    path = tmp_path / "priors.json"
    backend, prompt = Biased(), FirstTokenPrompt()
    first = anyio.run(PriorCache(path).aget, backend, prompt, 4)
    again = PriorCache(path).get(backend, prompt, 4)
    assert again is not None and again.probabilities == pytest.approx(first.probabilities)


def test_calibration_undoes_a_position_bias_in_one_call():
    texts = items(5, seed=4)
    options = {"scoring": "first_token", "num_permutations": 1, "seed": 1}  # best not shown first
    with PSCRanker(Biased(), **options) as raw:
        plain = raw.rank("largest?", texts)
    with PSCRanker(Biased(), calibrate=True, **options) as cal:
        fixed = cal.rank("largest?", texts)
    shown_first = plain.samples[0].permutation[0]
    assert plain.order[0] == shown_first != best_first(texts)[0]  # the bias wins uncalibrated
    assert list(fixed.order) == best_first(texts)
    assert sum(fixed.samples[0].probabilities) == pytest.approx(1.0)
    with pytest.raises(ConfigurationError, match="calibrate=True calibrates first-token"):
        RankingOptions(calibrate=True)


def test_the_first_stage_vote_is_off_by_default_and_weighted():
    from permsc_integrations.aggregators import fuse_first_stage

    texts = [f"value {v}" for v in (0, 1, 2, 3, 4)]  # the first stage has them worst first
    with PSCRanker(BatchValueScorer(), scoring="first_token", num_permutations=3) as ranker:
        assert ranker.rank("largest?", texts).order == (4, 3, 2, 1, 0)
    with PSCRanker(
        BatchValueScorer(), scoring="first_token", num_permutations=3, first_stage_weight=1.0
    ) as ranker:
        assert ranker.rank("largest?", texts).order == (0, 1, 2, 3, 4)
    assert fuse_first_stage([2, 1, 0], 0.5, first_stage=[1, 0, 2]) == [1, 2, 0]
    with pytest.raises(ConfigurationError, match="first_stage_weight must be a number in 0..1"):
        RankingOptions(first_stage_weight=1.5)


# --- scoring a first-token samples file -------------------------------------------------------


def test_a_first_token_file_is_scored_with_every_row(tmp_path, capsys):
    from permsc_integrations.cli import main

    queries = [
        Query(
            f"q{k}", "largest?", tuple(Candidate(f"d{k}{i}", t) for i, t in enumerate(items(6, k)))
        )
        for k in range(3)
    ]
    qrels = tmp_path / "qrels.txt"
    judged = [(q.qid, c.docid, int(c.text.split()[1]) // 2) for q in queries for c in q.candidates]
    lines = [f"{qid} 0 {docid} {grade}\n" for qid, docid, grade in judged]
    qrels.write_text("".join(lines))
    path = tmp_path / "s.jsonl"
    config = {"task": "trec", "m": 4, "scoring": "first_token", "window": 3}
    log = SampleLog.create(path, config)
    _collect(queries, Biased(), 4, log)
    log.close()
    assert set(read_priors(path)) == {3}
    args = ["eval", "--from-samples", str(path), "--qrels", str(qrels), "--m-sweep", "1,3"]
    assert main([*args, "--aggregators", "kemeny,mean_probability"]) == 0
    out = capsys.readouterr().out
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([\d.]+) \|", out, re.M))
    assert {"first stage", "random order", "single pass", "single pass, calibrated"} <= set(rows)
    assert "PSC m=3 mean_probability, calibrated" in rows and "PSC m=4 kemeny" not in rows
    assert "PSC m=3 kemeny + first stage (LOO w)" in rows
    # the bias to A ruins the single pass and PSC's mean; the prior removes it
    assert float(rows["single pass, calibrated"]) > float(rows["single pass"])
    calibrated = float(rows["PSC m=3 mean_probability, calibrated"])
    assert calibrated > float(rows["PSC m=3 mean_probability"]) and calibrated > 99
    # chance: well below the perfect order, the same on every run (seeded by the list's id)
    assert 20 < float(rows["random order"]) < 90
    # every shuffled answer puts its most probable label on A: said, with the chance share
    assert "Most probable label of the shuffled samples: A in 100.0 % of them" in out
    assert "about 33 %" in out  # windows of 3 labels
    assert main([*args, "--aggregators", "kemeny"]) == 0
    again = dict(re.findall(r"^\| ([^|]+?) \| ([\d.]+) \|", capsys.readouterr().out, re.M))
    assert again["random order"] == rows["random order"]


def _queries_and_qrels(tmp_path, n_queries, n_items):
    """Queries of shuffled values and a qrels file that judges each one's first passage."""
    queries = [
        Query(
            f"q{k}",
            "largest?",
            tuple(Candidate(f"d{k}{i}", t) for i, t in enumerate(items(n_items, k))),
        )
        for k in range(n_queries)
    ]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q.qid} 0 {q.candidates[0].docid} 1\n" for q in queries))
    return queries, qrels


def test_a_scorer_that_reads_the_items_has_no_favourite_label(tmp_path, capsys):
    """The top-label line tells a model that answers by position from one that reads: a
    scorer that follows the values puts its top label where the shuffle put the best item."""
    from permsc_integrations.cli import main

    queries, qrels = _queries_and_qrels(tmp_path, 8, 6)
    path = tmp_path / "s.jsonl"
    log = SampleLog.create(path, {"task": "trec", "m": 6, "scoring": "first_token", "window": 6})
    _collect(queries, BatchValueScorer(), 6, log, window=6)
    log.close()
    args = ["eval", "--from-samples", str(path), "--qrels", str(qrels), "--m-sweep", "5"]
    assert main([*args, "--aggregators", "kemeny"]) == 0
    out = capsys.readouterr().out
    share = float(re.search(r"shuffled samples: [A-F] in ([\d.]+) % of them", out)[1])
    assert share < 50 and "about 17 %" in out  # 40 shuffled samples over 6 labels


def test_the_sliding_trec_evaluation_runs_in_first_token_mode():
    import anyio

    from permsc_integrations.eval._runner import aevaluate_trec

    texts = items(12, seed=5)
    query = Query("q", "largest?", tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts)))
    qrels = {"q": {f"d{i}": int(t.split()[1]) for i, t in enumerate(texts)}}
    backend = BatchValueScorer()
    report, runs = anyio.run(
        lambda: aevaluate_trec(
            [query], qrels, backend, m=3, window_size=6, step=3, scoring="first_token"
        )
    )
    assert runs["psc-kemeny"]["q"][:3] == [f"d{i}" for i in best_first(texts)[:3]]
    assert report.config["scoring"] == "first_token" and backend.batches > 0


def test_a_file_being_topped_up_is_scored_on_the_orders_every_list_has(tmp_path, capsys):
    from permsc_integrations.cli import main

    queries, qrels = _queries_and_qrels(tmp_path, 2, 4)
    path = tmp_path / "s.jsonl"
    config = {"task": "trec", "m": 3, "scoring": "first_token", "window": 3}  # as _collect
    log = SampleLog.create(path, config)
    _collect(queries, BatchValueScorer(), 3, log)
    log.close()
    SampleLog.resume(path, {**config, "m": 9}, extend=True)[0].close()  # stopped at once
    assert read_samples(path)[1] == {}  # no list is complete at m = 9
    args = ["eval", "--from-samples", str(path), "--qrels", str(qrels), "--m-sweep", "1,2,5"]
    assert main([*args, "--aggregators", "kemeny"]) == 0
    out = capsys.readouterr().out
    assert "2 lists, 2 shuffled orders each at most" in out
    assert "PSC m=2 kemeny" in out and "PSC m=5" not in out
