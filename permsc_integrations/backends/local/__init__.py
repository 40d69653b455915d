"""Backends that run a model in this process: transformers (:mod:`.transformers`), llama.cpp
(:mod:`.llamacpp`), the embedded GGUF model (:mod:`.embedded`), with the model files'
store (:mod:`.model_store`), a GGUF's tokenizer kept and its weights read (:mod:`.gguf_cache`,
:mod:`.gguf_weights`) and the stop
for answers that repeat themselves (:mod:`.repetition`).

Each imports its optional dependency (torch, transformers, llama-cpp-python) only when used.
"""
