"""Whether a backend kind's optional packages are installed, found without importing them.

:func:`~permsc_integrations.backends.check_backend_options` calls :func:`check_installed`, so an
adapter built on ``"openai:..."`` without the openai extra is refused when it is built, with the
``pip install`` line (:class:`~permsc_integrations.errors.MissingDependencyError`), not at its
first call. Finding a package is a path lookup, never its import. A registered kind of one's
own may say what it needs with a ``check_installed(model, options)`` attribute on its factory.

Example:
    >>> missing("json", "no_such_package_here")
    'no_such_package_here'
    >>> check_installed("openai", "gpt-4o-mini", {}, factory=None)  # installed here: nothing
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping

from permsc_integrations.errors import ConfigurationError, MissingDependencyError

__all__ = ["missing", "check_installed"]

Check = Callable[[str | None, Mapping[str, object]], None]


def missing(*packages: str) -> str | None:
    """The first of ``packages`` (import names) that is not installed; None if all are."""
    for name in packages:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):  # a parent missing, or a module without a spec
            return name
    return None


def _needs(extra: str, purpose: str, *packages: str, shown: str | None = None) -> Check:
    def check(model: str | None, options: Mapping[str, object]) -> None:
        gone = missing(*packages)
        if gone:
            raise MissingDependencyError(shown or gone, extra, purpose=purpose)

    return check


def _embedded(model: str | None, options: Mapping[str, object]) -> None:
    """What the engine that would run the embedded ``model`` needs: the ``embedded`` extra
    (which brings torch and the model's packages) for transformers, its own for llama.cpp."""
    # lazy: the local backends' module, only for an embedded spec
    from permsc_integrations.backends.local import embedded_names, model_and_engine

    engine = options.get("engine")
    try:
        name, chosen = model_and_engine(model, engine if isinstance(engine, str) else None)
    except ConfigurationError:
        return  # the factory says what is wrong with the name
    if name not in embedded_names():
        return  # likewise
    if chosen != "transformers":
        CHECKS[chosen](model, options)
    elif gone := missing("torch", "transformers"):
        raise MissingDependencyError(gone, "embedded", purpose="the embedded models")


CHECKS: dict[str, Check] = {
    "openai": _needs("openai", "the openai backend", "openai"),
    "transformers": _needs("local", "local transformers models", "torch", "transformers"),
    "llamacpp": _needs("llamacpp", "llama.cpp models", "llama_cpp", shown="llama-cpp-python"),
    "embedded": _embedded,
}
"""What each built-in kind needs, by spec kind."""


def check_installed(
    kind: str, model: str | None, options: Mapping[str, object], factory: object
) -> None:
    """Raise :class:`MissingDependencyError` if the packages ``kind`` needs are not installed."""
    check = CHECKS.get(kind.strip().lower()) or getattr(factory, "check_installed", None)
    if check is not None:
        check(model, options)
