"""Backends that run a model in this process: transformers (:mod:`.transformers`, public: the
class docs/local.md shows), llama.cpp (:mod:`._llamacpp`), the embedded GGUF model
(:mod:`._embedded`), with the model files' store (:mod:`._model_store`), a GGUF's tokenizer
kept and its weights read (:mod:`._gguf_cache`, :mod:`._gguf_weights`) and the stop for answers
that repeat themselves (:mod:`._repetition`). Users reach them by spec string
(``"transformers:..."``, ``"llamacpp:..."``, ``"embedded"``) through ``resolve_backend``.

Each imports its optional dependency (torch, transformers, llama-cpp-python) only when used.
"""

from typing import TYPE_CHECKING

from permsc_integrations._registry import lazy_exports

if TYPE_CHECKING:
    from permsc_integrations.backends.local._embedded import (
        embedded_backend as embedded_backend,
    )
    from permsc_integrations.backends.local._embedded import (
        embedded_names as embedded_names,
    )
    from permsc_integrations.backends.local._embedded import (
        model_and_engine as model_and_engine,
    )
    from permsc_integrations.backends.local._model_store import (
        EMBEDDED_MODELS as EMBEDDED_MODELS,
    )
    from permsc_integrations.backends.local._model_store import (
        default_model as default_model,
    )
    from permsc_integrations.backends.local._model_store import (
        part_files as part_files,
    )

__all__: list[str] = []

# Besides __all__ (none), what ``permsc models`` and the install check build on, loaded on
# first use: the core's internal API of this package.
__getattr__ = lazy_exports(
    __name__,
    {
        "embedded_backend": "permsc_integrations.backends.local._embedded",
        "embedded_names": "permsc_integrations.backends.local._embedded",
        "model_and_engine": "permsc_integrations.backends.local._embedded",
        "EMBEDDED_MODELS": "permsc_integrations.backends.local._model_store",
        "default_model": "permsc_integrations.backends.local._model_store",
        "part_files": "permsc_integrations.backends.local._model_store",
    },
)
