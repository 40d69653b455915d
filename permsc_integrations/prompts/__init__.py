"""Listwise ranking prompts, chosen by name or passed as objects.

Built in: ``rankgpt`` (default for passages), ``rankvicuna``, ``mathsort``, ``wordsort``,
``gsm8ksort`` and ``template`` (your own wording). Third-party prompts register through the
entry-point group ``permsc_integrations.prompts`` or :func:`register_prompt`.

Example:
    >>> p = get_prompt("rankgpt", max_words=100)
    >>> p.name, p.max_words
    ('rankgpt', 100)
    >>> "mathsort" in available_prompts()
    True
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from permsc_integrations._registry import Registry, publish
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.prompts._base import Prompt
from permsc_integrations.prompts._first_token import (
    first_token_prompt as first_token_prompt,  # for _options
)

if TYPE_CHECKING:  # loaded on first use (module __getattr__)
    from permsc_integrations.prompts._rankgpt import RankGPTPrompt
    from permsc_integrations.prompts._rankvicuna import RankVicunaPrompt
    from permsc_integrations.prompts._sorting import GSM8KSortPrompt, MathSortPrompt, WordSortPrompt
    from permsc_integrations.prompts._template import TemplatePrompt

__all__ = [
    "Prompt",
    "get_prompt",
    "available_prompts",
    "register_prompt",
    "RankGPTPrompt",
    "RankVicunaPrompt",
    "MathSortPrompt",
    "WordSortPrompt",
    "GSM8KSortPrompt",
    "TemplatePrompt",
]

publish(__name__, Prompt)

ENTRY_POINT_GROUP = "permsc_integrations.prompts"

PromptFactory = Callable[..., Prompt]
"""``factory(**options) -> Prompt``."""

_BUILTIN: dict[str, str] = {
    "rankgpt": "permsc_integrations.prompts._rankgpt:RankGPTPrompt",
    "rankvicuna": "permsc_integrations.prompts._rankvicuna:RankVicunaPrompt",
    "mathsort": "permsc_integrations.prompts._sorting:MathSortPrompt",
    "wordsort": "permsc_integrations.prompts._sorting:WordSortPrompt",
    "gsm8ksort": "permsc_integrations.prompts._sorting:GSM8KSortPrompt",
    "template": "permsc_integrations.prompts._template:TemplatePrompt",
}
_CLASSES = {
    "RankGPTPrompt": "rankgpt",
    "RankVicunaPrompt": "rankvicuna",
    "MathSortPrompt": "mathsort",
    "WordSortPrompt": "wordsort",
    "GSM8KSortPrompt": "gsm8ksort",
    "TemplatePrompt": "template",
}
_registry: Registry[PromptFactory] = Registry(
    "prompt", ENTRY_POINT_GROUP, _BUILTIN, normalize=lambda name: name.strip().lower()
)


def register_prompt(name: str, factory: PromptFactory) -> None:
    """Register ``factory`` (a Prompt class or any callable returning a Prompt) as ``name``."""
    _registry.register(name, factory)


def available_prompts() -> list[str]:
    """Names of every registered prompt, sorted."""
    return _registry.available()


def _with_options(prompt: Prompt, options: Mapping[str, object]) -> Prompt:
    if not options:
        return prompt
    if not dataclasses.is_dataclass(prompt):
        raise ConfigurationError(
            f"options {sorted(options)} need a prompt name or a dataclass prompt; "
            f"configure {type(prompt).__name__} yourself instead"
        )
    fields = {f.name for f in dataclasses.fields(prompt)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ConfigurationError(
            f"{type(prompt).__name__} has no option(s) {unknown}; it accepts {sorted(fields)}"
        )
    return dataclasses.replace(prompt, **options)  # type: ignore[type-var]


def get_prompt(name_or_prompt: str | Prompt, **options: object) -> Prompt:
    """A prompt by registered name (built with ``options``) or a prompt object as given.

    Options on an object return a copy with those fields replaced.

    >>> get_prompt("wordsort").name
    'wordsort'
    """
    if isinstance(name_or_prompt, str):
        factory = _registry.get(name_or_prompt)
        try:
            prompt = factory(**options)
        except TypeError as exc:
            raise ConfigurationError(f"prompt {name_or_prompt!r}: bad option(s): {exc}") from None
    elif isinstance(name_or_prompt, Prompt):
        prompt = _with_options(name_or_prompt, options)
    else:
        raise ConfigurationError(
            "prompt must be a registered name (see available_prompts()) or an object with "
            f"name, render() and parse(); got {type(name_or_prompt).__name__}"
        )
    if not isinstance(prompt, Prompt):
        raise ConfigurationError(f"prompt factory {name_or_prompt!r} did not return a Prompt")
    return prompt


def __getattr__(name: str) -> object:
    if name in _CLASSES:
        module, _, attr = _BUILTIN[_CLASSES[name]].partition(":")
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'permsc_integrations.prompts' has no attribute {name!r}")
