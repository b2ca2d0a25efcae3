"""Did the engine keep up? A saturation verdict per engine and window, with its evidence.

A benchmark that drives an engine past what it can serve measures its queue, not its speed:
TTFT then says how long requests waited, and every throughput is the engine's ceiling, not
the workload's demand. GuideLLM stops a run it detects as over-saturated; here a run keeps
going (its records are still worth having) but every result carries the verdict.

Evidence, in order of preference:

- **the engine's own queue** (``vllm:num_requests_waiting``, ``sglang:num_queue_reqs`` in
  ``server_metrics.parquet``): requests admitted to the engine but not yet running. The
  engine is saturated when requests wait in at least half of the window's scrapes
  (``QUEUE_BUSY_SHARE``) — in a closed loop of N sessions the queue cannot grow past N, so a
  queue that *stays* non-empty is what "cannot keep up" looks like — or when the queue
  grows through the window (slope above two standard errors and at least one request
  waiting at the end).
- **the records**, where the engine publishes no queue: TTFT from the scheduled time
  trending up through the window (OLS slope above two standard errors, and the growth over
  the window at least the median TTFT: it doubled), or the gap between scheduled and sent
  growing likewise (the client fell behind). A steady queue in a closed loop leaves no trend
  in the records, so without the engine's queue gauge a saturated engine can pass unflagged;
  the evidence says which source decided.

A trace-timing simulation has no engine clock (its latencies are the trace's): no verdict.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.counters import canonical_name
from analysis.manifest import Window

QUEUE_METRICS = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")
RUNNING_METRICS = ("vllm:num_requests_running", "sglang:num_running_reqs")
QUEUE_BUSY_SHARE = 0.5  # requests waiting in at least this share of scrapes: saturated
TREND_SE = 2.0  # a slope counts when it exceeds two standard errors (as elsewhere)
MIN_POINTS = 8  # fewer requests in the window than this: no trend is fitted


def ols_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x and its standard error (NaN with < 3 points)."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = len(x)
    if n < 3:
        return math.nan, math.nan
    xm = x - x.mean()
    sxx = float((xm**2).sum())
    if sxx <= 0:
        return math.nan, math.nan
    slope = float((xm * (y - y.mean())).sum() / sxx)
    resid = y - y.mean() - slope * xm
    se = math.sqrt(float((resid**2).sum()) / (n - 2) / sxx)
    return slope, se


def gauge_series(
    server_metrics: pd.DataFrame | None, engine: str, names: tuple[str, ...], window: Window
) -> pd.Series | None:
    """The engine's gauge (summed over label sets) at each scrape inside the window."""
    if server_metrics is None or server_metrics.empty:
        return None
    name_col = "metric" if "metric" in server_metrics.columns else "name"
    if not {"engine", "t_s", "value", name_col} <= set(server_metrics.columns):
        return None
    rows = server_metrics[server_metrics["engine"] == engine]
    if rows.empty:
        return None
    canon = rows[name_col].astype(str).map(canonical_name)
    rows = rows[canon.isin(names)]
    t = pd.to_numeric(rows["t_s"], errors="coerce")
    rows = rows[(t >= window.start_s) & (t <= window.end_s)]
    if rows.empty:
        return None
    return rows.groupby("t_s")["value"].sum().sort_index()


def _trend(x: np.ndarray, y: np.ndarray, window: Window) -> dict[str, float]:
    slope, se = ols_slope(x, y)
    return {
        "slope": slope,
        "slope_se": se,
        "growth_s": slope * window.duration_s if math.isfinite(slope) else math.nan,
    }


def _significant(slope: float, se: float) -> bool:
    return bool(math.isfinite(slope) and math.isfinite(se) and slope > TREND_SE * se)


def saturation(
    scheduled: np.ndarray,
    sent: np.ndarray,
    first: np.ndarray,
    window: Window,
    queue: pd.Series | None = None,
    running: pd.Series | None = None,
    clock: str = "engine",
) -> tuple[bool | None, dict[str, Any]]:
    """The verdict (None: the run cannot know) and its evidence, JSON-able.

    `scheduled`, `sent`, `first` are the measured requests' times (seconds); `queue` and
    `running` the engine's gauges in the window (index: time). `clock` is "trace" for a
    trace-timing simulation (no verdict)."""
    if clock == "trace":
        return None, {
            "verdict": "n/a",
            "reason": "a trace-timing simulation has no engine clock: latencies are the "
            "trace's own, so whether an engine kept up is unknown",
        }
    inside = (scheduled >= window.start_s) & (scheduled < window.end_s) & np.isfinite(first)
    x = scheduled[inside]
    ttft = first[inside] - x
    lag = sent[inside] - x
    ev: dict[str, Any] = {"requests": int(inside.sum())}
    med = float(np.nanmedian(ttft)) if len(ttft) else math.nan
    ev["ttft_median_s"] = med
    ev["ttft_trend"] = _trend(x, ttft, window) if len(x) >= MIN_POINTS else None
    ev["send_lag_trend"] = _trend(x, lag, window) if len(x) >= MIN_POINTS else None
    reasons: list[str] = []
    source = "records"
    if queue is not None and len(queue) >= 3:
        source = "engine queue"
        q = queue.to_numpy(dtype=float)
        tq = queue.index.to_numpy(dtype=float)
        slope, se = ols_slope(tq, q)
        ev["queue"] = {
            "samples": len(q),
            "mean": float(q.mean()),
            "max": float(q.max()),
            "last": float(q[-1]),
            "busy_share": float((q >= 1).mean()),
            "slope_per_min": slope * 60 if math.isfinite(slope) else math.nan,
            "slope_se_per_min": se * 60 if math.isfinite(se) else math.nan,
        }
        if running is not None and len(running):
            ev["queue"]["running_mean"] = float(running.to_numpy(dtype=float).mean())
        if ev["queue"]["busy_share"] >= QUEUE_BUSY_SHARE:
            reasons.append(
                f"requests waited in the engine's queue in {ev['queue']['busy_share']:.0%} of "
                f"the window's scrapes (mean {ev['queue']['mean']:.1f} waiting)"
            )
        if _significant(slope, se) and q[-1] >= 1:
            reasons.append(
                f"the engine's queue grew {slope * 60:+.2f} ± {se * 60:.2f} requests/min "
                f"to {q[-1]:.0f} waiting"
            )
    else:
        ev["queue"] = None
    for key, what in (("ttft_trend", "TTFT"), ("send_lag_trend", "the send lag")):
        tr = ev[key]
        if tr is None:
            continue
        floor = max(med if key == "ttft_trend" and math.isfinite(med) else 0.0, 1.0)
        if _significant(tr["slope"], tr["slope_se"]) and tr["growth_s"] >= floor:
            reasons.append(
                f"{what} grew {tr['growth_s']:.1f} s over the window "
                f"(slope {tr['slope']:.3g} ± {tr['slope_se']:.2g} s/s)"
            )
    ev["source"] = source
    ev["reasons"] = reasons
    saturated = bool(reasons)
    if not saturated and ev["queue"] is None and ev["ttft_trend"] is None:
        ev["verdict"] = "n/a"
        ev["reason"] = f"only {ev['requests']} requests in the window and no queue gauge"
        return None, ev
    ev["verdict"] = "saturated" if saturated else "kept up"
    return saturated, ev


def verdict_text(saturated: Any, evidence: Any) -> str:
    """One line for tables and warnings."""
    if saturated is None or (isinstance(saturated, float) and math.isnan(saturated)):
        reason = evidence.get("reason") if isinstance(evidence, dict) else None
        return "n/a" + (f" ({reason})" if reason else "")
    if not saturated:
        return "kept up"
    reasons = evidence.get("reasons") if isinstance(evidence, dict) else None
    return "SATURATED" + (f": {'; '.join(reasons)}" if reasons else "")


__all__ = [
    "QUEUE_BUSY_SHARE",
    "QUEUE_METRICS",
    "RUNNING_METRICS",
    "gauge_series",
    "ols_slope",
    "saturation",
    "verdict_text",
]
