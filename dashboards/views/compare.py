"""Compare runs and sweeps: throughput, hit rate and TTFT against sessions across runs.

Each chosen run contributes one point per engine (analysis' metrics over the run's measured
window). A line joins one engine's points only across alike runs (`dashboards.alike`: the same
executor, clock, length, window, corpus, token scale, model profile and subagent rule; they
differ in sessions and seed only): runs of another kind are their own group, drawn as their own
lines under a legend heading that says what they are, never joined to the others. Within a
group, analysis' sweep aggregation averages runs with the same engine and session count (seeds)
and gives standard errors (across seeds, else from time bins), drawn as bars.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from analysis.registry import column_format, field_sources, figure_label, header, in_view, keys
from analysis.sweeps import aggregate_sweep, capacity_crossing, first_saturated
from dashboards.alike import Kind, group, kind_of
from dashboards.figures import sweep_figure
from dashboards.loading import RunUnavailable, load, run_sweep_rows
from dashboards.views.common import available_runs, no_runs_message

# The registry's "compare.figure" and "compare" views: (metric, label, percent) per figure,
# the table's columns and their headers and formats.
FIGURES = tuple((m.key, figure_label(m), m.fmt == "pct") for m in in_view("compare.figure"))
TABLE_COLUMNS = ("engine", *keys("compare"))
_FORMATS = {
    m.key: st.column_config.NumberColumn(header(m), format=column_format(m), help=m.description)
    for m in in_view("compare")
    if m.fmt not in ("text", "flag", "json", "bool")
}


def sweep_table(root: Path, names: list[str]) -> tuple[pd.DataFrame, dict[str, Kind], list[str]]:
    """analysis' sweep rows of every loadable run in `names`, stacked (one row per run and
    engine) with the run's `group` of alike runs (`dashboards.alike.group`); {group: the kind
    of its runs}, A (the most runs) first; and a message per run skipped."""
    frames: list[pd.DataFrame] = []
    kinds: dict[str, Kind] = {}
    problems: list[str] = []
    for name in names:
        try:
            run = load(root, name)
            frames.append(run_sweep_rows(run).assign(run=name))
        except RunUnavailable as e:
            problems.append(f"{name}: {e}")
            continue
        kinds[name] = kind_of(run.manifest)
    if not frames:
        return pd.DataFrame(), {}, problems
    table = pd.concat(frames, ignore_index=True)
    letters = group(kinds)
    table.insert(1, "group", table["run"].map(letters))
    by_group = {letters[n]: kinds[n] for n in kinds}
    return table, dict(sorted(by_group.items(), key=lambda kv: (len(kv[0]), kv[0]))), problems


def aggregate_groups(table: pd.DataFrame) -> tuple[pd.DataFrame, dict[tuple[str, str], float]]:
    """analysis' sweep aggregation within each group (never across two), with its `group`;
    and each group's capacity crossings, {(group, engine): sessions}."""
    parts = []
    crossings: dict[tuple[str, str], float] = {}
    for name, rows in table.groupby("group", sort=True):
        agg = aggregate_sweep(rows.drop(columns="group"))
        parts.append(agg.assign(group=name))
        crossings.update({(str(name), e): s for e, s in capacity_crossing(agg).items()})
    return pd.concat(parts, ignore_index=True), crossings


def _groups_note(table: pd.DataFrame, groups: dict[str, Kind]) -> None:
    """Say what the runs are: one kind (the lines join them), or several, each with its runs."""
    if len(groups) == 1:
        (kind,) = groups.values()
        st.caption(
            f"All chosen runs are alike ({kind.label()}): a line joins them across sessions."
        )
        return
    lines = []
    for letter, kind in groups.items():
        runs = sorted(set(table.loc[table["group"] == letter, "run"]))
        more = f", … ({len(runs)} runs)" if len(runs) > 6 else ""
        shown = ", ".join(f"`{r}`" for r in runs[:6]) + more
        lines.append(f"- **{letter}**: {kind.label()}: {shown}")
    st.info(
        f"These runs are of {len(groups)} kinds, and unlike runs are never joined: a line "
        "joins only runs that differ in sessions and seed alone (same executor, clock, length, "
        "window, corpus and token scale). Each group has its own lines (its letter and "
        "line style in the legend; the colour is the engine's):\n\n" + "\n".join(lines)
    )


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
    table, groups, problems = sweep_table(root, list(chosen))
    for problem in problems:
        st.warning(f"Skipped {problem}")
    if table.empty:
        st.error("None of the chosen runs could be read.")
        return
    _groups_note(table, groups)
    if table["sessions"].nunique() < 2:
        st.info(
            "All chosen runs have the same session count; a sweep needs runs at several "
            "(e.g. `replay simulate --sessions 8,16,32`)."
        )
    agg, crossings = aggregate_groups(table)
    first = {
        (g, e): s
        for g, rows in table.groupby("group", sort=True)
        for e, s in first_saturated(rows).items()
    }
    if first:
        st.warning(
            "Saturated (the engine did not keep up; its latencies are its queue) from: "
            + ", ".join(
                f"{e} at {s:g} sessions" + (f" ({g})" if len(groups) > 1 else "")
                for (g, e), s in first.items()
            )
        )
    windows = {k.window_label for k in groups.values()}
    window = windows.pop() if len(windows) == 1 else "windows differ by group: see the legend"
    # One group: plain lines per engine (the caption says what they are); several: per group.
    labels = {g: k.short() for g, k in groups.items()} if len(groups) > 1 else None
    marks: dict[Any, float] = (
        dict(crossings) if labels else {e: s for (_, e), s in crossings.items()}
    )
    left, right = st.columns(2)
    for i, (metric, label, percent) in enumerate(FIGURES):
        target = left if i % 2 == 0 else right
        target.plotly_chart(
            sweep_figure(
                agg,
                metric,
                label,
                percent=percent,
                crossings=marks,
                groups=labels,
                window=window,
            ),
            key=f"compare_{metric}",
            width="stretch",
        )
    shown = [c for c in ("group", "run", *TABLE_COLUMNS) if c in table.columns]
    st.dataframe(
        table[shown].sort_values(["group", "sessions", "engine", "run"]),
        hide_index=True,
        width="stretch",
        column_config=_FORMATS,
    )
    if sources := field_sources("compare"):
        st.caption(sources)
