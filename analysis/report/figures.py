"""The report's plotly figures, as plain functions of `ReportData` (testable without a
browser). Distributions are down-sampled to at most `MAX_POINTS` per curve so an HTML
report of a 100,000-request run stays small."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

import pricing
from analysis.comparison import ratio_label
from analysis.manifest import manifest_seed
from analysis.metrics import engine_data, measured_mask
from analysis.palette import engine_color, line_dash
from analysis.registry import BY_KEY, figure_label, header
from analysis.report.content import ReportData, RunAnalysis

MAX_POINTS = 1000
MISS_PARTS = (
    ("placement_miss_per_request", "placement"),
    ("dependency_miss_per_request", "dependency"),
    ("capacity_miss_per_request", "capacity"),
)


def _layout(fig: go.Figure, title: str, x: str, y: str, legend: str = "engine") -> go.Figure:
    fig.update_layout(
        title=title,
        xaxis_title=x,
        yaxis_title=y,
        template="plotly_white",
        legend_title_text=legend,
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        width=800,
        height=480,
    )
    return fig


def _label(a: RunAnalysis, engine: str, data: ReportData) -> str:
    """A run's engine as a legend or axis names it where the report holds several runs: its
    configuration, load and seed, and its run id where another run repeats that seed (live
    runs measured again), so repeats never share a name."""
    if len(data.runs) < 2:
        return engine
    sessions = a.metrics.loc[a.metrics["engine"] == engine, "sessions"].iloc[0]
    seed = manifest_seed(a.run.manifest)
    config = f" · {a.config_label}" if a.config_label else ""
    label = f"{engine}{config} · {sessions} sessions" + ("" if seed is None else f" · seed {seed}")
    repeats = [b for b in data.runs if b is not a and _same_point(a, b)]
    if seed is not None and repeats:
        # A copy keeps its run id: then the folder tells them apart.
        copied = any(b.run.run_id == a.run.run_id for b in repeats)
        label += f" · {a.run.path.name if copied else a.run.run_id}"
    return label


def _config(a: RunAnalysis) -> object:
    return a.metrics["config"].iloc[0] if "config" in a.metrics and len(a.metrics) else None


def _same_point(a: RunAnalysis, b: RunAnalysis) -> bool:
    """Whether `b` is `a`'s configuration (`analysis.configs.config_key`) and seed: a repeat
    or a copy of it."""
    same = _config(a) == _config(b) and set(a.run.engines) & set(b.run.engines)
    return bool(same) and manifest_seed(a.run.manifest) == manifest_seed(b.run.manifest)


def _point_text(sweep: pd.DataFrame) -> list[str]:
    """Each point's hover: what its error bar spans (`analysis.measurements.spread`: seeds,
    or repeats of one seed, which are run-to-run noise) and its working-set-to-capacity
    ratio where known."""
    ratio = sweep["working_set_ratio"].to_numpy(float)
    source = sweep.get("se_source", pd.Series("", index=sweep.index))
    words = sweep.get("spread", pd.Series("", index=sweep.index))
    out = []
    for r, src, what in zip(ratio, source, words, strict=True):
        bar = "± SE from time bins" if src == "time bins" else f"± SE over {what}"
        if src in ("repeats", "seeds × repeats"):
            bar += " (repeats: run-to-run noise)"
        parts = [bar] if src else []
        parts += [f"working set / capacity {r:.2f}"] if math.isfinite(r) else []
        out.append("<br>".join(parts))
    return out


def versus_sessions(
    data: ReportData, metric: str, title: str, y: str | None = None, pct: bool | None = None
) -> go.Figure:
    """`metric` against session count per engine, ± one standard error, with what each
    point's error bar spans (seeds or repeats) and its working-set-to-capacity ratio in its
    hover and a dotted line where it reaches 1. The
    axis label and the percent scale default to the registry's (`analysis.registry`)."""
    fig = go.Figure()
    m = BY_KEY.get(metric)
    y = y if y is not None else (figure_label(m) if m is not None else metric)
    pct = pct if pct is not None else (m is not None and m.fmt == "pct")
    scale = 100.0 if pct else 1.0
    if data.sweep["sessions"].nunique() <= 1:
        return _single_load(data, metric, title, y, scale)
    # One line per engine and configuration (`analysis.sweeps`: `series`), in its engine's colour.
    of_engine: dict[str, int] = {}  # lines drawn so far per engine: the next one's dash
    for line, g in data.sweep.groupby("series", sort=False):
        engine = g["engine"].iloc[0]
        dash = line_dash(of_engine.get(str(engine), 0))
        of_engine[str(engine)] = of_engine.get(str(engine), 0) + 1
        g = g.sort_values("sessions")
        se = g.get(f"{metric}_se", pd.Series(np.nan, index=g.index)).to_numpy(float) * scale
        text = _point_text(g)
        fig.add_trace(
            go.Scatter(
                x=g["sessions"],
                y=g[metric].to_numpy(float) * scale,
                error_y={"type": "data", "array": np.nan_to_num(se), "visible": True},
                mode="lines+markers",
                name=str(line),
                line={"color": engine_color(str(engine)), "dash": dash},
                text=text,
                hovertemplate="%{x} sessions: %{y:.3s}<br>%{text}<extra>" + str(line) + "</extra>",
            )
        )
    # One marker per distinct crossing; engines that share it share the label.
    at: dict[float, list[str]] = {}
    for engine, sessions in data.crossing.items():
        at.setdefault(round(sessions, 1), []).append(engine)
    for sessions, engines in at.items():
        who = "" if len(engines) == len(data.crossing) else f" ({', '.join(engines)})"
        fig.add_vline(
            x=sessions,
            line_dash="dot",
            line_color="grey",
            annotation_text=f"working set = cache ≈ {sessions:g} sessions{who}",
            annotation_position="top left",
        )
    return _layout(fig, title, "concurrent sessions", y)


def _single_load(data: ReportData, metric: str, title: str, y: str, scale: float) -> go.Figure:
    """One session count only: a bar per engine with ± one standard error."""
    s = data.sweep
    se = s.get(f"{metric}_se", pd.Series(np.nan, index=s.index)).to_numpy(float) * scale
    text = _point_text(s)
    fig = go.Figure(
        go.Bar(
            x=s["series"],
            y=s[metric].to_numpy(float) * scale,
            error_y={"type": "data", "array": np.nan_to_num(se), "visible": True},
            hovertext=text,
            marker_color=[engine_color(str(e)) for e in s["engine"]],
        )
    )
    sessions = s["sessions"].iloc[0] if len(s) else "?"
    return _layout(fig, f"{title} ({sessions} sessions)", "engine", y)


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = np.sort(values[np.isfinite(values)])
    if len(values) == 0:
        return values, values
    probs = np.arange(1, len(values) + 1) / len(values)
    if len(values) > MAX_POINTS:
        idx = np.unique(np.linspace(0, len(values) - 1, MAX_POINTS).astype(int))
        values, probs = values[idx], probs[idx]
    return values, probs


def _distribution(
    data: ReportData, pick: Callable[[RunAnalysis, str], np.ndarray], title: str, x: str, log: bool
) -> go.Figure:
    fig = go.Figure()
    for a in data.runs:
        for engine in a.metrics["engine"]:
            xs, ps = _ecdf(pick(a, str(engine)))
            color = {"color": engine_color(str(engine))}
            fig.add_trace(
                go.Scatter(x=xs, y=ps, mode="lines", name=_label(a, str(engine), data), line=color)
            )
    fig = _layout(fig, title, x, "fraction of requests")
    if log:
        fig.update_xaxes(type="log")
    return fig


def _served(a: RunAnalysis, engine: str) -> tuple[np.ndarray, ...]:
    d = engine_data(a.run, engine)
    mask = measured_mask(d, a.window)
    return d.first[mask] - d.scheduled[mask], d.prompt[mask] - d.cached[mask]


def ttft_cdf(data: ReportData) -> go.Figure:
    return _distribution(
        data,
        lambda a, e: _served(a, e)[0],
        "Time to first token (CDF)",
        "TTFT from scheduled time (s)",
        True,
    )


def uncached_cdf(data: ReportData) -> go.Figure:
    return _distribution(
        data,
        lambda a, e: _served(a, e)[1],
        "Uncached prompt tokens per request (CDF)",
        "uncached tokens",
        False,
    )


def miss_decomposition(data: ReportData) -> go.Figure:
    """Stacked redundant prefill per request: placement, dependency and capacity where the run
    knows them, else one 'ideal − reported' bar (live runs)."""
    m = data.metrics
    multi = len(data.runs) > 1
    labels = [
        f"{e} · {s}" if multi else str(e) for e, s in zip(m["engine"], m["sessions"], strict=True)
    ]
    fig = go.Figure()
    split = m[[c for c, _ in MISS_PARTS]].to_numpy(float)
    known = np.isfinite(split).all(axis=1)
    for i, (_, name) in enumerate(MISS_PARTS):
        fig.add_trace(go.Bar(x=labels, y=np.where(known, split[:, i], 0.0), name=name))
    total = m["redundant_prefill_per_request"].to_numpy(float)
    if (~known).any():
        fig.add_trace(
            go.Bar(x=labels, y=np.where(known, 0.0, total), name="ideal − reported (live)")
        )
    fig.update_layout(barmode="stack")
    return _layout(
        fig, "Redundant prefill per request, by cause", "engine", "tokens per request", "miss"
    )


def hit_vs_gap(data: ReportData) -> go.Figure:
    fig = go.Figure()
    for a in data.runs:
        r = a.rollups["tool_gap"]
        for engine, g in r.groupby("engine", sort=False):
            fig.add_trace(
                go.Scatter(
                    x=g["bucket"],
                    y=g["hit_rate"] * 100,
                    mode="lines+markers",
                    name=_label(a, str(engine), data),
                    line={"color": engine_color(str(engine))},
                    customdata=g["requests"],
                    hovertemplate="%{x}: %{y:.1f}% (%{customdata} requests)",
                )
            )
    fig = _layout(
        fig,
        "Hit rate against the idle time before the request",
        "tool gap",
        figure_label(BY_KEY["hit_rate"]),
    )
    fig.update_xaxes(type="category")
    return fig


def economics(data: ReportData) -> go.Figure:
    """Profit per GPU-hour and user cost per 1M input tokens, each bar labelled with its
    ratio against the best other engine (the demo's comparison panel)."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=tuple(
            header(BY_KEY[k]) for k in ("profit_per_gpu_hour", "user_cost_per_m_input")
        ),
    )
    for a in data.runs:
        panel = a.panel.set_index(["engine", "metric"]) if not a.panel.empty else None
        for col, metric in ((1, "profit_per_gpu_hour"), (2, "user_cost_per_m_input")):
            if metric not in a.metrics.columns:
                continue
            xs = [_label(a, str(e), data) for e in a.metrics["engine"]]
            texts = []
            for e in a.metrics["engine"]:
                key = (e, metric)
                if (
                    panel is not None
                    and key in panel.index
                    and math.isfinite(panel.loc[key, "better_by"])
                ):
                    text, _ = ratio_label(float(panel.loc[key, "better_by"]))
                    texts.append(f"{text} vs {panel.loc[key, 'best_other']}")
                else:
                    texts.append("")
            fig.add_trace(
                go.Bar(
                    x=xs,
                    y=a.metrics[metric],
                    text=texts,
                    textposition="outside",
                    showlegend=False,
                    marker_color=[engine_color(str(e)) for e in a.metrics["engine"]],
                ),
                row=1,
                col=col,
            )
    fig.update_layout(
        title=f"Economics (price sheet {_sheet(data)}, GPU {data.gpu or 'per engine'})",
        template="plotly_white",
        width=1000,
        height=480,
        margin={"l": 60, "r": 20, "t": 80, "b": 50},
    )
    return fig


def profit_vs_gpu_rate(data: ReportData) -> go.Figure:
    """Sensitivity: each engine's profit per GPU-hour as the GPU rental rate moves from 0 to
    twice the highest rate used, at its measured token rates and hit rate; the dotted line is
    the rate the report priced at. Where a line crosses zero is that engine's break-even."""
    fig = go.Figure()
    m = data.metrics
    priced = m[m["profit_per_gpu_hour"].notna()] if "profit_per_gpu_hour" in m else m.iloc[:0]
    if priced.empty:
        return _layout(
            fig, "Profit against GPU rate (no priced engine)", "$/GPU-hour", "$/GPU-hour"
        )
    sheet = pricing.get_sheet(str(priced["sheet"].iloc[0]), data.pricing_dir)
    top = float(priced["gpu_rate_per_hour"].max())
    rates = np.linspace(0.0, 2.0 * top, 41)
    multi = len(data.runs) > 1
    for rec in priced.to_dict(orient="records"):
        grid = pricing.profit_vs_gpu_rate(
            sheet,
            rates,
            hit_rate=min(max(float(rec["hit_rate"]), 0.0), 1.0),
            prompt_tokens_per_min_per_gpu=float(rec["prefill_tokens_per_min_per_gpu"]),
            output_tokens_per_min_per_gpu=float(rec["output_tokens_per_min_per_gpu"]),
        )
        name = f"{rec['engine']} · {rec['sessions']} sessions" if multi else str(rec["engine"])
        fig.add_trace(
            go.Scatter(
                x=grid["gpu_rate_per_hour"],
                y=grid["profit_per_gpu_hour"],
                name=name,
                line={"color": engine_color(str(rec["engine"]))},
            )
        )
    for rate in sorted(set(priced["gpu_rate_per_hour"])):
        fig.add_vline(x=rate, line_dash="dot", line_color="grey", annotation_text=f"${rate:.2f}")
    fig.add_hline(y=0, line_color="black", line_width=1)
    return _layout(
        fig,
        f"Profit against GPU rental rate (price sheet {sheet.name})",
        "GPU rate ($/GPU-hour)",
        header(BY_KEY["profit_per_gpu_hour"]),
    )


def _sheet(data: ReportData) -> str:
    if "sheet" in data.metrics.columns and data.metrics["sheet"].notna().any():
        return str(data.metrics["sheet"].dropna().iloc[0])
    return data.sheet or "default"


def all_figures(data: ReportData) -> dict[str, go.Figure]:
    """name -> figure, in the report's order."""
    return {
        "throughput_vs_sessions": versus_sessions(
            data, "output_tokens_per_min_per_gpu", "Output throughput against load"
        ),
        "prefill_vs_sessions": versus_sessions(
            data, "prefill_tokens_per_min_per_gpu", "Prefill throughput against load"
        ),
        "hit_rate_vs_sessions": versus_sessions(data, "hit_rate", "Cache hit rate against load"),
        "ttft_vs_sessions": versus_sessions(data, "ttft_p50", "Median TTFT against load"),
        "ttft_cdf": ttft_cdf(data),
        "uncached_cdf": uncached_cdf(data),
        "miss_decomposition": miss_decomposition(data),
        "hit_rate_vs_idle_gap": hit_vs_gap(data),
        "economics": economics(data),
        "profit_vs_gpu_rate": profit_vs_gpu_rate(data),
    }


__all__ = [
    "all_figures",
    "economics",
    "hit_vs_gap",
    "miss_decomposition",
    "ttft_cdf",
    "uncached_cdf",
    "versus_sessions",
]
