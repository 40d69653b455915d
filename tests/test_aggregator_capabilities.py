"""An aggregator's optional capabilities, declared by the protocols of
``permsc_integrations.aggregators`` (``quick``, ``uses_probabilities``, ``item_scores``): the
built-ins and a third-party aggregator are read the same way, by the real ranker."""

from __future__ import annotations

from collections.abc import Sequence

from permsc_integrations import PSCRanker
from permsc_integrations.aggregators import (
    HasQuick,
    ReadsProbabilities,
    ScoresItems,
    get,
    quick_of,
    reads_probabilities,
    scores_of,
)
from permsc_integrations.aggregators.kemeny import kemeny_with
from permsc_integrations.testing import ScriptedBackend, oracle_responder

Rankings = Sequence[Sequence[int]]


def test_the_built_ins_declare_what_they_offer() -> None:
    kemeny, borda, mean = get("kemeny"), get("borda"), get("mean_probability")
    assert isinstance(kemeny, HasQuick) and quick_of(kemeny) is get("local_search")
    assert quick_of(kemeny_with(time_limit=5.0)) is get("local_search")
    assert not isinstance(borda, HasQuick) and quick_of(borda) is borda
    assert isinstance(mean, ReadsProbabilities) and isinstance(mean, ScoresItems)
    assert reads_probabilities(mean) and not reads_probabilities(kemeny)
    assert scores_of(mean) is mean and scores_of(borda) is None
    assert scores_of(mean).item_scores([{0: 0.2, 1: 0.8}], n_items=3) == [0.2, 0.8, 0.0]


class Slow:
    """A third-party aggregator (Borda underneath) with a quick stand-in that counts its uses."""

    def __init__(self) -> None:
        self.quick_calls: list[int] = []
        self.calls: list[int] = []

    def __call__(self, rankings: Rankings, *, n_items: int, **_: object) -> list[int]:
        self.calls.append(n_items)
        return get("borda")(rankings, n_items=n_items)

    def quick(self, rankings: Rankings, *, n_items: int, **_: object) -> list[int]:
        self.quick_calls.append(n_items)
        return get("borda")(rankings, n_items=n_items)


def test_a_third_party_quick_stand_in_picks_a_blocks_rounds_head() -> None:
    slow = Slow()
    assert isinstance(slow, HasQuick)
    texts = ["x" * k for k in range(1, 31)]  # the oracle ranks the longest first
    ranker = PSCRanker(
        ScriptedBackend(oracle_responder(len)), aggregator=slow, num_permutations=2, window_size=10
    )
    result = ranker.rank("longest?", texts)
    assert slow.quick_calls, "the blocks round's head was picked by the quick stand-in"
    assert slow.calls, "the consensus is the aggregator's own"
    assert list(result.order[:3]) == [29, 28, 27]


def test_a_flag_set_to_false_reads_no_probabilities() -> None:
    class Plain(Slow):
        uses_probabilities = False

    assert isinstance(Plain(), ReadsProbabilities) and not reads_probabilities(Plain())
