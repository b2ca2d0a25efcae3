"""Compare runs and sweeps: throughput, hit rate and TTFT against sessions across runs.

Each chosen run contributes one point per engine (analysis' metrics over the run's measured
window); analysis' sweep aggregation averages runs with the same engine and session count
(seeds) and gives standard errors (across seeds, else from time bins), drawn as bars.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from analysis.registry import column_format, figure_label, header, in_view, keys
from analysis.sweeps import aggregate_sweep, capacity_crossing, first_saturated
from dashboards.figures import sweep_figure
from dashboards.loading import RunUnavailable, load, run_sweep_rows
from dashboards.views.common import available_runs, no_runs_message

# The registry's "compare.figure" and "compare" views: (metric, label, percent) per figure,
# the table's columns and their headers and formats.
FIGURES = tuple((m.key, figure_label(m), m.fmt == "pct") for m in in_view("compare.figure"))
TABLE_COLUMNS = ("engine", *keys("compare"))
_FORMATS = {
    m.key: st.column_config.NumberColumn(header(m), format=column_format(m))
    for m in in_view("compare")
    if m.fmt not in ("text", "flag", "json", "bool")
}


def sweep_table(root: Path, names: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """analysis' sweep rows of every loadable run in `names`, stacked (one row per run and
    engine); and a message per run skipped."""
    frames: list[pd.DataFrame] = []
    problems: list[str] = []
    for name in names:
        try:
            frames.append(run_sweep_rows(load(root, name)).assign(run=name))
        except RunUnavailable as e:
            problems.append(f"{name}: {e}")
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return table, problems


def render(root: Path) -> None:
    st.header("Compare runs and sweeps")
    names = available_runs(root)
    if not names:
        no_runs_message(root)
        return
    chosen = st.multiselect(
        "Runs", names, default=names, key="compare_runs", help="Each run is one session count."
    )
    if not chosen:
        st.info("Choose at least one run.")
        return
    table, problems = sweep_table(root, list(chosen))
    for problem in problems:
        st.warning(f"Skipped {problem}")
    if table.empty:
        st.error("None of the chosen runs could be read.")
        return
    if table["sessions"].nunique() < 2:
        st.info(
            "All chosen runs have the same session count; a sweep needs runs at several "
            "(e.g. `replay simulate --sessions 8,16,32`)."
        )
    agg = aggregate_sweep(table)
    crossings = capacity_crossing(agg)
    first = first_saturated(table)
    if first:
        st.warning(
            "Saturated (the engine did not keep up; its latencies are its queue) from: "
            + ", ".join(f"{e} at {s:g} sessions" for e, s in first.items())
        )
    left, right = st.columns(2)
    for i, (metric, label, percent) in enumerate(FIGURES):
        target = left if i % 2 == 0 else right
        target.plotly_chart(
            sweep_figure(agg, metric, label, percent=percent, crossings=crossings),
            key=f"compare_{metric}",
            width="stretch",
        )
    shown = [c for c in TABLE_COLUMNS if c in table.columns]
    st.dataframe(
        table[shown].sort_values(["sessions", "engine"]),
        hide_index=True,
        width="stretch",
        column_config=_FORMATS,
    )
