"""LlamaIndex node postprocessor for permutation self-consistency (PSC) reranking.

Example:
    >>> from llama_index.postprocessor.permsc import PSCRerank
    >>> PSCRerank.class_name()
    'PSCRerank'
"""

from llama_index.postprocessor.permsc.base import PSCRerank
from llama_index.postprocessor.permsc.llm_backend import LlamaIndexLLMBackend
from llama_index.postprocessor.permsc.prompts import (
    DEFAULT_RERANK_PROMPT_TMPL,
    default_rerank_prompt,
    to_core_prompt,
)

__all__ = [
    "PSCRerank",
    "LlamaIndexLLMBackend",
    "DEFAULT_RERANK_PROMPT_TMPL",
    "default_rerank_prompt",
    "to_core_prompt",
]
