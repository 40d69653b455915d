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

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from permsc_integrations._checks import unknown_option
from permsc_integrations._registry import Registry, lazy_exports
from permsc_integrations.backends._installed import check_installed
from permsc_integrations.backends._redaction import (
    MASK as MASK,
)
from permsc_integrations.backends._redaction import (
    is_secret_name as is_secret_name,
)
from permsc_integrations.backends._redaction import (
    public_settings as public_settings,
)
from permsc_integrations.backends._redaction import (
    redact_text as redact_text,
)
from permsc_integrations.backends._redaction import (
    redact_url as redact_url,
)
from permsc_integrations.backends._redaction import (
    refuse_masked,
)
from permsc_integrations.backends.base import Backend
from permsc_integrations.errors import ConfigurationError

if TYPE_CHECKING:
    from permsc_integrations.backends._home_loop import HomeLoop as HomeLoop
    from permsc_integrations.backends._http_errors import mapped_errors as mapped_errors
    from permsc_integrations.backends._http_errors import status_error as status_error
    from permsc_integrations.backends._logprobs import (
        check_labels as check_labels,
    )
    from permsc_integrations.backends._logprobs import (
        label_probabilities as label_probabilities,
    )
    from permsc_integrations.backends._logprobs import (
        refused_logprobs as refused_logprobs,
    )
    from permsc_integrations.backends._logprobs import (
        top_list as top_list,
    )

__all__ = ["register", "available", "resolve_backend"]

# Besides __all__, the backends' shared parts that the rest of the core (and, through
# permsc_integrations.integration, the adapters) builds on: redaction (above), the home loop,
# HTTP error mapping and logprobs, loaded on first use (numpy, anyio).
__getattr__ = lazy_exports(
    __name__,
    {
        "HomeLoop": "permsc_integrations.backends._home_loop",
        "mapped_errors": "permsc_integrations.backends._http_errors",
        "status_error": "permsc_integrations.backends._http_errors",
        "check_labels": "permsc_integrations.backends._logprobs",
        "label_probabilities": "permsc_integrations.backends._logprobs",
        "refused_logprobs": "permsc_integrations.backends._logprobs",
        "top_list": "permsc_integrations.backends._logprobs",
    },
)

ENTRY_POINT_GROUP = "permsc_integrations.backends"

BackendFactory = Callable[..., Backend]
"""``factory(model: str | None, **options) -> Backend``."""

_registry: Registry[BackendFactory] = Registry(
    "backend",
    ENTRY_POINT_GROUP,
    {
        "openai": "permsc_integrations.backends.openai:OpenAIBackend",
        "transformers": "permsc_integrations.backends.local.transformers:TransformersBackend",
        "llamacpp": "permsc_integrations.backends.local._llamacpp:LlamaCppBackend",
        "embedded": "permsc_integrations.backends.local._embedded:embedded_backend",
    },
    normalize=lambda name: name.strip().lower(),
)


def register(kind: str, factory: BackendFactory) -> None:
    """Register a backend factory for spec strings ``"<kind>:<model>"``."""
    _registry.register(kind, factory)


def available() -> list[str]:
    """Backend kinds usable in spec strings, sorted."""
    return _registry.available()


def resolve_backend(spec: str | Backend, **options: object) -> Backend:
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
    check_backend_options(spec, options)
    kind, _, model = spec.partition(":")
    return _registry.get(kind)(model.strip() or None, **options)


def check_backend_options(backend: object, options: Mapping[str, object]) -> None:
    """Refuse an option the backend of the spec string ``backend`` does not take, naming the
    closest ones, a masked secret (``"***"``, as ``to_dict()`` leaves it) given as a value,
    and a spec whose extra is not installed (``MissingDependencyError``); a backend object
    takes no options (it is configured by whoever built it).

    The accepted names are the factory's keyword parameters, or its ``accepted_options``
    when it passes ``**options`` on; a factory with neither is not checked.

    >>> try:
    ...     check_backend_options("openai:m", {"base_ulr": "http://h/v1"})
    ... except ConfigurationError as exc:
    ...     print(str(exc).split(";")[0])
    unknown option 'base_ulr' for the openai backend (did you mean 'base_url'?)
    """
    if not isinstance(backend, str):
        if options:
            raise ConfigurationError(
                "backend_options apply to a spec-string backend only; configure the backend "
                f"object ({type(backend).__name__}) itself"
            )
        return
    spec = backend
    for name, value in options.items():
        refuse_masked(f"backend option {name}", value)
    kind, _, model = spec.partition(":")
    factory = _registry.get(kind)
    known = _accepted(factory)
    for name in options:
        if known is not None and name not in known:
            message = unknown_option(name, known).replace(
                f"{name!r}", f"{name!r} for the {kind.strip().lower()} backend", 1
            )
            raise ConfigurationError(message)
    check_installed(kind, model.strip() or None, options, factory)


def _accepted(factory: Callable[..., object]) -> tuple[str, ...] | None:
    declared = getattr(factory, "accepted_options", None)
    if declared is not None:
        return tuple(declared)
    try:
        params = list(inspect.signature(factory).parameters.values())[1:]  # after the model
    except (TypeError, ValueError):  # no signature to read
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL)
