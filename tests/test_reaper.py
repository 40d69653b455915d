"""The reaper of ``permsc rank --engine ray`` (cli/_rank_ray.py) and the process finder under it
(_processes.py), against real processes: it ends what carries the job's mark and what Ray's
programs hold open in the session folder (a node agent whose environment reads as overwritten,
as CI saw), and leaves alone someone's ``tail -f`` of a log there."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from permsc_integrations._processes import find_processes
from permsc_integrations.cli import _rank_ray

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")

HOLD = "import sys, time; f = open(sys.argv[1], 'a'); print('ready', flush=True); time.sleep(600)"


@pytest.fixture
def started():
    """``start(path, env=None)``: a Python process holding ``path`` open, once it does."""
    procs: list[subprocess.Popen] = []

    def start(path, env=None) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, env=env, text=True
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_processes_are_found_by_an_inherited_entry_or_a_file_held_in_a_folder(
    tmp_path, started
) -> None:
    (tmp_path / "session").mkdir()
    by_entry = started(tmp_path / "elsewhere.log", env={**os.environ, "PERMSC_T": "1"})
    by_file = started(tmp_path / "session" / "agent.log")

    assert set(find_processes(b"PERMSC_T=1")) == {by_entry.pid}
    assert set(find_processes(folder=str(tmp_path / "session"))) == {by_file.pid}
    assert set(find_processes(b"PERMSC_T=1", str(tmp_path / "session"))) == {
        by_entry.pid,
        by_file.pid,
    }
    assert find_processes(folder=str(tmp_path / "session"), programs=("/no/such/dir",)) == {}
    assert find_processes(b"PERMSC_T=2", str(tmp_path / "other")) == {}
    name = find_processes(b"PERMSC_T=1")[by_entry.pid]
    assert name.startswith("python") and name.endswith("-c")


@pytest.mark.skipif(shutil.which("tail") is None, reason="needs tail")
def test_the_reaper_ends_the_marked_and_what_holds_the_session_folder(
    tmp_path, started, monkeypatch, wait_until
) -> None:
    session = tmp_path / "session_1"
    session.mkdir()
    (session / "x.log").write_text("")
    monkeypatch.delenv(_rank_ray._MARK, raising=False)
    reaper = _rank_ray._reaper()
    assert reaper is not None
    marked = started(tmp_path / "marked.log")  # inherits the mark, as Ray's processes do
    os.environ.pop(_rank_ray._MARK)  # as once Ray has started
    agent = started(session / "agent.log")  # no mark seen: an overwritten environment
    tail = subprocess.Popen(["tail", "-f", str(session / "x.log")], stdout=subprocess.DEVNULL)
    try:
        wait_until(lambda: tail.pid in find_processes(folder=str(session)), "tail holds its log")
        _rank_ray._tell(reaper, str(session))
        _rank_ray._close(reaper)  # the driver gone: the pipe closes, the reaper sweeps, ends

        assert reaper.returncode == 0
        assert marked.wait(10) == -signal.SIGKILL
        assert agent.wait(10) == -signal.SIGKILL
        assert tail.poll() is None  # not a program of Ray's: someone's tail of a log
    finally:
        tail.kill()
        tail.wait()
