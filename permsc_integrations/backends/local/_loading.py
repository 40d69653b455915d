"""What loading a local transformers model needs before it reads a file: torch and
transformers (named in the error when missing), the device and dtype, the model's path, and
no loading bars. :mod:`.transformers` loads and generates.

Example:
    >>> from permsc_integrations.backends.local._loading import auto_device
    >>> auto_device("cpu", "float32")  # doctest: +SKIP
    ('cpu', 'float32')
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from permsc_integrations.errors import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:  # optional dependencies (the local extra), imported where used
    from torch import dtype as DType

__all__ = ["auto_device", "quiet_loading", "require", "split_path"]


def require() -> tuple[ModuleType, ModuleType]:
    try:
        # lazy: optional dependency (the local extra)
        import torch
        import transformers
    except ImportError as exc:
        missing = "torch" if "torch" in str(exc) else "transformers"
        raise MissingDependencyError(missing, "local", purpose="local transformers models") from exc
    return torch, transformers


def _cpu_dtype(torch: ModuleType) -> str:
    """bfloat16 where the CPU computes it natively (about 3x faster here), else float32."""
    try:
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        native = False
    return "bfloat16" if native and torch.backends.mkldnn.is_available() else "float32"


def auto_device(device: str | None = None, dtype: str | DType | None = None) -> tuple[str, str]:
    """``(device, dtype)``: CUDA + bfloat16 where available, else the CPU, in bfloat16 where
    the CPU has native bfloat16 (AVX512-BF16, AMX) and float32 elsewhere.

    >>> auto_device("cpu", "float32")
    ('cpu', 'float32')
    """
    torch, _ = require()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype is None:
        if str(device).startswith("cuda"):
            dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        else:
            dtype = _cpu_dtype(torch)
    name = str(dtype).removeprefix("torch.")
    if not isinstance(getattr(torch, name, None), torch.dtype):
        raise ConfigurationError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
    return str(device), name


def split_path(model: str | os.PathLike[str], gguf_file: str | None) -> tuple[str, str | None]:
    path = Path(model).expanduser()
    if gguf_file is None and path.suffix.lower() == ".gguf":
        path, gguf_file = path.parent, path.name
    if not path.is_dir():
        raise ConfigurationError(
            f"local model not found: {str(path)!r}; give a model directory (config.json and "
            f"weights) or a .gguf file. Nothing is downloaded."
        )
    if gguf_file is not None and not (path / gguf_file).is_file():
        raise ConfigurationError(f"GGUF file not found: {str(path / gguf_file)!r}")
    return str(path.resolve()), gguf_file


_BAR = "tqdm"  # the GGUF converter's progress bar, a module attribute


@contextmanager
def quiet_loading(transformers: ModuleType) -> Iterator[None]:
    """No loading progress bars (transformers' own and the GGUF converter's tqdm)."""
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        gguf_utils = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    except ImportError:  # another transformers layout: its bar just shows
        gguf_utils = None
    original = getattr(gguf_utils, _BAR, None)
    if gguf_utils is not None and original is not None:
        setattr(gguf_utils, _BAR, functools.partial(original, disable=True))
    try:
        yield
    finally:
        if gguf_utils is not None and original is not None:
            setattr(gguf_utils, _BAR, original)
        if bars:
            transformers.utils.logging.enable_progress_bar()
