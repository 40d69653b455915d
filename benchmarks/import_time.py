"""Cold import time of ``permsc_integrations`` (target ≤ 0.3 s on the 2-core dev machine).

Runs ``python -c 'import permsc_integrations'`` in fresh interpreters, side by side with
``python -c 'pass'`` and ``import numpy`` so the figure can be read against the interpreter's
own start-up on a noisy machine.

    python benchmarks/import_time.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from _report import write_section

CASES = {
    "python -c pass": "pass",
    "import numpy": "import numpy",
    "import permsc_integrations": "import permsc_integrations",
}


def time_once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main(repeats: int = 15) -> None:
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(repeats):  # interleaved, so machine noise hits every case alike
        for name, code in CASES.items():
            times[name].append(time_once(code))
    base = statistics.median(times["python -c pass"])
    rows = ["| command | median s | min s | over bare interpreter s |", "|---|---|---|---|"]
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append(f"| `{name}` | {med:.3f} | {min(ts):.3f} | {med - base:+.3f} |")
    body = (
        "## Import time\n\nWall time of a fresh interpreter running each command "
        f"({repeats} interleaved runs). Target: `import permsc_integrations` ≤ 0.3 s cold.\n\n"
        + "\n".join(rows)
    )
    write_section("import_time", body)


if __name__ == "__main__":
    main()
