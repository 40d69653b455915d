"""Every aggregator: properties over random inputs, the registry, and bad input."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from permsc_integrations import aggregate, aggregators
from permsc_integrations.aggregators._kemeny import kemeny_objective
from permsc_integrations.errors import ConfigurationError, InvalidRankingError, UnknownNameError

BUILTIN = ["kemeny", "rrf", "borda", "copeland", "local_search"]


@st.composite
def rankings_and_n(draw: st.DrawFn, max_n: int = 12) -> tuple[list[list[int]], int]:
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(0, 6))
    out = []
    for _ in range(m):
        perm = draw(st.permutations(range(n)))
        out.append(list(perm[: draw(st.integers(0, n))]))
    return out, n


@pytest.mark.parametrize("method", BUILTIN)
@settings(max_examples=60, deadline=None)
@given(case=rankings_and_n())
def test_returns_a_permutation_of_all_items(method: str, case: tuple[list[list[int]], int]) -> None:
    rankings, n = case
    order = aggregate(rankings, method=method, n_items=n)
    assert sorted(order) == list(range(n))
    seen = {i for r in rankings for i in r}
    absent = [i for i in range(n) if i not in seen]
    assert order[len(order) - len(absent) :] == absent  # absent items last, in index order


@pytest.mark.parametrize("method", BUILTIN)
@settings(max_examples=40, deadline=None)
@given(perm=st.permutations(range(9)), m=st.integers(1, 5))
def test_unanimous_input_is_returned_unchanged(method: str, perm: Sequence[int], m: int) -> None:
    assert aggregate([list(perm)] * m, method=method) == list(perm)


@pytest.mark.parametrize("method", BUILTIN)
def test_deterministic_tie_break_by_index(method: str) -> None:
    # a perfect 3-cycle: every item is as good as every other
    assert aggregate([[0, 1, 2], [1, 2, 0], [2, 0, 1]], method=method) == [0, 1, 2]


def test_rrf_is_the_papers_formula_on_full_rankings() -> None:
    from permsc_integrations.aggregators._rrf import rrf_scores

    full = [[2, 0, 1], [0, 1, 2]]
    scores = rrf_scores(full, 3)
    assert scores.tolist() == pytest.approx(
        [(1 / 62 + 1 / 61) / 2, (1 / 63 + 1 / 62) / 2, (1 / 61 + 1 / 63) / 2]
    )
    assert aggregate(full, method="rrf", n_items=3) == [0, 2, 1]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), m=st.integers(1, 6), data=st.data())
def test_on_full_rankings_rrf_and_borda_are_the_classic_formulas(
    n: int, m: int, data: st.DataObject
) -> None:
    """The paper's RRF sum and the classic Borda points, computed here independently."""
    rankings = [list(data.draw(st.permutations(range(n)))) for _ in range(m)]
    rrf_sum = [sum(1 / (60 + r.index(i) + 1) for r in rankings) for i in range(n)]
    points = [sum(n - 1 - r.index(i) for r in rankings) for i in range(n)]
    for method, score in (("rrf", rrf_sum), ("borda", points)):
        order = aggregate(rankings, method=method, n_items=n)
        assert [score[i] for i in order] == pytest.approx(sorted(score, reverse=True)), method


def test_rrf_and_borda_average_over_the_rankings_that_list_an_item() -> None:
    """An item left out of a partial answer is neither rewarded nor punished for it: the
    often-listed item does not win by being listed often."""
    from permsc_integrations.aggregators._borda import borda_scores
    from permsc_integrations.aggregators._rrf import rrf_scores

    answers = [[1, 0, 2, 3], [1, 0, 2, 3], [0, 2], [0, 3], [2, 3]]  # 1 listed twice, first
    for method in ("rrf", "borda"):
        assert aggregate(answers, method=method, n_items=5)[:2] == [1, 0], method
        assert aggregate(answers, method=method, n_items=5)[-1] == 4  # never listed: last
    assert rrf_scores([[2, 0], [0, 1, 2]], 4)[3] == -np.inf
    assert borda_scores([[0, 2], [0, 1, 2]], 3).tolist() == [1.0, 0.5, 0.0]


@pytest.mark.parametrize("method", BUILTIN)
def test_being_listed_more_often_is_no_merit(method: str) -> None:
    """0 beat everything it met, 3 included; 3 is listed four times as often (partial
    answers, or blocks of a long list). Counting listings instead of outcomes put 3 first."""
    rankings = [[0, 3], [3, 4, 5, 6, 7], [3, 4, 5, 6, 7], [3, 4, 5, 6, 7], [1, 2]]
    order = aggregate(rankings, method=method)
    assert order.index(0) < order.index(3)
    assert order.index(3) < order.index(4) < order.index(5) < order.index(6) < order.index(7)


@settings(max_examples=60, deadline=None)
@given(case=rankings_and_n(max_n=10), start=st.sampled_from(["borda", "rrf", "copeland"]))
def test_local_search_never_worsens_its_start(
    case: tuple[list[list[int]], int], start: str
) -> None:
    rankings, n = case
    initial = aggregate(rankings, method=start, n_items=n)
    refined = aggregate(rankings, method="local_search", n_items=n, initial=start)
    assert kemeny_objective(rankings, refined, n) <= kemeny_objective(rankings, initial, n)
    by_callable = aggregate(
        rankings, method="local_search", n_items=n, initial=aggregators.get(start)
    )
    assert by_callable == refined


def test_local_search_from_an_explicit_order_and_a_bad_one() -> None:
    rankings = [[0, 1, 2, 3]] * 3
    assert aggregate(rankings, method="local_search", initial=[3, 2, 1, 0]) == [0, 1, 2, 3]
    with pytest.raises(InvalidRankingError, match="permutation"):
        aggregate(rankings, method="local_search", initial=[0, 0, 1, 2])


def test_registry_register_get_available_and_callables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aggregators, "_registry", aggregators._registry.copy())

    def reverse(rankings: Sequence[Sequence[int]], *, n_items: int, **_: object) -> list[int]:
        return list(range(n_items))[::-1]

    aggregators.register("test_reverse", reverse)
    assert "test_reverse" in aggregators.available()
    assert set(BUILTIN) <= set(aggregators.available())
    assert aggregators.get("test_reverse") is reverse
    assert aggregate([[0, 1, 2]], method="test_reverse") == [2, 1, 0]
    assert aggregate([[0, 1, 2]], method=reverse) == [2, 1, 0]  # a callable works as well
    with pytest.raises(ConfigurationError):
        aggregators.register("bad", "not callable")  # type: ignore[arg-type]


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as info:
        aggregators.get("kemenyy")
    assert all(name in str(info.value) for name in BUILTIN)
    with pytest.raises(KeyError):  # also a KeyError, as dict users expect
        aggregate([[0, 1]], method="nope")


def test_entry_point_aggregators_are_discovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real installed-distribution layout on sys.path, read by importlib.metadata."""
    (tmp_path / "ep_agg_plugin.py").write_text(
        "def first_seen(rankings, *, n_items, **_):\n"
        "    seen = [i for r in rankings for i in r]\n"
        "    order = list(dict.fromkeys(seen))\n"
        "    return order + [i for i in range(n_items) if i not in order]\n"
    )
    dist = tmp_path / "ep_agg_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-agg-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{aggregators.ENTRY_POINT_GROUP}]\nfirst_seen = ep_agg_plugin:first_seen\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setattr(aggregators, "_registry", aggregators._registry.copy())
    assert "first_seen" in aggregators.available()
    assert aggregate([[2, 0], [1]], method="first_seen", n_items=4) == [2, 0, 1, 3]
    sys.modules.pop("ep_agg_plugin", None)


@pytest.mark.parametrize(
    ("rankings", "n_items", "match"),
    [
        ([[0, 1, 1]], None, "twice"),
        ([[0, 5]], 3, "outside"),
        ([[0, -1]], None, "outside"),
        ([], None, "nothing to aggregate"),
        ([[], []], None, "nothing to aggregate"),
        ("012", None, "not a string"),
    ],
)
def test_bad_input_raises_invalid_ranking_error(
    rankings: object, n_items: int | None, match: str
) -> None:
    with pytest.raises(InvalidRankingError, match=match):
        aggregate(rankings, n_items=n_items)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", BUILTIN)
def test_no_rankings_but_n_items_gives_index_order(method: str) -> None:
    assert aggregate([], method=method, n_items=3) == [0, 1, 2]
