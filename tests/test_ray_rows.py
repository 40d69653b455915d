"""rank_rows on a real local Ray instance: rows come back one by one as they finish, an actor
killed mid-chunk has its rows ranked by another (each row delivered once), a row that kills
every actor that ranks it comes back failed, and a job whose actors cannot run or cannot start
stops with an error that says so instead of waiting. Node loss, no capacity and a killed
driver on a multi-node cluster: tests/test_ray_faults.py."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

ray = pytest.importorskip("ray")

from permsc_integrations import RankRequest  # noqa: E402
from permsc_integrations.errors import ClusterCapacityError  # noqa: E402
from permsc_integrations.ray._rows import ROW_LOSSES, rank_rows  # noqa: E402
from permsc_integrations.testing import ScriptedBackend, oracle_responder  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def goldfish(text: str) -> float:
    return text.count("goldfish")


def requests(n: int) -> list[RankRequest]:
    """``n`` requests of 4 passages; passage j of row k says 'goldfish' (j + k) % 4 times."""
    return [
        RankRequest(
            f"question {k}",
            [f"row {k} passage {j} " + "goldfish " * ((j + k) % 4) for j in range(4)],
            id=f"q{k}",
        )
        for k in range(n)
    ]


def right_order(request: RankRequest) -> tuple[int, ...]:
    return tuple(sorted(range(len(request.items)), key=lambda j: -goldfish(request.items[j])))


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        address="local",
        num_cpus=2,
        object_store_memory=80 * 2**20,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    yield ray
    ray.shutdown()


def delivered_once(rows) -> dict:
    by_key: dict = {}
    for row in rows:
        assert row.key not in by_key, f"{row.key} delivered twice"
        by_key[row.key] = row
    return by_key


def test_rows_come_back_one_by_one_as_they_finish(local_ray, scripted_server) -> None:
    """One chunk of six rows, the first held by the server: the other five arrive while it is
    still held (a batch engine would give all six at once, at the end)."""
    hold = threading.Event()
    oracle = oracle_responder(goldfish)

    async def respond(request):
        if "question 0" in request.text:
            while not hold.is_set():
                await asyncio.sleep(0.01)
        return oracle(request)

    server = scripted_server(respond)
    data = requests(6)
    rows = rank_rows(
        data,
        backend="openai:m",
        backend_options={"base_url": server.base_url},
        num_permutations=3,
        concurrency=1,
        batch_size=6,
    )
    first = [next(rows) for _ in range(5)]
    assert {row.key for row in first} == {f"q{k}" for k in range(1, 6)}
    hold.set()
    last = list(rows)
    assert [row.key for row in last] == ["q0"]
    for request, row in zip(data, [*last, *sorted(first, key=lambda r: r.key)], strict=True):
        assert row.order == right_order(request) and row.error is None
        assert row.usage["calls"] == 3 and row.samples == 3


def kill_once(marker: str, trigger: str):
    """A responder that SIGKILLs the process calling it the first time it sees ``trigger``
    (the first across processes: the one that creates ``marker``)."""
    oracle = oracle_responder(goldfish)

    def respond(request):
        if trigger in request.text:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return oracle(request)

    return respond


def test_a_killed_actor_s_rows_are_ranked_by_another_once(local_ray, tmp_path) -> None:
    marker = str(tmp_path / "killed")
    data = requests(12)
    backend = ScriptedBackend(kill_once(marker, "question 4"))
    rows = rank_rows(data, backend=backend, num_permutations=3, concurrency=2, batch_size=3)
    out = delivered_once(rows)
    assert os.path.exists(marker)  # an actor was killed in the middle of its chunk
    assert sorted(out) == sorted(r.id for r in data)
    for request in data:
        assert out[request.id].order == right_order(request), request.id
        assert out[request.id].error is None


def test_a_row_that_kills_every_actor_comes_back_failed(local_ray) -> None:
    """One row at a time (the rows an actor shares with such a row are lost with it, and
    would come back failed too after as many losses)."""

    def respond(request):
        if "question 2" in request.text:
            os.kill(os.getpid(), signal.SIGKILL)
        return oracle_responder(goldfish)(request)

    data = requests(6)
    rows = rank_rows(
        data,
        backend=ScriptedBackend(respond),
        num_permutations=2,
        concurrency=1,
        batch_size=1,
        batches_per_actor=1,
    )
    out = delivered_once(rows)
    assert sorted(out) == sorted(r.id for r in data)
    assert out["q2"].order is None
    assert f"lost with its actor {ROW_LOSSES} times" in out["q2"].error
    assert all(out[r.id].order == right_order(r) for r in data if r.id != "q2")


def test_no_room_for_any_actor_is_an_error_not_a_wait(local_ray) -> None:
    rows = rank_rows(
        requests(2), backend="openai:m", num_cpus=4, capacity_timeout=1.0, num_permutations=2
    )
    with pytest.raises(ClusterCapacityError, match=r"no ranking actor could run for 1 s") as err:
        list(rows)
    assert "4 CPU free" in str(err.value) and "have 2 CPUs" in str(err.value)


def test_actors_that_cannot_start_stop_the_job_with_the_reason(local_ray) -> None:
    rows = rank_rows(requests(2), backend="nosuch:m", num_permutations=2)
    with pytest.raises(ClusterCapacityError, match=r"could not start \(3 in a row\)") as err:
        list(rows)
    assert "unknown backend 'nosuch'" in str(err.value)
