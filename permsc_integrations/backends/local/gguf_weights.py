"""A GGUF file's weights, read straight from the file into transformers' parameter names.

transformers reads a GGUF through ``gguf.GGUFReader``, which parses every metadata field
element by element (about 14 s for the 1.5B model's 151,936-token vocabulary on two cores),
then dequantises each tensor in small row groups (about 19 s more). Only the tensors are
needed once the model's config and tokenizer are known (:mod:`.gguf_cache` keeps those), so
:func:`read_index` parses the header's metadata only as far as skipping it, and
:func:`state_dict` dequantises each tensor in large chunks with the same ``gguf`` code
(bit for bit the values transformers would load), mapping the names and layouts with
transformers' own GGUF tables. The 1.5B model's weights load in about 10 s, with no copy
of them on disk.

Example:
    >>> from permsc_integrations.backends.local.model_store import gguf_path
    >>> index = read_index(gguf_path("smollm2-135m"))  # doctest: +SKIP
    >>> index.architecture, len(index.tensors)  # doctest: +SKIP
    ('llama', 272)
"""

from __future__ import annotations

import functools
import math
import mmap
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal, overload

import numpy as np

if TYPE_CHECKING:  # optional dependencies (the local extra), imported where used
    from torch import Tensor
    from torch import dtype as DType
    from transformers import PretrainedConfig

__all__ = ["TensorInfo", "GgufIndex", "read_index", "state_dict"]

_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9
_CHUNK_BYTES = 8 << 20  # quantised bytes dequantised at a time (about 60 MB of floats)


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor of a GGUF file: ``shape`` in numpy order, ``ggml_type`` and where its
    bytes start (from the start of the data section)."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int


@dataclass(frozen=True, slots=True)
class GgufIndex:
    """What :func:`state_dict` needs of a GGUF file: its architecture and its tensors."""

    architecture: str
    tensors: tuple[TensorInfo, ...]
    data_start: int


class _Cursor:
    """Little-endian reads from a buffer, moving forward."""

    def __init__(self, buffer: mmap.mmap) -> None:
        self.buffer, self.at = buffer, 0

    @overload
    def read(self, fmt: Literal["I", "Q"]) -> int: ...
    @overload
    def read(self, fmt: str) -> int | float: ...
    def read(self, fmt: str) -> int | float:
        """One scalar of struct format ``fmt`` (``"I"``, ``"Q"``: a count or an offset)."""
        (value,) = struct.unpack_from("<" + fmt, self.buffer, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        size = self.read("Q")
        self.at += size
        return bytes(self.buffer[self.at - size : self.at]).decode("utf-8", "replace")

    def skip_strings(self, count: int) -> None:
        buffer, at = self.buffer, self.at
        for _ in range(count):
            at += 8 + struct.unpack_from("<Q", buffer, at)[0]
        self.at = at

    def value(self, kind: int) -> str | int | float | None:
        """One metadata value; an array's elements are skipped (None), a scalar returned."""
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner, count = self.read("I"), self.read("Q")
            if inner == _STRING:
                self.skip_strings(count)
            elif inner in _SCALARS:
                self.at += count * struct.calcsize(_SCALARS[inner])
            else:
                for _ in range(count):
                    self.value(inner)
            return None
        return self.read(_SCALARS[kind])


def read_index(path: Path) -> GgufIndex:
    """The architecture and tensor table of the GGUF file ``path`` (metadata skipped)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        c = _Cursor(mm)
        if bytes(mm[:4]) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        c.at = 4
        version, n_tensors, n_fields = c.read("I"), c.read("Q"), c.read("Q")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        meta: dict[str, str | int | float | None] = {}
        for _ in range(n_fields):
            key = c.string()
            meta[key] = c.value(c.read("I"))
        tensors = tuple(_tensor_info(c) for _ in range(n_tensors))
        align = int(meta.get("general.alignment") or 32)
        return GgufIndex(str(meta["general.architecture"]), tensors, -(-c.at // align) * align)


def _tensor_info(c: _Cursor) -> TensorInfo:
    name = c.string()
    dims = [c.read("Q") for _ in range(c.read("I"))]
    ggml_type, offset = c.read("I"), c.read("Q")
    return TensorInfo(name, tuple(reversed(dims)), ggml_type, offset)


def _values(mm: mmap.mmap, start: int, info: TensorInfo) -> np.ndarray:
    """One tensor as float32: a float tensor read as it is, a quantised one dequantised by
    gguf's own code for its type, a few MB of blocks at a time."""
    # lazy: optional dependency (gguf, the local extra)
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants

    kind = GGMLQuantizationType(info.ggml_type)
    floats = {GGMLQuantizationType.F32: np.float32, GGMLQuantizationType.F16: np.float16}
    if kind in floats:
        raw = np.frombuffer(mm, floats[kind], math.prod(info.shape), start + info.offset)
        return raw.reshape(info.shape).astype(np.float32)
    elements, size = GGML_QUANT_SIZES[kind]
    count = math.prod(info.shape) // elements
    blocks = np.frombuffer(mm, np.uint8, count * size, start + info.offset).reshape(count, size)
    step = max(1, _CHUNK_BYTES // size)
    unpack = getattr(quants, kind.name).dequantize_blocks  # the per-type code gguf uses
    out = np.empty((count, elements), dtype=np.float32)
    for at in range(0, count, step):
        out[at : at + step] = unpack(blocks[at : at + step])
    return out.reshape(info.shape)


def _tensors(path: Path, index: GgufIndex) -> Iterator[tuple[str, np.ndarray]]:
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for info in index.tensors:
            yield info.name, _values(mm, index.data_start, info)


@contextmanager
def _name_maps_once() -> Iterator[None]:
    """transformers' name mapping builds gguf's name table of the architecture again for
    every submodule (10 s for SmolLM2's 397): build each once while it runs."""
    # lazy: optional dependency (gguf, the local extra)
    import gguf

    original = gguf.get_tensor_name_map
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(original)
    try:
        yield
    finally:
        gguf.get_tensor_name_map = original


def state_dict(
    path: Path,
    config: PretrainedConfig,
    dtype: DType,
    torch: ModuleType,
    transformers: ModuleType,
) -> dict[str, Tensor]:
    """The model's parameters by transformers' names, in ``dtype``, from the GGUF ``path``,
    mapped (names, and the layouts llama.cpp permutes) by transformers' own GGUF tables."""
    # lazy: optional dependency (transformers' GGUF tables, the local extra)
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
    )

    index = read_index(path)
    with torch.device("meta"):
        skeleton = transformers.AutoModelForCausalLM.from_config(config)
    processor = TENSOR_PROCESSORS.get(index.architecture, TensorProcessor)(config=config.to_dict())
    with _name_maps_once():
        names = get_gguf_hf_weights_map(skeleton, processor)
    parsed: dict[str, dict[str, Tensor]] = {"tensors": {}}
    for name, weights in _tensors(path, index):
        result = processor.process(
            weights=weights, name=name, tensor_key_mapping=names, parsed_parameters=parsed
        )
        if result.name in names:
            tensor = torch.from_numpy(np.ascontiguousarray(result.weights))
            parsed["tensors"][names[result.name]] = tensor.to(dtype)
    return parsed["tensors"]
