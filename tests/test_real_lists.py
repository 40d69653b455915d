"""The real-answer benchmark's lists are a function of (task, seed, index) and the data files
alone, so another run can draw held-out lists; its score keeps the data's ties."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _real_lists as lists  # noqa: E402

from permsc_integrations.eval._datasets import default_data_dir  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (default_data_dir() / "mathsort.tsv").exists(), reason="no perm-sc data files here"
)


@pytest.mark.parametrize("task", ["wordsort", "mathsort"])
def test_lists_are_drawn_by_seed_and_index_only(task: str) -> None:
    saved = lists.draw(task, 3, seed=0, min_items=30, max_items=60)
    assert saved == lists.draw(task, 3, seed=0, min_items=30, max_items=60)
    assert all(30 <= len(x.items) <= 60 and len(set(x.items)) == len(x.items) for x in saved)
    held_out = lists.draw(task, 3, seed=0, start=1000, min_items=30, max_items=60)
    assert not {x.items for x in saved} & {x.items for x in held_out}
    assert lists.draw(task, 1, seed=0, start=2)[0] == saved[2]


def test_ndcg_is_one_for_the_truth_and_counts_ties_as_equal() -> None:
    keys = (3.0, 1.0, 1.0, 2.0, 9.0)
    assert lists.relevance(keys, k=3) == [0, 3, 3, 1, 0]
    assert lists.ndcg((1, 2, 3), keys, k=3) == lists.ndcg((2, 1, 3), keys, k=3) == 1.0
    assert lists.ndcg((4, 0, 3), keys, k=3) < lists.ndcg((3, 0, 4), keys, k=3) < 1.0


def test_rounds_follow_the_judges_logical_clock() -> None:
    together, after = [(0.0, 1.0), (0.1, 1.0)], [(1.5, 2.0)]
    assert lists.rounds(together) == 1 and lists.rounds(together + after) == 2
