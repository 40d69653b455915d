"""Evaluation: the paper's sorting tasks, TREC files, single-pass vs PSC, position bias.

Heavy parts (scipy, matplotlib, the ranker) load only when used.

Example:
    >>> from permsc_integrations.eval import generate_mathsort, kendall_tau_b
    >>> ex = generate_mathsort(1, seed=0).examples[0]
    >>> kendall_tau_b(ex.truth, ex.keys)
    1.0
"""

from __future__ import annotations

from ._bias import BiasMap, bias_map
from ._datasets import (
    SortingDataset,
    SortingExample,
    kendall_tau_b,
    load_gsm8ksort,
    load_mathsort,
    load_sorting,
    load_wordsort,
)
from ._generators import generate_mathsort, generate_wordsort
from ._report import EvalReport
from ._runner import (
    AGGREGATORS,
    ListSamples,
    acollect_samples,
    aevaluate_sorting,
    aevaluate_trec,
    aggregate_runs,
    evaluate_sorting,
    score_runs,
    score_sorting,
)
from ._trec import read_candidates, read_qrels, read_run, read_topics, write_run

__all__ = [
    "AGGREGATORS",
    "BiasMap",
    "EvalReport",
    "ListSamples",
    "SortingDataset",
    "SortingExample",
    "acollect_samples",
    "aevaluate_sorting",
    "aevaluate_trec",
    "aggregate_runs",
    "bias_map",
    "evaluate_sorting",
    "generate_mathsort",
    "generate_wordsort",
    "kendall_tau_b",
    "load_gsm8ksort",
    "load_mathsort",
    "load_sorting",
    "load_wordsort",
    "read_candidates",
    "read_qrels",
    "read_run",
    "read_topics",
    "score_runs",
    "score_sorting",
    "write_run",
]
