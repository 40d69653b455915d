"""Ranking at scale with Ray (the ``ray`` extra): :func:`rank_dataset` ranks a
``ray.data.Dataset`` of queries; :func:`rank_rows` streams rows to ranking actors with bounded
faults (the engine of ``permsc rank --engine ray``). See docs/scale.md.
"""

from permsc_integrations.ray._actors import rank_dataset
from permsc_integrations.ray._rows import rank_rows

__all__ = ["rank_dataset", "rank_rows"]
