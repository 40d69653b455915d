"""rank_dataset on a real local Ray instance (2 CPUs) against the loopback test server: every
row ranked exactly once and correctly, failures as rows, stable seeds equal to the single-process
ranker's, and one call budget shared by the actors."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from permsc_integrations import PSCRanker, RankRequest  # noqa: E402
from permsc_integrations.errors import ConfigurationError  # noqa: E402
from permsc_integrations.ray import rank_dataset  # noqa: E402
from permsc_integrations.ray._actors import split_budget  # noqa: E402
from permsc_integrations.testing import (  # noqa: E402
    Fault,  # noqa: E402
    noisy_responder,
    oracle_responder,
)
from permsc_integrations.testing._responders import shown_passages  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def goldfish(text: str) -> float:
    return text.count("goldfish")


def rows(n: int) -> list[dict]:
    """``n`` rows of 4 passages; passage j of row k says 'goldfish' (j + k) % 4 times."""
    out = []
    for k in range(n):
        items = [f"row {k} passage {j} " + "goldfish " * ((j + k) % 4) for j in range(4)]
        out.append({"qid": f"q{k}", "query": f"question {k}", "items": items})
    return out


@pytest.fixture(scope="module")
def local_ray():
    ray.init(  # "local": a new instance, never a cluster another user left on this machine
        address="local",
        num_cpus=2,
        object_store_memory=80 * 2**20,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield ray
    ray.shutdown()


def ranked(local_ray, data, **options) -> dict[str, dict]:
    ds = local_ray.data.from_items(data)
    out = rank_dataset(ds, **options).take_all()
    by_qid: dict[str, dict] = {}
    for row in out:
        assert row["qid"] not in by_qid, f"{row['qid']} ranked twice"
        by_qid[row["qid"]] = row
    return by_qid


def test_every_row_is_ranked_once_and_correctly(local_ray, scripted_server) -> None:
    server = scripted_server(oracle_responder(goldfish))
    data = rows(24)
    out = ranked(
        local_ray,
        data,
        backend="openai:m",
        num_permutations=3,
        backend_options={"base_url": server.base_url},
        concurrency=2,
        batch_size=5,
    )
    assert sorted(out) == sorted(r["qid"] for r in data)
    for row in data:
        got = out[row["qid"]]
        expected = sorted(range(4), key=lambda j: -goldfish(row["items"][j]))
        assert got["order"] == expected and got["error"] is None
        assert got["usage"]["calls"] == 3 and got["samples"] == 3
        assert got["items"] == row["items"]  # the input columns are kept
    assert server.request_count == 24 * 3


def test_failures_become_rows_and_never_fail_the_job(local_ray, scripted_server) -> None:
    def respond(request):
        if "question 3" in request.text:
            return Fault.status(400, message="bad request for this one")
        return oracle_responder(goldfish)(request)

    server = scripted_server(respond)
    data = rows(6)
    data[1]["items"] = []
    data[4]["query"] = None
    out = ranked(
        local_ray,
        data,
        backend="openai:m",
        num_permutations=2,
        backend_options={"base_url": server.base_url},
        concurrency=2,
        batch_size=2,
    )
    assert len(out) == 6
    failed = {qid for qid, row in out.items() if row["error"] is not None}
    assert failed == {"q1", "q3", "q4"}
    assert "InvalidRankingError" in out["q1"]["error"]
    assert "ConfigurationError" in out["q4"]["error"]
    assert out["q3"]["order"] is None and out["q0"]["order"] is not None


def test_seeds_are_stable_and_match_the_single_process_ranker(local_ray, scripted_server) -> None:
    server = scripted_server(noisy_responder(goldfish, keep=0.3, seed=5))
    data = rows(12)
    options = dict(num_permutations=4, seed=11, aggregator="borda")
    base = {"backend": "openai:m", "backend_options": {"base_url": server.base_url}}
    first = ranked(local_ray, data, **base, **options, concurrency=2, batch_size=3)
    second = ranked(local_ray, data, **base, **options, concurrency=1, batch_size=7)
    with PSCRanker("openai:m", backend_options=base["backend_options"], **options) as single:
        local = single.rank_many([RankRequest(r["query"], r["items"]) for r in data])
    for row, result in zip(data, local, strict=True):
        assert first[row["qid"]]["order"] == second[row["qid"]]["order"] == list(result.order)


def test_the_actors_share_one_call_budget(local_ray, scripted_server) -> None:
    seen: list[int] = []

    def respond(request):
        seen.append(len(shown_passages(request.messages)))
        return oracle_responder(goldfish, delay=0.05)(request)

    server = scripted_server(respond)
    ranked(
        local_ray,
        rows(16),
        backend="openai:m",
        num_permutations=4,
        max_concurrency=4,
        backend_options={"base_url": server.base_url},
        concurrency=2,
        batch_size=2,
    )
    assert server.request_count == 16 * 4
    assert 1 <= server.max_in_flight <= 4


def test_the_budget_is_split_and_bad_options_fail_before_ray_works(local_ray) -> None:
    assert split_budget(200, 4) == (4, 50) and split_budget(5, 2) == (2, 2)
    ds = local_ray.data.from_items(rows(2))
    with pytest.raises(ConfigurationError, match="num_permutations"):
        rank_dataset(ds, backend="openai:m", num_permutations=0)
    with pytest.raises(ConfigurationError, match="did you mean"):
        rank_dataset(ds, backend="openai:m", num_permutation=4)
    clashing = local_ray.data.from_items([{"query": "q", "items": ["a"], "order": 1}])
    with pytest.raises(ConfigurationError, match="order"):
        rank_dataset(clashing, backend="openai:m")


def _cli_input(tmp_path, n: int, parquet: bool = False):
    import json

    lines = [
        {
            "qid": f"q{k}",
            "query": f"question {k}",
            "candidates": [{"docid": f"d{j}", "text": t} for j, t in enumerate(r["items"])],
        }
        for k, r in enumerate(rows(n))
    ]
    if parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "in.parquet"
        pq.write_table(pa.Table.from_pylist(lines), path)
        return path
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_permsc_rank_on_ray_writes_what_the_single_process_writes(
    local_ray, scripted_server, tmp_path
) -> None:
    from permsc_integrations.cli import main

    server = scripted_server(noisy_responder(goldfish, keep=0.4, seed=3))
    common = ["-m", "3", "--backend", "openai:m", "--base-url", server.base_url, "--no-progress"]
    here, there = tmp_path / "here.jsonl", tmp_path / "there.jsonl"
    assert main(["rank", "-i", str(_cli_input(tmp_path, 8)), "-o", str(here), *common]) == 0
    parquet = _cli_input(tmp_path, 8, parquet=True)
    assert main(["rank", "-i", str(parquet), "-o", str(there), "--engine", "ray", *common]) == 0
    assert here.read_text() == there.read_text()


def test_resume_skips_what_is_written_and_survives_a_torn_line(scripted_server, tmp_path) -> None:
    from permsc_integrations.cli import main

    server = scripted_server(oracle_responder(goldfish))
    common = ["-m", "2", "--backend", "openai:m", "--base-url", server.base_url, "--no-progress"]
    source, out = _cli_input(tmp_path, 6), tmp_path / "out.jsonl"
    assert main(["rank", "-i", str(source), "-o", str(out), *common]) == 0
    full = out.read_text()
    lines = full.splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][:20])  # a crash in the middle of line 4
    server.reset()
    assert main(["rank", "-i", str(source), "-o", str(out), "--resume", *common]) == 0
    assert server.request_count == 3 * 2  # only q3..q5 were ranked again
    assert out.read_text() == full


def test_failed_rows_are_journaled_with_their_usage_and_resumed(
    local_ray, scripted_server, tmp_path
) -> None:
    """--engine ray: a row whose calls fail is not in the output (as in one process) but is in
    OUTPUT.journal with the calls it spent; --resume ranks only it, the others from the
    journal or the output, none twice."""
    import json

    from permsc_integrations.cli import main

    broken = {"on": True}

    def respond(request):
        if broken["on"] and "question 3" in request.text:
            return Fault.status(400, message="bad request for this one")
        return oracle_responder(goldfish)(request)

    server = scripted_server(respond)
    source, out = _cli_input(tmp_path, 6), tmp_path / "out.jsonl"
    common = ["-m", "2", "--backend", "openai:m", "--base-url", server.base_url, "--no-progress"]
    argv = ["rank", "-i", str(source), "-o", str(out), "--engine", "ray", *common]
    assert main(argv) == 2
    assert [json.loads(line)["qid"] for line in out.read_text().splitlines()] == [
        "q0", "q1", "q2", "q4", "q5"
    ]  # fmt: skip
    journal = [
        json.loads(line) for line in (tmp_path / "out.jsonl.journal").read_text().splitlines()
    ]
    failed = [r for r in journal if r["error"] is not None]
    assert [r["qid"] for r in failed] == ["q3"] and failed[0]["usage"]["calls"] == 2
    assert sorted(r["qid"] for r in journal) == [f"q{k}" for k in range(6)]
    broken["on"] = False
    server.reset()
    assert main([*argv, "--resume"]) == 0
    assert server.request_count == 2  # q3's two calls, nothing else
    assert sorted(json.loads(line)["qid"] for line in out.read_text().splitlines()) == [
        f"q{k}" for k in range(6)
    ]
