"""Evaluation: the paper's sorting tasks, TREC files, single-pass vs PSC, position bias.

Heavy parts (scipy, matplotlib, the ranker) load only when used.

Example:
    >>> from permsc_integrations.eval import generate_mathsort, kendall_tau_b
    >>> ex = generate_mathsort(1, seed=0).examples[0]
    >>> kendall_tau_b(ex.truth, ex.keys)
    1.0
"""

from __future__ import annotations

from permsc_integrations.eval._bias import bias_map
from permsc_integrations.eval._datasets import kendall_tau_b, load_sorting
from permsc_integrations.eval._generators import generate_mathsort
from permsc_integrations.eval._report import EvalReport
from permsc_integrations.eval._runner import aevaluate_sorting, aevaluate_trec, evaluate_sorting
from permsc_integrations.eval._trec import read_qrels, read_run, read_topics, write_run

__all__ = [
    "EvalReport",
    "evaluate_sorting",
    "aevaluate_sorting",
    "aevaluate_trec",
    "load_sorting",
    "generate_mathsort",
    "kendall_tau_b",
    "read_qrels",
    "read_run",
    "read_topics",
    "write_run",
    "bias_map",
]
