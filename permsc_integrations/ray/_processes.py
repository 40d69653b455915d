"""Finding the processes of one Ray instance on this machine (Linux ``/proc``), by what they
inherited or hold rather than by their parent, which is gone once a driver is killed.

A process is taken when its environment holds a given ``NAME=value`` entry, or when it holds a
file open under a given folder (every process of a Ray holds its log files open in the
instance's session folder). Both are needed: a Ray node agent renames itself with
``setproctitle``, which can overwrite what ``/proc/PID/environ`` shows of its environment, so
an entry it inherited may not be seen there (seen with Ray 2.60); its open files still are.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["find_processes", "lineage", "alive"]


def find_processes(
    entry: bytes | None = None,
    folder: str | None = None,
    programs: tuple[str, ...] = ("/",),
    spare: frozenset[int] = frozenset(),
) -> dict[int, str]:
    """The processes (pid: name), this one and those in ``spare`` left out, whose environment
    holds ``entry``, or which hold a file open under ``folder`` and run a program under one of
    ``programs`` (paths: someone's ``tail -f`` of a log there is not taken); {} without
    ``/proc``."""
    under = os.path.realpath(folder).rstrip("/") + "/" if folder else None
    found = {}
    for proc in _processes(spare):
        taken = entry is not None and _has_entry(proc, entry)
        if not taken and under is not None:
            taken = _runs(proc, programs) and _holds(proc, under)
        name = _name(proc) if taken else None
        if name is not None:
            found[int(proc.name)] = name
    return found


def lineage(pid: int) -> frozenset[int]:
    """``pid`` and its ancestors, as far as ``/proc`` shows them."""
    chain: set[int] = set()
    while pid > 0 and pid not in chain:
        chain.add(pid)
        stat = _stat(pid)
        pid = int(stat[1]) if stat else 0
    return frozenset(chain)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is not a zombie (exited, not yet waited for)."""
    stat = _stat(pid)
    return bool(stat) and stat[0] not in ("Z", "X")


def _stat(pid: int) -> list[str]:
    """``/proc/PID/stat`` after the program's name: state, parent, ...; [] if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text.rsplit(")", 1)[1].split()


def _processes(spare: frozenset[int]) -> list[Path]:
    if not os.path.isdir("/proc/self"):
        return []
    left_out = {str(pid) for pid in spare} | {str(os.getpid())}
    return [p for p in Path("/proc").iterdir() if p.name.isdigit() and p.name not in left_out]


def _has_entry(proc: Path, entry: bytes) -> bool:
    try:
        return entry in (proc / "environ").read_bytes().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False


def _runs(proc: Path, programs: tuple[str, ...]) -> bool:
    try:
        return os.readlink(proc / "exe").startswith(programs)
    except OSError:  # gone, a kernel thread, or not ours to read
        return False


def _holds(proc: Path, under: str) -> bool:
    try:
        return any(os.readlink(fd).startswith(under) for fd in (proc / "fd").iterdir())
    except OSError:  # gone, or not ours to read
        return False


def _name(proc: Path) -> str | None:
    """``ray::...`` as the process calls itself, else its program and first argument."""
    try:
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    name = argv[0].decode(errors="replace")
    if name.startswith("ray::"):
        return name
    return " ".join(Path(a.decode(errors="replace")).name for a in argv[:2])
