"""Replay: one column per engine, racing through the run with a time slider and a play control.

Every panel shows analysis' metrics over the requests completed by the slider's time, counted
by default over the manifest's measured window as the report counts (at the slider's end the
panels show exactly the report's, summary.json's and `replay price`'s numbers), priced by the
one pricing of a run (`analysis.economics`), each against the best *other* engine: "N× better"
in green, "N× worse" in red, in the metric's direction.
The slider and panels live in a fragment that reruns on a timer while playing, so only they
refresh; the controls outside it restart the timer when changed.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from analysis.comparison import of_ceilings
from analysis.runs import Run
from dashboards.alike import window_words
from dashboards.figures import cumulative_output_figure
from dashboards.loading import RunUnavailable, run_metrics, run_metrics_at
from dashboards.money import priced_metrics
from dashboards.tiers import tier_table
from dashboards.timeline import (
    PANEL,
    SPEEDS,
    PanelMetric,
    advance,
    best_other,
    counting_window,
    slider_end,
    versus_best_other,
)
from dashboards.verdicts import slo_text, unknown_notes, verdict_table, warnings
from dashboards.views.common import PricingChoice, fmt, pick_pricing, pick_run_group
from pricing import PricingError

TICK_S = 0.5  # wall seconds between frames while playing
T_KEY = "replay_t"
T_EXACT = "replay_t_exact"
PLAYING = "replay_playing"
LAST_TICK = "replay_last_tick"
RUN_KEY = "replay_loaded_run"


def render(root: Path) -> None:
    st.header("Replay")
    st.caption(
        "Every engine on the same sessions. Metrics count the requests completed by the "
        "slider's time; the ratio compares each engine with the best of the others."
    )
    run = pick_run_group(root, key="replay_run")
    if run is None:
        return
    if run.requests.empty:
        st.warning("This run has no request records yet.")
        return
    with st.expander("Pricing for the panels", expanded=False):
        pricing = pick_pricing("replay", own_gpus=True)
    left, right = st.columns(2)
    measured_only = left.toggle(
        "Count the measured window only",
        value=True,
        help="On: the manifest's measured window, as the report, summary.json and `replay "
        "price` count. Off: from the run's start to the slider (the racing counters, warm-up "
        "and ramp-down included).",
    )
    # Off by default: the chart library's first load in a browser tab costs about a second
    # before the panels can paint (measured by scripts/bench_dashboard.py), and the panels
    # are what the page is for.
    chart = right.toggle("Show output over time", value=False, key="replay_chart")
    start, stop = counting_window(run, measured_only)
    end = slider_end(run, stop)
    if st.session_state.get(RUN_KEY) != (run.run_id, measured_only):
        # A different run or count: show it as it finished, stopped.
        st.session_state[RUN_KEY] = (run.run_id, measured_only)
        st.session_state[T_KEY] = _top(end)
        st.session_state[PLAYING] = False
    _verdicts(run)
    _controls(end)
    _player(run, (start, stop), end, pricing, chart)


def _verdicts(run: Run) -> None:
    """What the run's numbers mean, over its measured window: a red warning for an engine
    that did not keep up (its latencies are its queue), drift and warm-start warnings, the
    agent-task, SLO and goodput figures, and hits by cache tier where the cache has tiers."""
    try:
        metrics = run_metrics(run)
    except RunUnavailable as e:
        st.error(str(e))
        return
    for level, text in warnings(metrics):
        (st.error if level == "error" else st.warning)(text)
    counted = window_words(*_window_of(metrics, run))
    with st.expander(f"Agent tasks, SLOs, goodput and replay fidelity ({counted})"):
        table = verdict_table(metrics)
        st.dataframe(table, hide_index=True, width="stretch", key="replay_verdicts")
        notes = [f"SLO: {slo_text(metrics)}. Goodput counts only requests within it."]
        notes += unknown_notes(metrics)
        st.caption(" ".join(notes))
    tiers = tier_table(metrics)
    if tiers is not None:  # a cache with tiers (issue 34): nothing new for an untiered run
        with st.expander(f"Cache hits by tier: GPU, host memory, external store ({counted})"):
            st.dataframe(tiers, hide_index=True, width="stretch", key="replay_tiers")
            st.caption(
                "Of the measured requests' prompt tokens, those each tier served (GPU + host + "
                "external = hit rate); of hits from host: host ÷ cached tokens."
            )


def _window_of(metrics: pd.DataFrame, run: Run) -> tuple[float, float]:
    """The window analysis counted (`window_start_s`, `window_end_s`: the manifest's, clipped
    to the data), else the run's own."""
    if {"window_start_s", "window_end_s"} <= set(metrics.columns) and len(metrics):
        return float(metrics["window_start_s"].iloc[0]), float(metrics["window_end_s"].iloc[0])
    win = run.default_window()
    return win.start_s, win.end_s


def _step(end: float) -> int:
    """Slider step in seconds: about 600 steps over the run."""
    return max(1, math.ceil(end / 600))


def _top(end: float) -> int:
    """The slider's last position: the first step at or after the run's end, so the end
    position counts every request."""
    step = _step(end)
    return int(math.ceil(end / step) * step)


def _step_time(t: float, end: float) -> int:
    """`t` on the slider's grid (never past `_top`)."""
    step = _step(end)
    return int(min(_top(end), round(t / step) * step))


def _controls(end: float) -> None:
    left, right = st.columns([3, 1])
    speed = left.select_slider(
        "Play speed (× run time)", options=list(SPEEDS), value=20, key="replay_speed"
    )
    playing = bool(st.session_state.get(PLAYING, False))
    right.write("")  # align the button with the slider
    if right.button("Pause" if playing else "Play", key="replay_play", width="stretch"):
        playing = not playing
        st.session_state[PLAYING] = playing
        st.session_state[LAST_TICK] = time.monotonic()
        if playing and st.session_state.get(T_KEY, 0) >= _top(end):
            st.session_state[T_KEY] = 0  # play from the start after the end was reached
            st.session_state[T_EXACT] = 0.0
        st.rerun()
    st.session_state["replay_speed_value"] = float(speed)


def _player(
    run: Run,
    count: tuple[float, float],
    end: float,
    pricing: PricingChoice | None,
    chart: bool,
) -> None:
    playing = bool(st.session_state.get(PLAYING, False))

    @st.fragment(run_every=TICK_S if playing else None)
    def frame() -> None:
        if st.session_state.get(PLAYING, False):
            now = time.monotonic()
            elapsed = now - float(st.session_state.get(LAST_TICK, now))
            st.session_state[LAST_TICK] = now
            speed = float(st.session_state.get("replay_speed_value", 1.0))
            shown = st.session_state.get(T_KEY, 0)
            exact = float(st.session_state.get(T_EXACT, shown))
            if _step_time(exact, end) != shown:
                exact = float(shown)  # the user dragged the slider while playing
            t, finished = advance(exact, speed, elapsed, end)
            # The slider moves in steps; the exact time accumulates so 1× still advances.
            st.session_state[T_EXACT] = t
            st.session_state[T_KEY] = _step_time(t, end)
            if finished:
                st.session_state[PLAYING] = False
                st.rerun(scope="app")  # stop the timer
        top = _top(end)
        if st.session_state.get(T_KEY, 0) > top:  # the run was rewritten shorter
            st.session_state[T_KEY] = top
        t = st.slider(
            "Run time (s)",
            min_value=0,
            max_value=top,
            step=_step(end),
            key=T_KEY,
        )
        _panels(run, float(t), count, pricing)
        if chart:
            win = run.default_window()
            st.plotly_chart(
                cumulative_output_figure(
                    run.requests, end, float(t), window=(win.start_s, win.end_s)
                ),
                key="replay_timeline",
                width="stretch",
            )

    frame()


def panel_frame(
    metrics: pd.DataFrame, pricing: PricingChoice | None
) -> tuple[pd.DataFrame, str | None]:
    """What the panels show, from `dashboards.timeline.metrics_at`'s frame: priced by the
    one pricing of a run (each engine at its own GPU's rate unless a GPU is chosen), indexed
    by engine; and why it is not priced (an engine's GPU without a rate), if so."""
    why = None
    if pricing is not None:
        try:
            metrics = priced_metrics(metrics, pricing.sheet, pricing.gpu)
        except PricingError as e:
            pricing = None
            why = f"Not priced: {e}. Choose a GPU rate under “Pricing for the panels”."
    if pricing is None:
        metrics = metrics.assign(profit_per_gpu_hour=math.nan, user_cost_per_m_input=math.nan)
    return metrics.set_index("engine", drop=False), why


def _panels(run: Run, t: float, count: tuple[float, float], pricing: PricingChoice | None) -> None:
    start, stop = count
    if t <= start:
        st.info(f"The count starts at {start:.0f} s; move the slider past it.")
        return
    try:
        raw = run_metrics_at(run, t, start, stop)
    except RunUnavailable as e:
        st.error(str(e))
        return
    metrics, why = panel_frame(raw, pricing)
    if why is not None:
        st.warning(why)
    best = {m.key: best_other(metrics[m.key], m.higher_is_better) for m in PANEL}
    saturated = _saturated(run)
    shown = f"{start:.0f}–{min(t, stop):.0f} s" + (
        " (the measured window)" if stop < math.inf else ""
    )
    st.caption(
        f"At {t / 60:.1f} min: {int(metrics['requests'].sum()):,} requests counted, {shown}."
    )
    for column, engine in zip(st.columns(len(metrics)), metrics.index, strict=True):
        with column.container(border=True):
            row = metrics.loc[engine]
            gpus = int(row["gpus"])
            st.subheader(str(engine))
            st.caption(f"{gpus} GPU{'s' if gpus != 1 else ''} {row.get('gpu_type') or ''}")
            # Two numbers a row fit when there are one or two panels; with three or more a
            # panel is too narrow for a dollar figure beside another, so one a row.
            per_row = 2 if len(metrics) <= 2 else 1
            for group in (PANEL[i : i + per_row] for i in range(0, len(PANEL), per_row)):
                for cell, m in zip(st.columns(per_row), group, strict=False):
                    with cell:
                        ceilings = saturated and of_ceilings(m.key)
                        value, other = float(row[m.key]), float(best[m.key].get(engine, math.nan))
                        _metric(m, value, other, ceilings)


def _saturated(run: Run) -> bool:
    """Whether any engine of the run was saturated over its measured window: then every
    throughput comparison between them compares ceilings."""
    try:
        metrics = run_metrics(run)
    except RunUnavailable:
        return False
    return "saturated" in metrics.columns and bool(metrics["saturated"].fillna(False).any())


def _metric(m: PanelMetric, value: float, best: float, ceilings: bool = False) -> None:
    """A number with its comparison to the best other engine (`versus_best_other`), said to
    be a ratio of ceilings where an engine was saturated and the metric is a throughput."""
    versus = versus_best_other(value, best, m.higher_is_better, lambda x: fmt(x, m.unit), ceilings)
    if versus is None:
        st.metric(m.label, fmt(value, m.unit), help=m.help)
        return
    text, color = versus
    st.metric(
        m.label,
        fmt(value, m.unit),
        delta=f"{text} vs best other",
        delta_color=color,
        delta_arrow="off",
        help=m.help,
    )
