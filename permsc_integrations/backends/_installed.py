"""Whether a backend's optional packages are installed, found without importing them.

A backend factory that needs an extra has a ``check_installed(model, options)`` attribute that
raises :class:`~permsc_integrations.errors.MissingDependencyError` (with its ``pip install``
line); :func:`~permsc_integrations.backends.check_backend_options` calls it, so an adapter
built on ``"openai:..."`` without the openai extra is refused when it is built, not at its
first call. Finding a package costs a path lookup, never its import.

Example:
    >>> missing("json", "no_such_package_here")
    'no_such_package_here'
    >>> missing("json") is None
    True
"""

from __future__ import annotations

import importlib.util

__all__ = ["missing"]


def missing(*packages: str) -> str | None:
    """The first of ``packages`` (import names) that is not installed; None if all are."""
    for name in packages:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):  # a parent missing, or a module without a spec
            return name
    return None
