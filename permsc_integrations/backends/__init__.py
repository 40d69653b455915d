"""Model backends behind one async protocol, chosen by object or by spec string.

Spec strings are ``"<kind>:<model>"``: ``"openai:gpt-4o-mini"``,
``"transformers:/path/to/model-dir"``, ``"llamacpp:/path/model.gguf"``, or ``"embedded"``
(an embedded model, by default Qwen2.5-Coder-1.5B-Instruct; ``"embedded:smollm2-135m"`` for the
small one). The implementations live in ``backends/openai/`` and ``backends/local/``; the
protocol they implement is :mod:`.base`. Third-party kinds register through the entry-point
group ``permsc_integrations.backends``.

Example:
    >>> from permsc_integrations.backends import available
    >>> "openai" in available()
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError
from ..registry import Registry
from .base import Backend, BatchBackend, Completion, GenerationSettings, Message

__all__ = [
    "Backend",
    "BatchBackend",
    "Completion",
    "GenerationSettings",
    "Message",
    "register",
    "available",
    "resolve_backend",
]

ENTRY_POINT_GROUP = "permsc_integrations.backends"

BackendFactory = Callable[..., Backend]
"""``factory(model: str | None, **options) -> Backend``."""

_registry: Registry[BackendFactory] = Registry(
    "backend",
    ENTRY_POINT_GROUP,
    {
        "openai": "permsc_integrations.backends.openai:OpenAIBackend",
        "transformers": "permsc_integrations.backends.local.transformers:TransformersBackend",
        "llamacpp": "permsc_integrations.backends.local.llamacpp:LlamaCppBackend",
        "embedded": "permsc_integrations.backends.local.embedded:embedded_backend",
    },
    normalize=lambda name: name.strip().lower(),
)


def register(kind: str, factory: BackendFactory) -> None:
    """Register a backend factory for spec strings ``"<kind>:<model>"``."""
    _registry.register(kind, factory)


def available() -> list[str]:
    """Backend kinds usable in spec strings, sorted."""
    return _registry.available()


def resolve_backend(spec: str | Backend, **options: Any) -> Backend:
    """A backend object as given, or one built from a spec string such as ``"openai:gpt-4o"``.

    ``options`` go to the factory (``base_url=``, ``api_key=``, ``device=``, ...).
    """
    if not isinstance(spec, str):
        if not isinstance(spec, Backend):
            raise ConfigurationError(
                f"backend must be a spec string like 'openai:gpt-4o-mini' or an object with "
                f"name, acomplete() and aclose(); got {type(spec).__name__}"
            )
        return spec
    kind, _, model = spec.partition(":")
    return _registry.get(kind)(model.strip() or None, **options)
