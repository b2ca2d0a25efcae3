"""Replay: one column per engine, racing through the run with a time slider and a play control.

Every panel shows analysis' metrics over the requests completed by the slider's time, priced
through `pricing`, each with its ratio to the best *other* engine (green when better).
The slider and panels live in a fragment that reruns on a timer while playing, so only they
refresh; the controls outside it restart the timer when changed.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Literal

import streamlit as st

from analysis.runs import Run
from dashboards.figures import cumulative_output_figure
from dashboards.loading import RunUnavailable, run_metrics, run_metrics_at
from dashboards.money import price_engines
from dashboards.timeline import (
    PANEL,
    SPEEDS,
    PanelMetric,
    advance,
    diff_vs_best_other,
    ratio_vs_best_other,
    run_end_s,
)
from dashboards.verdicts import slo_text, unknown_notes, verdict_table, warnings
from dashboards.views.common import PricingChoice, fmt, pick_pricing, pick_run_group

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
        engines = run.engines
        hint = run.engine_info(engines[0]).gpu_type if engines else None
        pricing = pick_pricing("replay", gpu_hint=hint)
    left, right = st.columns(2)
    measured_only = left.toggle(
        "Count from the measured window's start",
        value=False,
        help="Off: from the run's start (the racing counters). On: from the manifest's "
        "measured window start, as reports count.",
    )
    # Off by default: the chart library's first load in a browser tab costs about a second
    # before the panels can paint (measured by scripts/bench_dashboard.py), and the panels
    # are what the page is for.
    chart = right.toggle("Show output over time", value=False, key="replay_chart")
    start = run.default_window().start_s if measured_only else 0.0
    end = run_end_s(run.requests)
    if st.session_state.get(RUN_KEY) != run.run_id:
        # A different run: show it as it finished, stopped.
        st.session_state[RUN_KEY] = run.run_id
        st.session_state[T_KEY] = _top(end)
        st.session_state[PLAYING] = False
    _verdicts(run)
    _controls(end)
    _player(run, start, end, pricing, chart)


def _verdicts(run: Run) -> None:
    """What the run's numbers mean, over its measured window: a red warning for an engine
    that did not keep up (its latencies are its queue), drift and warm-start warnings, and
    the agent-task, SLO and goodput figures."""
    try:
        metrics = run_metrics(run)
    except RunUnavailable as e:
        st.error(str(e))
        return
    for level, text in warnings(metrics):
        (st.error if level == "error" else st.warning)(text)
    with st.expander("Agent tasks, SLOs, goodput and replay fidelity", expanded=False):
        table = verdict_table(metrics)
        st.dataframe(table, hide_index=True, width="stretch", key="replay_verdicts")
        notes = [f"SLO: {slo_text(metrics)}. Goodput counts only requests within it."]
        notes += unknown_notes(metrics)
        st.caption(" ".join(notes))


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


def _player(run: Run, start: float, end: float, pricing: PricingChoice | None, chart: bool) -> None:
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
        _panels(run, float(t), start, pricing)
        if chart:
            st.plotly_chart(
                cumulative_output_figure(run.requests, end, float(t)),
                key="replay_timeline",
                width="stretch",
            )

    frame()


def _panels(run: Run, t: float, start: float, pricing: PricingChoice | None) -> None:
    if t <= start:
        st.info(f"The count starts at {start:.0f} s; move the slider past it.")
        return
    try:
        metrics = run_metrics_at(run, t, start)
    except RunUnavailable as e:
        st.error(str(e))
        return
    if pricing is not None:
        metrics = price_engines(metrics, pricing.sheet, float(pricing.gpu.rate_per_gpu_hour))
    else:
        metrics = metrics.assign(profit_per_gpu_hour=math.nan, user_cost_per_m_input=math.nan)
    metrics = metrics.set_index("engine", drop=False)
    ratios = {m.key: ratio_vs_best_other(metrics[m.key], m.higher_is_better) for m in PANEL}
    diffs = {m.key: diff_vs_best_other(metrics[m.key], m.higher_is_better) for m in PANEL}
    st.caption(f"At {t / 60:.1f} min: {int(metrics['requests'].sum()):,} requests counted.")
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
                        _metric(
                            m,
                            float(row[m.key]),
                            float(ratios[m.key].get(engine, math.nan)),
                            float(diffs[m.key].get(engine, math.nan)),
                        )


def _metric(m: PanelMetric, value: float, ratio: float, diff: float) -> None:
    """A number with its comparison to the best other engine: a ratio where both are
    positive, else the difference (losses, zeros); green when better, red when worse."""
    if math.isfinite(ratio):
        delta = f"{ratio:.2f}× best other"
        gain = ratio - 1.0
    elif math.isfinite(diff) and (diff != 0 or value != 0):
        sign = "+" if diff >= 0 else "−"
        delta = f"{sign}{fmt(abs(diff), m.unit)} vs best other"
        gain = diff / max(abs(value), 1e-12)
    else:
        st.metric(m.label, fmt(value, m.unit), help=m.help)
        return
    if not m.higher_is_better:
        gain = -gain
    color: Literal["green", "red", "gray"] = (
        "green" if gain > 5e-4 else ("red" if gain < -5e-4 else "gray")
    )
    st.metric(
        m.label,
        fmt(value, m.unit),
        delta=delta,
        delta_color=color,
        delta_arrow="off",
        help=m.help,
    )
