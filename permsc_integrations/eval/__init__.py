"""Evaluation: the paper's sorting tasks, TREC files, single-pass vs PSC, position bias.

Heavy parts (scipy, matplotlib, the ranker) load only when used.

Example:
    >>> from permsc_integrations.eval import generate_mathsort, kendall_tau_b
    >>> ex = generate_mathsort(1, seed=0).examples[0]
    >>> kendall_tau_b(ex.truth, ex.keys)
    1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from permsc_integrations._registry import lazy_exports, publish
from permsc_integrations.eval._bias import bias_map
from permsc_integrations.eval._datasets import SortingDataset as SortingDataset
from permsc_integrations.eval._datasets import kendall_tau_b, load_sorting
from permsc_integrations.eval._generators import generate_mathsort
from permsc_integrations.eval._generators import generate_wordsort as generate_wordsort
from permsc_integrations.eval._report import EvalReport
from permsc_integrations.eval._runner import (
    AGGREGATORS as AGGREGATORS,
)
from permsc_integrations.eval._runner import (
    acollect_samples as acollect_samples,
)
from permsc_integrations.eval._runner import (
    aevaluate_sorting,
    aevaluate_trec,
    evaluate_sorting,
)
from permsc_integrations.eval._runner import (
    aggregate_runs as aggregate_runs,
)
from permsc_integrations.eval._runner import (
    score_sorting as score_sorting,
)
from permsc_integrations.eval._samples import (
    ListSamples as ListSamples,
)
from permsc_integrations.eval._samples import (
    RunRecord as RunRecord,
)
from permsc_integrations.eval._samples import (
    SampleLog as SampleLog,
)
from permsc_integrations.eval._samples import (
    read_priors as read_priors,
)
from permsc_integrations.eval._samples import (
    read_samples as read_samples,
)
from permsc_integrations.eval._trec import (
    Qrels as Qrels,
)
from permsc_integrations.eval._trec import (
    Query as Query,
)
from permsc_integrations.eval._trec import (
    Run as Run,
)
from permsc_integrations.eval._trec import (
    read_candidates as read_candidates,
)
from permsc_integrations.eval._trec import (
    read_qrels,
    read_run,
    read_topics,
    write_run,
)

if TYPE_CHECKING:
    from permsc_integrations.eval._first_token import score_first_token as score_first_token
    from permsc_integrations.eval._passages import acollect_passages as acollect_passages
    from permsc_integrations.eval._passages import ndcg_of as ndcg_of
    from permsc_integrations.eval._passages import score_passages as score_passages
    from permsc_integrations.eval._plots import sweep_png as sweep_png

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

publish(__name__, *(globals()[name] for name in __all__))
# Besides __all__, what ``permsc eval`` builds on (the other names imported above, and these,
# loaded on first use): the core's internal API of this package.
__getattr__ = lazy_exports(
    __name__,
    {
        "score_first_token": "permsc_integrations.eval._first_token",
        "acollect_passages": "permsc_integrations.eval._passages",
        "ndcg_of": "permsc_integrations.eval._passages",
        "score_passages": "permsc_integrations.eval._passages",
        "sweep_png": "permsc_integrations.eval._plots",
    },
)
