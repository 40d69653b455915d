"""The reversion (position-bias) map on synthetic rankers with a known bias."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import pytest

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.eval._bias import bias_map
from permsc_integrations.permutations import sample_permutations

N = 8


def _observations(answer, trials: int = 400, seed: int = 3):
    """(permutation, ranking, keys) from ``answer(shown_items, keys) -> ranking``."""
    rng = random.Random(seed)
    out = []
    for perm in sample_permutations(N, trials, seed=seed):
        keys = [rng.random() for _ in range(N)]
        out.append((perm, answer(list(perm), keys), keys))
    return out


def _sort(shown, keys):
    return sorted(shown, key=lambda item: keys[item])


def _first_shown_wins(shown, keys):
    """Sorts correctly, except the first item shown always goes first (primacy bias)."""
    return [shown[0]] + [i for i in _sort(shown, keys) if i != shown[0]]


def test_primacy_bias_shows_in_row_one_and_nowhere_else() -> None:
    obs = _observations(_first_shown_wins)
    by_input = bias_map(obs, N)
    rate = by_input.rate
    assert all(rate[0][j] == 0.0 for j in range(1, N))  # position 1 is never overtaken
    middle = [rate[i][j] for i in range(1, N) for j in range(i + 1, N)]
    assert all(0.3 < r < 0.7 for r in middle)  # elsewhere a coin flip: the truth decides
    assert by_input.position_rate(0) == 0.0 < by_input.position_rate(4)
    by_truth = bias_map(obs, N, reference="truth")
    assert all(by_truth.rate[i][j] == 0.0 for i in range(1, N) for j in range(i + 1, N))
    assert all(0.3 < by_truth.rate[0][j] < 0.7 for j in range(1, N))  # errors only in row 1
    assert math.isnan(rate[3][3]) and math.isnan(rate[5][2])


def test_echo_and_unbiased_models() -> None:
    echo = bias_map(_observations(lambda shown, keys: shown), N)
    assert echo.mean_rate() == 0.0
    fair = bias_map(_observations(_sort), N)
    assert 0.45 < fair.mean_rate() < 0.55
    assert bias_map(_observations(_sort), N, reference="truth").mean_rate() == 0.0


def test_partial_answers_count_only_ranked_pairs() -> None:
    m = bias_map([((0, 1, 2), (2, 0))], 3)
    assert m.observed[0][2] == 1 and m.reversed[0][2] == 1 and m.observed[0][1] == 0
    with pytest.raises(ConfigurationError):
        bias_map([((0, 1), (1, 0))], 3)
    with pytest.raises(ConfigurationError, match="keys"):
        bias_map([((0, 1), (1, 0))], 2, reference="truth")


def test_png_and_csv_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    m = bias_map(_observations(_first_shown_wins, trials=50), N)
    m.to_png(tmp_path / "bias.png")
    m.to_csv(tmp_path / "bias.csv")
    assert (tmp_path / "bias.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((tmp_path / "bias.csv").open()))
    assert len(rows) == N * (N - 1) // 2
    first = next(r for r in rows if r["i"] == "1" and r["j"] == "2")
    assert first["reversed"] == "0" and first["rate"] == "0.0000"
