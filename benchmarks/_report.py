"""Write one benchmark's section of docs/benchmarks.md, leaving the other sections alone."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nEach section is written by the script it names; re-run it to refresh.\n"


def machine() -> str:
    """One line naming the machine: CPU model, cores, memory, Python."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}"


def gpu() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        return out or None
    except (OSError, subprocess.SubprocessError):
        return None


def write_section(name: str, body: str, *, command: str | None = None) -> None:
    """Replace (or append) the section ``name`` of docs/benchmarks.md with ``body``."""
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(DOC.parents[1]):
        script = script.relative_to(DOC.parents[1])
    command = command or "python " + " ".join([script.as_posix(), *sys.argv[1:]])
    text = DOC.read_text() if DOC.exists() else HEADER
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{body.rstrip()}\n\nMachine: {machine()}" + (
        f"; GPU: {gpu()}" if gpu() else ""
    ) + f"  \nCommand: `{command}`\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
