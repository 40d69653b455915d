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

__all__ = ["find_processes"]


def find_processes(
    entry: bytes | None = None, folder: str | None = None, programs: tuple[str, ...] = ("/",)
) -> dict[int, str]:
    """The processes (pid: name), this one left out, whose environment holds ``entry``, or
    which hold a file open under ``folder`` and run a program under one of ``programs``
    (paths: someone's ``tail -f`` of a log there is not taken); {} without ``/proc``."""
    under = os.path.realpath(folder).rstrip("/") + "/" if folder else None
    found = {}
    for proc in _processes():
        taken = entry is not None and _has_entry(proc, entry)
        if not taken and under is not None:
            taken = _runs(proc, programs) and _holds(proc, under)
        name = _name(proc) if taken else None
        if name is not None:
            found[int(proc.name)] = name
    return found


def _processes() -> list[Path]:
    if not os.path.isdir("/proc/self"):
        return []
    mine = str(os.getpid())
    return [p for p in Path("/proc").iterdir() if p.name.isdigit() and p.name != mine]


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
