"""The list model's fit (``strategies._frontier.model.fit_list``): seconds per fit on a
100-item list after 5 (a budget's first round), 24 and 120 answers (fixed m = 20), windows of
20 shown in shuffled blocks to the simulated judge (mild regime, in process). The wired
ranker fits once a round (and once more for ``top_probability``): this is the policy's
overhead. ``--model PATH`` times another copy of model.py (e.g. ``git show REV:...``) on
the same answers, for a before/after.

    nice -n 10 python benchmarks/frontier_fit_cost.py --repeats 5
    git show REV:permsc_integrations/_frontier/model.py > /tmp/old_model.py
    nice -n 10 python benchmarks/frontier_fit_cost.py --repeats 5 --model /tmp/old_model.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # 2 shared cores: BLAS threads only thrash

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from types import ModuleType  # noqa: E402

from permsc_integrations.strategies._frontier import model as wired  # noqa: E402
from permsc_integrations.testing import REGIMES, SimulatedJudge, hidden_keys  # noqa: E402

N, WINDOW = 100, 20


def answers(count: int, seed: int = 0) -> list[wired.Answer]:
    """``count`` answers of the judge to shuffled blocks of the list (a pass per 5)."""
    rng = random.Random(seed)
    grades = [3 if i % 17 == 0 else 1 if i % 5 == 0 else 0 for i in range(N)]
    judge = SimulatedJudge(REGIMES["mild"], seed=seed)
    keys = [hidden_keys(t)[0] for t in judge.documents([f"d{i}" for i in range(N)], grades)]
    out: list[wired.Answer] = []
    while len(out) < count:
        items = list(range(N))
        rng.shuffle(items)
        for start in range(0, N, WINDOW):
            window = tuple(items[start : start + WINDOW])
            positions, _ = judge.judge([keys[i] for i in window], f"{len(out)}|{window}")
            out.append(wired.Answer(window, tuple(window[p] for p in positions)))
    return out[:count]


def load(path: str | None) -> ModuleType:
    if path is None:
        return wired
    spec = importlib.util.spec_from_file_location("model_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--model", help="a model.py to time instead of the package's")
    args = ap.parse_args()
    module = load(args.model)
    for count in (5, 24, 120):
        given = [module.Answer(a.shown, a.ranking) for a in answers(count)]
        times = []
        for _ in range(args.repeats):
            began = time.perf_counter()
            module.fit_list(N, given)
            times.append(time.perf_counter() - began)
        print(  # noqa: T201
            f"{args.model or 'package'}: {count:3d} answers: "
            f"median {statistics.median(times):.4f} s, min {min(times):.4f} s of {args.repeats}",
            flush=True,
        )


if __name__ == "__main__":
    main()
