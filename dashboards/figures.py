"""Figure builders: plain functions from DataFrames to plotly figures, no Streamlit.

Each takes the columns it names (request-record columns, or a metrics table from analysis)
and returns a `go.Figure`, so tests call them directly and the pages only lay them out.
Large runs are binned before plotting: a browser should not draw 100,000 points per line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

# One colour per engine on every page and in the report (analysis.palette).
from analysis.palette import engine_colors, line_dash
from dashboards.alike import window_words

TIMELINE_BINS = 240


def _layout(
    fig: go.Figure, title: str, x: str, y: str, height: int = 380, subtitle: str | None = None
) -> go.Figure:
    """The common layout; `subtitle` goes in small type under the title (what is counted)."""
    if subtitle:
        title = f"{title}<br><sup>{subtitle}</sup>"
    fig.update_layout(
        title=title,
        xaxis_title=x,
        yaxis_title=y,
        height=height,
        margin={"l": 50, "r": 20, "t": 70 if subtitle else 50, "b": 90},
        # Below the x-axis title, not over it.
        legend={"orientation": "h", "yanchor": "top", "y": -0.3, "x": 0},
        template="plotly_white",
    )
    return fig


def _numbers(df: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _shade_window(fig: go.Figure, window: tuple[float, float] | None) -> str:
    """Shade the measured window (seconds) on a run-time axis in minutes; the words for the
    title: "whole run", and the window shaded when there is one."""
    if window is None or not math.isfinite(window[1]):
        return "whole run"
    fig.add_vrect(
        x0=window[0] / 60.0,
        x1=window[1] / 60.0,
        fillcolor="#999",
        opacity=0.12,
        line_width=0,
        annotation_text="measured window",
        annotation_position="top left",
        annotation_font_size=10,
    )
    return f"whole run; shaded: the measured {window_words(*window)}"


def cumulative_output_figure(
    requests: pd.DataFrame,
    end_s: float,
    t: float | None = None,
    bins: int = TIMELINE_BINS,
    window: tuple[float, float] | None = None,
) -> go.Figure:
    """Output tokens completed so far, per engine, against run time (minutes): the whole
    run, with the measured `window` (seconds) shaded; a dashed line marks the slider's time.
    Requests are binned by `done_s` into `bins` steps."""
    fig = go.Figure()
    engines = [str(e) for e in pd.unique(requests["engine"].dropna())]
    colors = engine_colors(engines)
    edges = np.linspace(0.0, max(end_s, 1e-9), bins + 1)
    for name in engines:
        rows = requests[requests["engine"] == name]
        done = _numbers(rows, "done_s")
        tokens = np.nan_to_num(_numbers(rows, "output_tokens"))
        ok = ~np.isnan(done)
        counts, _ = np.histogram(done[ok], bins=edges, weights=tokens[ok])
        fig.add_trace(
            go.Scatter(
                x=edges[1:] / 60.0,
                y=np.cumsum(counts),
                mode="lines",
                name=name,
                line={"color": colors[name], "width": 2},
            )
        )
    if t is not None:
        fig.add_vline(x=t / 60.0, line_dash="dash", line_color="#555")
    span = _shade_window(fig, window)
    return _layout(fig, "Output tokens completed", "run time (min)", "tokens", subtitle=span)


def completed_ok(requests: pd.DataFrame) -> pd.DataFrame:
    """The requests that completed: status `ok` (a record without a status column is taken as
    ok). Cancelled requests (cut off at the run's end) carry a `done_s` too, the moment they
    were cut off; they did not complete, and neither did failed ones."""
    if "status" not in requests.columns:
        return requests
    return requests[requests["status"].fillna("ok").astype(str).to_numpy() == "ok"]


def throughput_over_time_figure(
    requests: pd.DataFrame, bins: int = 90, window: tuple[float, float] | None = None
) -> go.Figure:
    """Completed requests per minute per engine over the whole run (the Live page): the
    `done_s` of requests that finished ok (`completed_ok`: not the cancelled, not the failed)
    in about `bins` equal bins of at least 10 s, so long runs stay readable; the measured
    `window` (seconds) shaded."""
    fig = go.Figure()
    engines = [str(e) for e in pd.unique(requests["engine"].dropna())]
    colors = engine_colors(engines)
    done_all = _numbers(requests, "done_s")
    last = float(np.nanmax(done_all)) if np.isfinite(done_all).any() else 0.0
    bin_s = max(10.0, math.ceil(last / bins / 10.0) * 10.0)
    edges = np.arange(0.0, last + bin_s, bin_s) if last > 0 else np.array([0.0, bin_s])
    completed = completed_ok(requests)
    for name in engines:
        done = _numbers(completed[completed["engine"] == name], "done_s")
        counts, _ = np.histogram(done[~np.isnan(done)], bins=edges)
        fig.add_trace(
            go.Scatter(
                x=edges[1:] / 60.0,
                y=counts * (60.0 / bin_s),
                mode="lines",
                name=name,
                line={"color": colors[name]},
            )
        )
    span = _shade_window(fig, window)
    return _layout(
        fig,
        "Requests completed per minute",
        "run time (min)",
        "requests/min",
        subtitle=f"{span}; {bin_s:.0f} s bins; cancelled and failed requests not counted",
    )


# Line styles that tell groups of alike runs apart on the Compare page (colour: the engine).
GROUP_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")


def sweep_figure(
    table: pd.DataFrame,
    metric: str,
    label: str,
    percent: bool = False,
    crossings: Mapping[Any, float] | None = None,
    groups: Mapping[str, str] | None = None,
    window: str | None = None,
) -> go.Figure:
    """One metric against the number of sessions, one line per engine (per group of alike
    runs, with `groups`), and per configuration where an engine's runs differ in more than
    the seed (the table's `series`, e.g. `vllm · router state_aware`: a line never joins two
    routers).

    `table` is analysis' aggregated sweep (`analysis.sweeps.aggregate_sweep`): `engine`,
    `sessions`, `metric` and, where known, `<metric>_se` (drawn as error bars). With `groups`
    ({group: what its runs are}, see `dashboards.alike`) the table has a `group` column too and
    each (group, engine) is its own line, in the engine's colour and the group's dash, under a
    legend heading that says what the group is: a line never joins runs of two groups.
    `crossings` marks where a line's working set reaches its cache capacity: {engine or
    series: sessions}, or {(group, engine or series): sessions} with groups. `window` goes in the title: the
    window the points count. Lines without a value (a metric the runs cannot know) are left
    out, and an empty figure says so."""
    fig = go.Figure()
    scale = 100.0 if percent else 1.0
    engines = [str(e) for e in pd.unique(table["engine"].dropna())]
    colors = engine_colors(engines)
    se_col = f"{metric}_se"
    names = list(groups) if groups else [None]
    # One line per configuration of an engine where the sweep has several (`series`:
    # `analysis.sweeps.label_configs`), e.g. two routers at the same session counts.
    column = "series" if "series" in table.columns else "engine"
    engine_of = dict(zip(table[column].astype(str), table["engine"].astype(str), strict=True))
    blank: list[str] = []  # groups with no value for this metric
    for i, group in enumerate(names):
        part = table if group is None else table[table["group"] == group]
        if group is not None and not pd.to_numeric(part[metric], errors="coerce").notna().any():
            blank.append(group)
        for name, line, j in _lines_of(part, engines, column):
            rows = part[part[column].astype(str) == line].sort_values("sessions")
            y = pd.to_numeric(rows[metric], errors="coerce").to_numpy(dtype=float) * scale
            if not np.isfinite(y).any():
                continue
            err = (
                pd.to_numeric(rows[se_col], errors="coerce").fillna(0.0).to_numpy(dtype=float)
                * scale
                if se_col in rows
                else np.zeros(len(rows))
            )
            style: dict[str, Any] = {}
            if group is not None and groups is not None:
                style = {
                    "legendgroup": group,
                    "legendgrouptitle_text": f"{group}: {groups[group]}",
                    "marker": {"symbol": GROUP_SYMBOLS[i % len(GROUP_SYMBOLS)], "size": 8},
                }
            fig.add_trace(
                go.Scatter(
                    x=rows["sessions"].to_numpy(),
                    y=y,
                    error_y={"type": "data", "array": err, "visible": bool((err > 0).any())},
                    mode="lines+markers",
                    name=line,
                    line={
                        "color": colors[name],
                        "dash": line_dash(i + j),
                    },
                    **style,
                )
            )
    for where, sessions in (crossings or {}).items():
        group, name = where if isinstance(where, tuple) else (None, where)
        fig.add_vline(
            x=sessions,
            line_dash="dot",
            line_color=colors.get(engine_of.get(str(name), str(name)), "#999"),
            annotation_text=f"{name}{f' ({group})' if group else ''}: working set = cache",
            annotation_font_size=10,
        )
    if not fig.data or blank:
        who = "these runs" if not fig.data else "group " + ", ".join(blank)
        fig.add_annotation(
            text=f"no values for {who}: n/a (see the table)",
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.5 if not fig.data else 1.0,
            xanchor="center" if not fig.data else "right",
            y=0.5 if not fig.data else 1.02,
            yanchor="middle" if not fig.data else "bottom",
            font={"size": 11, "color": "#666"},
        )
    fig = _layout(fig, f"{label} vs sessions", "concurrent sessions", label, subtitle=window)
    if groups and len(groups) > 1:
        # Each group's heading above its engines; more room below for the headings.
        fig.update_layout(
            height=460, margin={"b": 170}, legend={"orientation": "h", "groupclick": "toggleitem"}
        )
    return fig


def _lines_of(part: pd.DataFrame, engines: list[str], column: str) -> list[tuple[str, str, int]]:
    """(engine, line, its index among the engine's lines) for each line of `part`, engines in
    their order: a line is a value of `column` (the engine, or the engine and its
    configuration)."""
    out: list[tuple[str, str, int]] = []
    for name in engines:
        lines = pd.unique(part.loc[part["engine"] == name, column].astype(str))
        out += [(name, str(line), j) for j, line in enumerate(lines)]
    return out


def whatif_figure(
    curves: pd.DataFrame,
    x: str,
    y: str,
    x_label: str,
    y_label: str,
    subtitle: str | None = None,
) -> go.Figure:
    """Lines of `y` against `x`, one per engine (`curves` has `engine`, `x`, `y`), with the
    zero line drawn: on a profit curve, where it crosses is the break-even point. `subtitle`:
    what the curves count (the window of the rates they are computed from)."""
    fig = go.Figure()
    engines = [str(e) for e in pd.unique(curves["engine"].dropna())]
    colors = engine_colors(engines)
    for name in engines:
        rows = curves[curves["engine"] == name].sort_values(x)
        fig.add_trace(
            go.Scatter(x=rows[x], y=rows[y], mode="lines", name=name, line={"color": colors[name]})
        )
    fig.add_hline(y=0.0, line_color="#999", line_width=1)
    return _layout(fig, f"{y_label} vs {x_label}", x_label, y_label, subtitle=subtitle)


def engine_bars_figure(
    values: Mapping[str, float],
    title: str,
    y_label: str,
    engines: list[str] | None = None,
    subtitle: str | None = None,
) -> go.Figure:
    """One bar per engine (the pricing page's profit and user-cost comparisons); `subtitle`:
    the window the values count."""
    names = engines if engines is not None else list(values)
    colors = engine_colors(names)
    ys = [float(values.get(n, math.nan)) for n in names]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=ys,
            marker_color=[colors[n] for n in names],
            text=[f"{v:,.3f}" if math.isfinite(v) else "n/a" for v in ys],
            textposition="outside",
        )
    )
    return _layout(fig, title, "engine", y_label, height=300, subtitle=subtitle)


def session_turns_figure(turns: pd.DataFrame) -> go.Figure:
    """One session's requests in order: stacked prompt tokens (cached, redundant, the rest
    computed) as bars; TTFT and the tool gap before each request as lines on a second axis.

    `turns` has `label`, `cached_tokens`, `redundant_tokens`, `computed_tokens`, `ttft_s`,
    `tool_gap_s` (see `dashboards.sessions.session_turns`). The x axis is the request's
    position; the label (trajectory, agent, turn) shows on hover."""
    fig = go.Figure()
    x = np.arange(1, len(turns) + 1)
    labels = turns["label"].astype(str).to_numpy()
    for col, name, color in (
        ("cached_tokens", "cached", "#2a9d8f"),
        ("redundant_tokens", "redundant (cacheable, recomputed)", "#e76f51"),
        ("computed_tokens", "new (uncacheable)", "#8d99ae"),
    ):
        fig.add_trace(
            go.Bar(
                x=x,
                y=turns[col],
                name=name,
                marker_color=color,
                customdata=labels,
                hovertemplate="%{customdata}<br>%{y:,.0f} tokens<extra>" + name + "</extra>",
            )
        )
    for col, name, color, dash in (
        ("ttft_s", "TTFT (s)", "#264653", "solid"),
        ("tool_gap_s", "tool gap before (s)", "#f4a261", "dot"),
    ):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=turns[col],
                name=name,
                yaxis="y2",
                mode="lines+markers",
                line={"color": color, "dash": dash},
                marker={"size": 4},
                customdata=labels,
                hovertemplate="%{customdata}<br>%{y:.2f} s<extra>" + name + "</extra>",
            )
        )
    # The slot's whole run (warm-up and tail included), not the measured window.
    title = "Prompt tokens per request (whole run)"
    _layout(fig, title, "request (in scheduled order)", "tokens", 400)
    fig.update_layout(
        barmode="stack",
        bargap=0.1,
        yaxis2={"title": "seconds", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        margin={"t": 80},
    )
    return fig
