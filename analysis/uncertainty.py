"""Uncertainty: standard errors from time bins, significance at two standard errors, and
paired per-request deltas between engines that replayed the same sessions.

Time-bin standard errors split the window into equal bins (about `bin_s` long), compute each
metric per bin, and take the standard deviation of the bin values over √bins. Neighbouring
bins are correlated (a slow request spans bins), so this understates the error somewhat;
across-seed errors (`analysis.sweeps`) do not have that bias and are preferred when a sweep
has two or more seeds.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.manifest import Window, manifest_token_scale
from analysis.metrics import engine_data, engine_metrics, resolve_window, window_metrics
from analysis.runs import Run
from analysis.verdicts import with_verdicts
from replay.metric_registry import METRICS

SIGNIFICANCE_SE = 2.0  # the paper: a difference counts when it exceeds two standard errors

# Metrics that get a time-bin standard error (the registry's `se`).
SE_METRICS: tuple[str, ...] = tuple(m.key for m in METRICS if m.se)


def bins(window: Window, bin_s: float) -> list[Window]:
    """Equal bins covering the window, each about `bin_s` long (at least one)."""
    n = max(1, int(window.duration_s // bin_s))
    edges = np.linspace(window.start_s, window.end_s, n + 1)
    return [Window(float(a), float(b), "bin") for a, b in itertools.pairwise(edges)]


def binned_metrics(
    run: Run, window: Window | tuple[float, float] | None = None, bin_s: float = 60.0
) -> pd.DataFrame:
    """One row per engine and time bin: `engine`, `bin_start_s`, `bin_end_s`, and metrics."""
    win = resolve_window(run, window)
    rows: list[dict[str, Any]] = []
    for engine in run.engines:
        data = engine_data(run, engine)
        gpus = run.engine_info(engine).gpus
        scale = manifest_token_scale(run.manifest)
        for b in bins(win, bin_s):
            row: dict[str, Any] = {"engine": engine, "bin_start_s": b.start_s, "bin_end_s": b.end_s}
            row.update(engine_metrics(data, b, gpus, scale))
            rows.append(row)
    return pd.DataFrame(rows)


def standard_error(values: np.ndarray | pd.Series) -> float:
    """Standard deviation (ddof=1) over √n of the finite values; NaN with fewer than two."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    if len(arr) < 2:
        return math.nan
    return float(arr.std(ddof=1) / math.sqrt(len(arr)))


def binned_standard_errors(
    run: Run, window: Window | tuple[float, float] | None = None, bin_s: float = 60.0
) -> dict[str, dict[str, float]]:
    """{engine: {metric: standard error}} from time bins, for each metric in SE_METRICS."""
    table = binned_metrics(run, window, bin_s)
    out: dict[str, dict[str, float]] = {}
    if table.empty:
        return out
    for engine, rows in table.groupby("engine", sort=False):
        out[str(engine)] = {m: standard_error(rows[m].to_numpy(dtype=float)) for m in SE_METRICS}
    return out


def metrics_with_se(
    run: Run, window: Window | tuple[float, float] | None = None, bin_s: float = 60.0
) -> pd.DataFrame:
    """`window_metrics` with the verdicts (`analysis.verdicts`), plus a `<metric>_se` column
    for each metric in SE_METRICS."""
    win = resolve_window(run, window)
    table = with_verdicts(run, window_metrics(run, win), win)
    ses = binned_standard_errors(run, win, bin_s)
    for metric in SE_METRICS:
        table[f"{metric}_se"] = [
            math.nan
            if metric in (unknown or {})  # a metric the run cannot know has no error either
            else ses.get(e, {}).get(metric, math.nan)
            for e, unknown in zip(table["engine"], table["unknown"], strict=True)
        ]
    return table


def compare(table: pd.DataFrame, metric: str, reference: str | None = None) -> pd.DataFrame:
    """Each engine against `reference` (default: the best *other* engine for that metric,
    highest for throughput and hit rates, lowest for latencies and token counts).

    Needs `engine`, `metric` and `<metric>_se` columns. Returns engine, reference, value,
    reference_value, diff, ratio, se_diff and `significant` (|diff| > 2 · se_diff; False when
    the errors are unknown).
    """
    if metric not in table.columns:
        raise KeyError(f"no column {metric!r} to compare; have {', '.join(table.columns)}")
    lower_better = metric.startswith(("ttft", "e2e", "uncached", "redundant", "error", "overflow"))
    lower_better = lower_better or metric.endswith("_miss_per_request")
    se_col = f"{metric}_se"
    rows = []
    values = dict(zip(table["engine"], table[metric], strict=True))
    ses = dict(zip(table["engine"], table[se_col], strict=True)) if se_col in table else {}
    for engine, value in values.items():
        others = {k: v for k, v in values.items() if k != engine and np.isfinite(v)}
        if reference is not None:
            ref = reference if reference != engine else None
        elif others:
            ref = (min if lower_better else max)(others, key=lambda k: others[k])
        else:
            ref = None
        if ref is None:
            continue
        ref_value = values[ref]
        diff = value - ref_value
        se_diff = math.hypot(ses.get(engine, math.nan), ses.get(ref, math.nan))
        rows.append(
            {
                "engine": engine,
                "reference": ref,
                "metric": metric,
                "value": value,
                "reference_value": ref_value,
                "diff": diff,
                "ratio": value / ref_value if ref_value else math.nan,
                "se_diff": se_diff,
                "significant": bool(np.isfinite(se_diff) and abs(diff) > SIGNIFICANCE_SE * se_diff),
            }
        )
    return pd.DataFrame(rows)


PAIR_KEYS = ("session", "trajectory", "agent", "turn")


def _paired_frame(run: Run, engine: str, window: Window) -> pd.DataFrame:
    df = run.requests[run.requests["engine"] == engine]
    df = df[~df["priming"].fillna(False).astype(bool)]
    sched = pd.to_numeric(df["scheduled_s"], errors="coerce")
    df = df[(sched >= window.start_s) & (sched < window.end_s) & (df["status"] == "ok")]
    # The final attempt of a turn is its record; a repeated assignment keeps its first pass.
    df = df.sort_values("attempt", kind="stable").drop_duplicates(list(PAIR_KEYS), keep="last")
    first = pd.to_numeric(df["first_token_s"], errors="coerce")
    done = pd.to_numeric(df["done_s"], errors="coerce")
    prompt = pd.to_numeric(df["prompt_tokens"], errors="coerce")
    cached = pd.to_numeric(df["cached_tokens"], errors="coerce")
    return pd.DataFrame(
        {
            **{k: df[k].to_numpy() for k in PAIR_KEYS},
            "ttft": (first - sched[df.index]).to_numpy(dtype=float),
            "e2e": (done - sched[df.index]).to_numpy(dtype=float),
            "cached_tokens": cached.to_numpy(dtype=float),
            "uncached_tokens": (prompt - cached).to_numpy(dtype=float),
        }
    )


def paired_deltas(
    run: Run,
    engine: str,
    reference: str,
    window: Window | tuple[float, float] | None = None,
    reference_run: Run | None = None,
) -> pd.DataFrame:
    """Per-request deltas `engine − reference` over requests both engines served (matched on
    session, trajectory, agent and turn; measured, `ok`, scheduled in the window).

    `reference_run` pairs across two run directories that replayed the same seeded workload
    (the simulator writes one run per policy); by default both engines are in `run`.
    One row per quantity (ttft, e2e, cached_tokens, uncached_tokens): pairs, mean of each,
    mean delta, its standard error and `significant` at two standard errors.
    """
    win = resolve_window(run, window)
    a = _paired_frame(run, engine, win)
    b = _paired_frame(reference_run if reference_run is not None else run, reference, win)
    both = a.merge(b, on=list(PAIR_KEYS), suffixes=("_a", "_b"))
    rows = []
    for q in ("ttft", "e2e", "cached_tokens", "uncached_tokens"):
        delta = (both[f"{q}_a"] - both[f"{q}_b"]).to_numpy(dtype=float)
        finite = delta[np.isfinite(delta)]
        se = standard_error(finite)
        mean = float(finite.mean()) if len(finite) else math.nan
        rows.append(
            {
                "engine": engine,
                "reference": reference,
                "quantity": q,
                "pairs": len(finite),
                "mean": float(np.nanmean(both[f"{q}_a"])) if len(both) else math.nan,
                "reference_mean": float(np.nanmean(both[f"{q}_b"])) if len(both) else math.nan,
                "mean_delta": mean,
                "se": se,
                "significant": bool(np.isfinite(se) and abs(mean) > SIGNIFICANCE_SE * se),
            }
        )
    return pd.DataFrame(rows)


__all__ = [
    "SE_METRICS",
    "SIGNIFICANCE_SE",
    "binned_metrics",
    "binned_standard_errors",
    "compare",
    "metrics_with_se",
    "paired_deltas",
    "standard_error",
]
