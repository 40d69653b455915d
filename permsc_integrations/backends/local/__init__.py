"""Backends that run a model in this process: transformers (:mod:`.transformers`, public: the
class docs/local.md shows), llama.cpp (:mod:`._llamacpp`), the embedded GGUF model
(:mod:`._embedded`), with the model files' store (:mod:`._model_store`), a GGUF's tokenizer
kept and its weights read (:mod:`._gguf_cache`, :mod:`._gguf_weights`) and the stop for answers
that repeat themselves (:mod:`._repetition`). Users reach them by spec string
(``"transformers:..."``, ``"llamacpp:..."``, ``"embedded"``) through ``resolve_backend``.

Each imports its optional dependency (torch, transformers, llama-cpp-python) only when used.
"""

__all__: list[str] = []
