"""Map a LlamaIndex prompt template to the core's user-template prompt.

LlamaIndex names the variables ``{query_str}`` (the query) and ``{context_str}`` (the
numbered passages, ``[1] text`` one a line); ``{num}`` is the number of passages. The
template may hold a system message and exactly one user message; the model must answer with
identifiers (``[2] > [1] > [3]``).

Example:
    >>> from llama_index.core.prompts import PromptTemplate
    >>> p = to_core_prompt(PromptTemplate("Query: {query_str}\\n{context_str}\\nRank them."))
    >>> print(p.render("goldfish", ["Goldfish grow.", "Cats purr."])[0]["content"])
    Query: goldfish
    [1] Goldfish grow.
    [2] Cats purr.
    Rank them.
"""

from __future__ import annotations

from llama_index.core.base.llms.types import MessageRole
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration import TemplatePrompt

__all__ = ["DEFAULT_RERANK_PROMPT_TMPL", "to_core_prompt", "default_rerank_prompt"]

_PLACEHOLDERS = {"query_str": "{query}", "context_str": "{items}", "num": "{num}"}

DEFAULT_RERANK_PROMPT_TMPL = (
    "I will provide you with {num} passages, each indicated by a number identifier []. "
    "Rank the passages based on their relevance to the search query.\n\n"
    "{context_str}\n\n"
    "Search Query: {query_str}\n"
    "Rank the {num} passages above based on their relevance to the search query. List them "
    "in descending order using identifiers, the most relevant first. The output format "
    "should be [] > [], e.g., [2] > [1]. Only respond with the ranking, do not explain."
)
"""RankGPT's instruction in one user turn, for users who start from a LlamaIndex template."""


def default_rerank_prompt() -> PromptTemplate:
    """A fresh :class:`PromptTemplate` holding :data:`DEFAULT_RERANK_PROMPT_TMPL`."""
    return PromptTemplate(DEFAULT_RERANK_PROMPT_TMPL)


def to_core_prompt(template: BasePromptTemplate, *, max_words: int | None = 300) -> TemplatePrompt:
    """The core :class:`TemplatePrompt` equivalent of ``template`` (partials applied)."""
    missing = sorted(set(template.template_vars) - set(_PLACEHOLDERS) - set(template.kwargs))
    if missing:
        raise ConfigurationError(
            f"the rerank prompt has variable(s) {missing} that PSCRerank cannot fill; use only "
            "{query_str}, {context_str} and {num}, or bind the others with partial_format()"
        )
    messages = template.format_messages(None, **_PLACEHOLDERS)
    system = [m.content or "" for m in messages if m.role == MessageRole.SYSTEM]
    users = [m.content or "" for m in messages if m.role == MessageRole.USER]
    if len(users) != 1 or len(system) + len(users) != len(messages):
        roles = [str(m.role.value) for m in messages]
        raise ConfigurationError(
            f"the rerank prompt must be one user message (optionally after system messages); "
            f"got roles {roles}"
        )
    if "{items}" not in users[0]:
        raise ConfigurationError(
            "the rerank prompt's user message must contain {context_str}, where the numbered "
            "passages go"
        )
    return TemplatePrompt(
        user=users[0],
        system="\n\n".join(system) or None,
        max_words=max_words,
        name="llama_index_template",
    )
