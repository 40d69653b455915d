"""The reaper of ``permsc rank --engine ray`` (cli/_rank_ray.py) and the process finder under it
(_processes.py), against real processes: it ends what carries the job's mark and what Ray's
programs hold open in the session folder (a node agent whose environment reads as overwritten,
as CI saw), and leaves alone someone's ``tail -f`` of a log there."""

from __future__ import annotations

import inspect
import os
import shutil
import signal
import subprocess
import sys

import pytest

from permsc_integrations.cli import _rank_ray
from permsc_integrations.ray._processes import find_processes

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


def _alive(pid: int) -> bool:
    """``pid`` runs: it exists and is not a zombie."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


DRIVER = """
import os, signal, subprocess, sys
from permsc_integrations.cli import _rank_ray
session, how, hold = sys.argv[1:4]
reaper = _rank_ray._reaper()

def start(path):
    proc = subprocess.Popen([sys.executable, "-c", hold, path], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\\n"
    return proc

marked = start(session + ".marked.log")  # inherits the mark, as Ray's processes do
os.environ.pop(_rank_ray._MARK)  # as once Ray has started
agent = start(session + "/agent.log")  # no mark seen: an overwritten environment
held = open(session + "/driver.log", "a")  # as a driver holds files there after ray.shutdown()
_rank_ray._tell(reaper, session)
print(reaper.pid, marked.pid, agent.pid, flush=True)
if how == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
_rank_ray._close(reaper)
"""

ANCESTOR = """
import subprocess, sys, time
held = open(sys.argv[1] + "/ancestor.log", "a")  # the same Python, holding a file there too
driver = subprocess.Popen([sys.executable, "-c", sys.argv[4], *sys.argv[1:4]],
                          stdout=subprocess.PIPE, text=True)
pids = driver.stdout.readline().split()
rc = driver.wait()
deadline = time.monotonic() + 30
while pids and _alive(int(pids[0])) and time.monotonic() < deadline:  # the reaper at work
    time.sleep(0.01)
print(rc, *pids, flush=True)
"""


@pytest.mark.parametrize("how", ["shuts Ray down", "killed"])
def test_the_reaper_spares_the_driver_and_its_ancestors(tmp_path, how, wait_until) -> None:
    """A driver holding a file in the session folder (as one does after ``ray.shutdown()``),
    under a parent running the same Python and holding one there too: whether the driver
    shuts Ray down or is SIGKILLed, Ray's processes are killed, the driver and its parent
    are not."""
    session = tmp_path / "session_1"
    session.mkdir()
    ancestor = subprocess.run(
        [sys.executable, "-c", inspect.getsource(_alive) + ANCESTOR, str(session), how.split()[0],
         HOLD, DRIVER],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ancestor.returncode == 0, ancestor.stderr  # not killed (-9)
    rc, reaper, marked, agent = (int(word) for word in ancestor.stdout.split())
    assert rc == (-signal.SIGKILL if how == "killed" else 0), ancestor.stderr
    assert not _alive(reaper)
    wait_until(lambda: not _alive(marked) and not _alive(agent), "the driver's Ray killed")
