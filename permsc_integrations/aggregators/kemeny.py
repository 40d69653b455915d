"""Exact Kemeny-Young with its proven bound, and the aggregator with a time limit
(docs/aggregation.md): ``kemeny_solve``, ``kemeny_with``, ``KemenySolution``.

The registry's ``"kemeny"`` is the aggregator itself; this module is for a call with a time
limit or a solver of its own, and for the bound.
"""

from permsc_integrations.aggregators._kemeny import KemenySolution, kemeny_solve, kemeny_with

__all__ = ["kemeny_solve", "kemeny_with", "KemenySolution"]
