"""Analysis of run directories: window metrics, miss decomposition, comparisons, reports.

The stable entry points:

    from analysis import load_run, find_runs, window_metrics, build_summary
    run = load_run("runs/run-...")          # RunDirError with a readable message if broken
    table = window_metrics(run)             # one row per engine (see analysis.metrics)
    summary = build_summary(run)            # what summary.json holds
"""

from analysis.metrics import METRICS, window_metrics
from analysis.runs import Run, RunDirError, find_runs, load_run
from analysis.summary import build_summary, write_summary

__all__ = [
    "METRICS",
    "Run",
    "RunDirError",
    "build_summary",
    "find_runs",
    "load_run",
    "window_metrics",
    "write_summary",
]
