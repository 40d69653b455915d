"""Ranking at scale with Ray (the ``ray`` extra): :func:`rank_dataset` ranks a
``ray.data.Dataset`` of queries; :func:`rank_rows` streams rows to ranking actors with bounded
faults (the engine of ``permsc rank --engine ray``). See docs/scale.md.

Besides ``__all__``, what ``permsc rank --engine ray`` and the test cluster build on (the core's
internal API of this package): :class:`RankedRow` and the process helpers ``alive``,
``find_processes`` and ``lineage``.
"""

from permsc_integrations._registry import publish
from permsc_integrations.ray._actors import RankedRow as RankedRow
from permsc_integrations.ray._actors import rank_dataset
from permsc_integrations.ray._processes import alive as alive
from permsc_integrations.ray._processes import find_processes as find_processes
from permsc_integrations.ray._processes import lineage as lineage
from permsc_integrations.ray._rows import rank_rows

__all__ = ["rank_dataset", "rank_rows"]

publish(__name__, rank_dataset, rank_rows)
