"""Sweeps: many runs over session counts → throughput, hit rate and TTFT against load.

`sweep_rows` gives one row per run and engine (session count and seed from the manifest);
`aggregate_sweep` gives one row per engine and session count: the mean over runs (seeds) and
a standard error — across seeds when there are two or more, else the single run's time-bin
error (`se_source` says which). The working-set-to-capacity ratio is carried through where
a run knows it, and `capacity_crossing` gives the session count where it reaches 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.manifest import manifest_seed
from analysis.runs import Run
from analysis.uncertainty import metrics_with_se, standard_error
from replay.metric_registry import in_view

# What a sweep averages across seeds (the registry's "sweep" view).
SWEEP_METRICS: tuple[str, ...] = tuple(m.key for m in in_view("sweep"))


def sweep_rows(runs: Sequence[Run], bin_s: float = 60.0) -> pd.DataFrame:
    """One row per run and engine, with `run_id`, `seed`, `sessions` and the metrics."""
    frames = []
    for run in runs:
        table = metrics_with_se(run, None, bin_s)
        table["seed"] = manifest_seed(run.manifest)
        frames.append(table)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def aggregate_sweep(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard error per (engine, sessions); see the module docstring."""
    if rows.empty:
        return rows
    out = []
    order = {e: i for i, e in enumerate(pd.unique(rows["engine"]))}
    for (engine, sessions), group in rows.groupby(["engine", "sessions"], sort=False):
        rec: dict[str, object] = {"engine": engine, "sessions": sessions, "runs": len(group)}
        rec["se_source"] = "seeds" if len(group) >= 2 else "time bins"
        for metric in SWEEP_METRICS:
            values = group[metric].to_numpy(dtype=float)
            finite = values[np.isfinite(values)]
            rec[metric] = float(finite.mean()) if len(finite) else math.nan
            if len(group) >= 2:
                rec[f"{metric}_se"] = standard_error(finite)
            elif f"{metric}_se" in group.columns:
                rec[f"{metric}_se"] = float(group[f"{metric}_se"].iloc[0])
        out.append(rec)
    table = pd.DataFrame(out)
    # Engines in the order the runs list them, then by load.
    table["_order"] = table["engine"].map(order)
    return table.sort_values(["_order", "sessions"]).drop(columns="_order").reset_index(drop=True)


def capacity_crossing(agg: pd.DataFrame) -> dict[str, float]:
    """{engine: the session count where the working-set ratio reaches 1}, interpolated
    linearly between the last point below 1 and the first at or above it (the first point
    itself when none is below). Engines whose ratio is unknown or never reaches 1 are left out.
    """
    found: dict[str, float] = {}
    if agg.empty or "working_set_ratio" not in agg.columns:
        return found
    for engine, group in agg.groupby("engine", sort=False):
        g = group[np.isfinite(group["working_set_ratio"].to_numpy(float))].sort_values("sessions")
        x = g["sessions"].to_numpy(float)
        r = g["working_set_ratio"].to_numpy(float)
        over = np.flatnonzero(r >= 1.0)
        if not len(over):
            continue
        i = int(over[0])
        if i == 0 or r[i] == r[i - 1]:
            found[str(engine)] = float(x[i])
        else:
            found[str(engine)] = float(
                x[i - 1] + (1.0 - r[i - 1]) * (x[i] - x[i - 1]) / (r[i] - r[i - 1])
            )
    return found


def first_saturated(rows: pd.DataFrame) -> dict[str, float]:
    """{engine: the smallest session count at which any of its runs was saturated}
    (`analysis.saturation`); engines never saturated are left out."""
    if rows.empty or "saturated" not in rows.columns:
        return {}
    sat = rows[rows["saturated"].map(lambda v: v is True)]
    return {str(e): float(g["sessions"].min()) for e, g in sat.groupby("engine", sort=False)}


__all__ = [
    "SWEEP_METRICS",
    "aggregate_sweep",
    "capacity_crossing",
    "first_saturated",
    "sweep_rows",
]
