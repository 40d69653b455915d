"""Old import paths kept for one deprecation period: a module left at an old path forwards every
name to where it lives now and warns once per use (``DeprecationWarning``).

Example:
    >>> import warnings
    >>> from permsc_integrations._moved import moved
    >>> getattr_ = moved("old", "permsc_integrations.errors")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     name = getattr_("ParseError").__name__
    >>> name, str(caught[0].message)
    ('ParseError', 'old moved to permsc_integrations.errors; import it from there')
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable


def moved(
    old: str, new: str, home: str | None = None, *, stacklevel: int = 2
) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``old``: every name comes from module ``new``; the warning
    names ``home`` (the public package) for the names it exports, ``new`` for the others;
    ``stacklevel`` 3 when a module's own ``__getattr__`` calls it."""

    def forward(name: str) -> object:
        if name.startswith("__"):  # the import system's and tools' probes: no warning
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(new), name)
        exported = home is not None and name in getattr(
            importlib.import_module(home), "__all__", ()
        )
        where = home if exported else new
        warnings.warn(
            f"{old} moved to {where}; import it from there",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        return value

    return forward
