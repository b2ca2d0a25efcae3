"""Sessions: drill into one replay session slot, turn by turn: prompt, cached, ideal and
redundant tokens, TTFT and the tool gap before each request."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from analysis.registry import metric
from dashboards.figures import session_turns_figure
from dashboards.sessions import session_overview, session_turns
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
    known = turns["cached_tokens"].notna()
    known_prompt = float(turns.loc[known, "prompt_tokens"].sum())
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Requests", f"{len(turns):,}")
    c2.metric("Trajectories", f"{turns['trajectory'].nunique():,}")
    c3.metric(
        metric("hit_rate").label,
        f"{turns['cached_tokens'].sum() / known_prompt:.1%}" if known_prompt else "—",
    )
    c4.metric("Redundant tokens", f"{turns['redundant_tokens'].sum():,.0f}")
    st.plotly_chart(session_turns_figure(turns), key="sessions_turns", width="stretch")
    st.dataframe(turns, hide_index=True, width="stretch")
    with st.expander("All session slots of this engine"):
        st.dataframe(
            overview,
            hide_index=True,
            width="stretch",
            column_config={"hit_rate": st.column_config.NumberColumn(format="percent")},
        )
