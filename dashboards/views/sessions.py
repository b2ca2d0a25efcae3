"""Sessions: drill into one replay session slot, turn by turn: prompt, cached, ideal and
redundant tokens, TTFT and the tool gap before each request."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from analysis.registry import metric
from dashboards.alike import window_words
from dashboards.figures import session_turns_figure
from dashboards.sessions import hit_rate_of, session_overview, session_turns
from dashboards.views.common import pick_run_group

ALL = "all trajectories of the slot"


def render(root: Path) -> None:
    st.header("Sessions")
    run = pick_run_group(root, key="sessions_run")
    if run is None:
        return
    engines = run.engines
    if not engines:
        st.warning("This run has no request records yet.")
        return
    left, middle, right = st.columns(3)
    engine = str(left.selectbox("Engine", engines, key="sessions_engine"))
    overview = session_overview(run.requests, engine)
    if overview.empty:
        st.info(f"{engine} has no measured requests in this run.")
        return
    slots = [int(s) for s in overview["session"]]
    session = int(middle.selectbox("Session slot", slots, key="sessions_slot"))
    turns = session_turns(run, engine, session)
    if turns.empty:
        st.info(f"Session {session} of {engine} has no measured requests.")
        return
    trajectories = [ALL, *pd.unique(turns["trajectory"])]
    only = right.selectbox("Trajectory", trajectories, key="sessions_trajectory")
    if only != ALL:
        turns = turns[turns["trajectory"] == only].reset_index(drop=True)
    window = run.default_window()
    st.caption(
        "This page counts the slot's whole run (warm-up and the end included; priming "
        "requests left out), not the measured "
        f"{window_words(window.start_s, window.end_s)} that the Replay page and the report count."
    )
    ended = turns["status"].fillna("ok").astype(str).value_counts()
    ok, cancelled = int(ended.get("ok", 0)), int(ended.get("cancelled", 0))
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(
        "Requests (whole run)",
        f"{len(turns):,}",
        help=f"{ok:,} completed, {cancelled:,} cancelled at the run's end, "
        f"{len(turns) - ok - cancelled:,} failed or not sent",
    )
    c2.metric("Trajectories (whole run)", f"{turns['trajectory'].nunique():,}")
    hit = hit_rate_of(turns)
    c3.metric(
        f"{metric('hit_rate').label} (whole run)",
        f"{hit:.1%}" if hit == hit else "—",
        help="Cached ÷ prompt tokens of the completed requests (as the report counts it).",
    )
    c4.metric("Redundant tokens (whole run)", f"{turns['redundant_tokens'].sum():,.0f}")
    st.plotly_chart(session_turns_figure(turns), key="sessions_turns", width="stretch")
    st.dataframe(turns, hide_index=True, width="stretch")
    with st.expander("All session slots of this engine (whole run)"):
        st.dataframe(
            overview,
            hide_index=True,
            width="stretch",
            column_config={"hit_rate": st.column_config.NumberColumn(format="percent")},
        )
