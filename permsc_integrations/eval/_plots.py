"""Pictures of an evaluation: the score against m, one line per aggregator.

Example (not run here: it writes a file):
    >>> sweep_png(report, "docs/img/tau-vs-m.png")  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from permsc_integrations.errors import ConfigurationError, MissingDependencyError
from permsc_integrations.eval._report import EvalReport

__all__ = ["sweep_png"]


def _pyplot() -> ModuleType:
    try:
        # lazy: optional dependency (matplotlib, the eval extra)
        import matplotlib

        matplotlib.use("Agg")
        # lazy: optional dependency (matplotlib, the eval extra)
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib", "eval", purpose="evaluation plots") from None
    return plt


def sweep_png(report: EvalReport, path: str | Path, *, title: str = "") -> None:
    """The mean score of each aggregator against m (``report.sweep``), with the single runs'
    median and best as reference lines; m on a log axis."""
    if not report.sweep:
        raise ConfigurationError("the report has no m sweep: run with --m-sweep 1,2,5,10,20")
    plt = _pyplot()
    ms = sorted(report.sweep)
    fig, ax = plt.subplots(figsize=(5.6, 4.0))
    try:
        for name in report.sweep[ms[0]]:
            ax.plot(ms, [report.sweep[m][name] for m in ms], marker="o", label=name)
        if report.singles:
            ax.axhline(report.single_median, color="grey", ls="--", label="single (median)")
            ax.axhline(report.single_max, color="black", ls=":", label="single (best run)")
        ax.set_xscale("log")
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_xlabel("m (shuffled samples aggregated)")
        ax.set_ylabel(report.metric)
        ax.set_title(title or f"{report.task}: {report.metric} against m")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
