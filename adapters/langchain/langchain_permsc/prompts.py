"""LangChain prompt templates as the core's user-template prompt.

A ``PromptTemplate`` or a ``ChatPromptTemplate`` (system and one human message) may use
``{query}``, ``{items}`` (the numbered passages, ``[1] text`` one a line) and ``{num}``; the
model must answer with identifiers (``[2] > [1] > [3]``). Variables bound with
``partial()`` are filled in.

Example:
    >>> from langchain_core.prompts import PromptTemplate
    >>> p = to_core_prompt(PromptTemplate.from_template("Q: {query}\\n{items}\\nRank them."))
    >>> print(p.render("goldfish", ["Goldfish grow.", "Cats purr."])[0]["content"])
    Q: goldfish
    [1] Goldfish grow.
    [2] Cats purr.
    Rank them.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.prompts import BasePromptTemplate

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration import TemplatePrompt

__all__ = ["to_core_prompt", "core_prompt"]

_PLACEHOLDERS = {"query": "{query}", "items": "{items}", "num": "{num}"}


def to_core_prompt(template: BasePromptTemplate, *, max_words: int | None = 300) -> TemplatePrompt:
    """The core :class:`TemplatePrompt` equivalent of ``template`` (partials applied)."""
    missing = sorted(set(template.input_variables) - set(_PLACEHOLDERS))
    if missing:
        raise ConfigurationError(
            f"the prompt template has variable(s) {missing} that the reranker cannot fill; use "
            "only {query}, {items} and {num}, or bind the others with .partial()"
        )
    values = {k: v for k, v in _PLACEHOLDERS.items() if k in template.input_variables}
    messages = template.format_prompt(**values).to_messages()
    system = [str(m.content) for m in messages if isinstance(m, SystemMessage)]
    users = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
    if len(users) != 1 or len(system) + len(users) != len(messages):
        kinds = [type(m).__name__ for m in messages]
        raise ConfigurationError(
            f"the prompt must be one human message (optionally after system messages); got {kinds}"
        )
    if "{items}" not in users[0]:
        raise ConfigurationError("the prompt's human message must contain {items}")
    return TemplatePrompt(
        user=users[0],
        system="\n\n".join(system) or None,
        max_words=max_words,
        name="langchain_template",
    )


def core_prompt(prompt: Any, max_words: int | None) -> Any:
    """A LangChain template converted; a core prompt name or object as given."""
    if isinstance(prompt, BasePromptTemplate):
        return to_core_prompt(prompt, max_words=max_words)
    return prompt
