"""Deprecated path: it moved to ``permsc_integrations.backends._home_loop`` (internal).

Every name is forwarded, with a ``DeprecationWarning``, for one deprecation period.
"""

from permsc_integrations._moved import moved

__all__: list[str] = []
__getattr__ = moved(__name__, "permsc_integrations.backends._home_loop")
