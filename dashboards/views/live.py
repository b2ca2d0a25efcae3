"""Live: watch a run directory that is still being written; the page re-reads it on a timer.

The run's files are re-read only when one changed (the cache key includes their sizes and
modification times), so a quiet run costs nothing to watch.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import streamlit as st

from analysis.manifest import manifest_window
from analysis.registry import in_view, row_title
from analysis.runs import Run
from dashboards.alike import window_words
from dashboards.figures import throughput_over_time_figure
from dashboards.loading import RunUnavailable, load, run_metrics
from dashboards.paths import PathRefused, open_inside, relative_name
from dashboards.recency import newest_first
from dashboards.statuses import status_counts
from dashboards.timeline import panel_unit, run_end_s
from dashboards.views.common import available_runs, fmt, no_runs_message
from replay.rundir import RunDirError, read_manifest, run_status

INTERVALS = (1, 2, 5, 10, 30)


def _running_first(root: Path, names: list[str]) -> list[str]:
    """Runs whose manifest says `running` first, each part newest first (cheap: reads
    manifests only)."""

    def running(name: str) -> bool:
        try:
            return read_manifest(root / name).status == "running"
        except RunDirError:
            return False

    return sorted(newest_first(root, names), key=lambda n: not running(n))


def render(root: Path) -> None:
    st.header("Live")
    names = available_runs(root)
    typed = st.text_input(
        "Run directory (relative to the runs folder)",
        key="live_path",
        placeholder="leave empty to pick from the list",
    ).strip()
    if typed:
        try:
            name = relative_name(root, open_inside(root, typed))
        except PathRefused as e:
            st.error(str(e))
            return
    elif names:
        name = str(st.selectbox("Run", _running_first(root, names), key="live_run"))
    else:
        no_runs_message(root)
        return
    left, right = st.columns(2)
    every = right.select_slider(
        "Refresh every (s)", options=list(INTERVALS), value=2, key="live_every"
    )
    auto = left.toggle("Refresh automatically", value=True, key="live_auto")

    @st.fragment(run_every=float(every) if auto else None)
    def watch() -> None:
        try:
            run = load(root, name)
        except RunUnavailable as e:
            st.error(str(e))
            st.caption("Still waiting for the run to write its files? This page retries.")
            return
        _show(run)

    watch()


def _show(run: Run) -> None:
    status = run_status(run.path, run.manifest)  # `interrupted (stale)` for a killed run
    req = run.requests
    end = run_end_s(req) if not req.empty else 0.0
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Status", status)
    c2.metric("Requests recorded", f"{len(req):,}")
    c3.metric("Run time", f"{end / 60:.1f} min")
    newest = max(
        (p.stat().st_mtime for p in run.path.iterdir() if p.is_file()), default=time.time()
    )
    c4.metric("Last write", f"{max(0.0, time.time() - newest):.0f} s ago")
    if req.empty:
        st.info("No request records yet.")
        return
    st.subheader("Whole run so far")
    window = manifest_window(run.manifest)
    report_window = (
        "the report, summary.json and `replay price` count the measured "
        + window_words(window.start_s, window.end_s)
        if window is not None
        else "the run has no measured window: the report counts the whole run"
    )
    st.caption(
        f"Everything below counts the whole run so far (0–{end / 60:.1f} min, warm-up "
        f"included), not the measured window: {report_window}."
    )
    st.dataframe(status_counts(req), hide_index=True, width="stretch", key="live_statuses")
    st.caption(
        "How each request ended. Cancelled: in flight when the run ended (or was stopped) and "
        "cut off; it did not complete and is not counted as completed anywhere on this page."
    )
    try:
        metrics = run_metrics(run, (0.0, max(end, 1e-6) * (1 + 1e-9) + 1e-9))
    except RunUnavailable as e:
        st.error(str(e))
        return
    table = pd.DataFrame(
        {
            "engine": metrics["engine"],
            # The registry's "live" view, shown as the panels show them.
            **{
                row_title(m): [
                    fmt(float(v), panel_unit(m))
                    for v in pd.to_numeric(metrics[m.key], errors="coerce")
                ]
                for m in in_view("live")
            },
        }
    )
    st.dataframe(table, hide_index=True, width="stretch", key="live_metrics")
    shade = (window.start_s, window.end_s) if window is not None else None
    st.plotly_chart(
        throughput_over_time_figure(req, window=shade), key="live_throughput", width="stretch"
    )
