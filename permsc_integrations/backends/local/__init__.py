"""Backends that run a model in this process: transformers (:mod:`.transformers`), llama.cpp
(:mod:`.llamacpp`), the embedded GGUF model (:mod:`.embedded`), with the model files'
store (:mod:`.model_store`), the GGUF-to-transformers cache (:mod:`.gguf_cache`) and the stop
for answers that repeat themselves (:mod:`.repetition`).

Each imports its optional dependency (torch, transformers, llama-cpp-python) only when used.
"""
