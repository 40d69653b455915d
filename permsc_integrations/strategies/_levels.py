"""The levels adaptive m and the frontier's stop rule share, each declared once: both import
them from here, so neither imports the other."""

from __future__ import annotations

__all__ = ["CONFIDENCE", "ZONE", "STEADY"]

CONFIDENCE = 0.9
"""The default level of adaptive m and of the frontier's stop rule, the one declaration
(measured: docs/benchmarks.md "adaptive")."""

ZONE = 0.5
"""The indifference zone of adaptive m and of the frontier's stop rule, a share of the
utilities' spread, the one declaration (benchmarks/frontier_sim.py, benchmarks/adaptive.py)."""

STEADY = 0.9
"""The least Kendall tau between the consensus before a wave and after it for the zone rule
to stop (measured on saved real answers: docs/benchmarks.md "adaptive")."""
