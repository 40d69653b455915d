"""Label probabilities from a local causal LM's logits: one forward pass, no generation.

For first-token scoring (:mod:`permsc_integrations._run.first_token`) the transformers backend
reads the next-token distribution at the end of each prompt (the answer's first token) in one
left-padded forward pass over the batch, keeping only the last position's logits. Each label
must be exactly one token where the answer starts: checked against the tokenizer (the prompt's
tokens followed by the label's must be the prompt's plus one), once per tokenizer and labels.

Example:
    >>> import torch
    >>> from permsc_integrations.backends.local._logits import label_probabilities
    >>> logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    >>> probs, mass = label_probabilities(torch, logits, [1, 3])
    >>> [round(p, 3) for p in probs[0]], round(mass[0], 3)
    ([0.119, 0.881], 0.731)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from permsc_integrations.backends.base import LabelProbabilities
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.results import Usage

if TYPE_CHECKING:  # optional dependencies (the local extra), imported where used
    from torch import Tensor
    from transformers import BatchEncoding, GenerationConfig, PretrainedConfig
    from transformers import PreTrainedTokenizerBase as Tokenizer

__all__ = ["label_token_ids", "label_probabilities", "last_logits", "score_chunk"]

_IDS: dict[tuple[int, tuple[str, ...], str], tuple[int, ...]] = {}


class _Logits(Protocol):
    @property
    def logits(self) -> Tensor: ...


class CausalLM(Protocol):
    """What is used of a transformers causal LM (a model ``AutoModelForCausalLM`` loads):
    transformers types ``generate``'s result as every output it can make, and a loaded model
    as a ``PreTrainedModel``, which has no ``generate``."""

    @property
    def config(self) -> PretrainedConfig: ...

    @property
    def generation_config(self) -> GenerationConfig: ...

    def __call__(self, **inputs: object) -> _Logits: ...

    def generate(self, **inputs: object) -> Tensor: ...  # the ids (no return_dict)

    def to(self, device: str) -> CausalLM: ...

    def eval(self) -> CausalLM: ...


class Loaded(Protocol):
    """A loaded model, its tokenizer and the lock its calls take."""

    @property
    def model(self) -> CausalLM: ...

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def lock(self) -> threading.Lock: ...


def chat_text(tokenizer: Tokenizer, messages: list[dict[str, str]]) -> str:
    """``messages`` through the chat template, ending where the answer starts."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert isinstance(text, str)  # tokenize=False: the text (transformers types every form)
    return text


def label_token_ids(
    tokenizer: Tokenizer, prompt_text: str, labels: Sequence[str]
) -> tuple[int, ...]:
    """The token id of each label as the first token after ``prompt_text`` (a chat prompt
    ending where the answer starts); :class:`ConfigurationError` for a label that is not one
    token there, or two labels that share a token."""
    tail = prompt_text[-64:]  # the answer's start depends on the template's last tokens only
    key = (id(tokenizer), tuple(labels), tail)
    if key in _IDS:
        return _IDS[key]
    base = tokenizer(tail, add_special_tokens=False)["input_ids"]
    ids = []
    for label in labels:
        full = tokenizer(tail + label, add_special_tokens=False)["input_ids"]
        if len(full) != len(base) + 1 or full[: len(base)] != base:
            raise ConfigurationError(
                f"label {label!r} is not a single token where this model's answer starts "
                f"({len(full) - len(base)} tokens); use labels that are (e.g. capital letters)"
            )
        ids.append(int(full[-1]))
    if len(set(ids)) != len(ids):
        raise ConfigurationError(f"labels {list(labels)} share tokens in this tokenizer")
    _IDS[key] = tuple(ids)
    return _IDS[key]


def last_logits(torch: ModuleType, model: CausalLM, enc: BatchEncoding) -> Tensor:
    """The next-token logits at the end of each left-padded row, as float32 ``(rows, vocab)``:
    positions counted from each row's first real token, only the last position computed."""
    mask = enc["attention_mask"]
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        out = model(
            input_ids=enc["input_ids"],
            attention_mask=mask,
            position_ids=positions,
            use_cache=False,
            logits_to_keep=1,
        )
    return out.logits[:, -1, :].float()


def label_probabilities(
    torch: ModuleType, logits: Tensor, ids: Sequence[int]
) -> tuple[list[list[float]], list[float]]:
    """Per row: the labels' probabilities renormalised over the labels, and the mass the
    labels held in the full next-token distribution."""
    chosen = torch.log_softmax(logits.float(), dim=-1)[:, list(ids)].exp()
    mass = chosen.sum(dim=-1)
    probs = chosen / mass.clamp(min=torch.finfo(torch.float32).tiny).unsqueeze(-1)
    return probs.tolist(), mass.tolist()


def score_chunk(
    loaded: Loaded,
    chunk: list[list[dict[str, str]]],
    labels: tuple[str, ...],
    device: str,
    name: str,
    check_context: Callable[[CausalLM, int, int], None],
) -> list[LabelProbabilities]:
    """The label probabilities of each conversation of ``chunk`` on a loaded transformers
    model (``loaded``: its model, tokenizer and lock), in one left-padded forward pass;
    ``check_context(model, prompt_tokens, new_tokens)`` refuses a prompt too long."""
    # lazy: optional dependency (the local extra)
    import torch

    tok = loaded.tokenizer
    texts = [chat_text(tok, m) for m in chunk]
    ids = label_token_ids(tok, texts[0], labels)
    with loaded.lock:
        started = time.perf_counter()
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        check_context(loaded.model, enc["input_ids"].shape[1], 1)
        logits = last_logits(torch, loaded.model, enc.to(device))
        probs, mass = label_probabilities(torch, logits, ids)
        per_call = (time.perf_counter() - started) / len(chunk)
    lengths = enc["attention_mask"].sum(dim=1).tolist()
    return [
        LabelProbabilities(
            tuple(p),
            m,
            Usage(prompt_tokens=int(n), completion_tokens=1, calls=1, latency_s=per_call),
            name,
        )
        for p, m, n in zip(probs, mass, lengths, strict=True)
    ]
