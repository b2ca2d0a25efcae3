"""Sweeps: many runs over session counts → throughput, hit rate and TTFT against load.

`sweep_rows` gives one row per run and engine (session count, seed and configuration from
the manifest: `tag_runs`); `aggregate_sweep` gives one row per engine, session count and
configuration: the mean over its runs and a standard error — across the runs when there are
two or more, else the single run's time-bin error. `se_source` says which, and over what the
runs spread: distinct seeds, or repeats of one seed (live runs measured again: run-to-run
noise), or both (`spread` in words: "3 seeds × 2 repeats"; `analysis.measurements`). Runs
are pooled only when their manifests differ in the seed alone (`analysis.configs`): runs of
another router, host memory, timing, ... are rows of their own, labelled by what differs
(`config_label`, and `series`: the engine and that label, one line of a figure). A run that
is the same measurement as another (a copy of its directory, or a simulated seed run twice)
is counted once (`repeated_seeds` says which). The working-set-to-capacity ratio is carried
through where a run knows it, and `capacity_crossing` gives the session count where it
reaches 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.configs import config_key, config_labels
from analysis.manifest import manifest_seed
from analysis.measurements import measurement_id, one_per_measurement, repeated_seeds, spread
from analysis.registry import executor_of
from analysis.runs import Run
from analysis.uncertainty import metrics_with_se, standard_error
from replay.metric_registry import in_view

# What a sweep averages across runs (the registry's "sweep" view).
SWEEP_METRICS: tuple[str, ...] = tuple(m.key for m in in_view("sweep"))


def tag_runs(table: pd.DataFrame, run: Run) -> pd.DataFrame:
    """`table` (rows of `run`) with the run's `seed`, `config` (`analysis.configs.config_key`),
    `run_dir` (its resolved path), `executor` and `measurement`
    (`analysis.measurements.measurement_id`) as columns: what `aggregate_sweep` groups by."""
    return table.assign(
        seed=manifest_seed(run.manifest),
        config=config_key(run.manifest),
        run_dir=str(run.path.resolve()),
        executor=executor_of(run.manifest),
        measurement=measurement_id(run.manifest),
    )


def sweep_rows(runs: Sequence[Run], bin_s: float = 60.0) -> pd.DataFrame:
    """One row per run and engine, with `run_id`, `seed`, `sessions`, `config`, `run_dir`
    and the metrics."""
    frames = [tag_runs(metrics_with_se(run, None, bin_s), run) for run in runs]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


_CELL = ["engine", "sessions"]


def label_configs(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with `config_label` (what sets a run's configuration apart from the others at
    the same engine and session count, `analysis.configs.config_labels`; "" when it is alone)
    and `series` (the engine, and its label where it has one). Rows without a `config`
    column (built by hand) are one configuration."""
    if rows.empty:
        return rows.assign(config_label=pd.Series(dtype=object), series=pd.Series(dtype=object))
    if "config" not in rows.columns:
        return rows.assign(config_label="", series=rows["engine"].astype(str))
    cells = [list(g["config"]) for _, g in rows.groupby(_CELL, sort=False)]
    labels = rows["config"].map(config_labels(cells))
    series = [
        f"{e} · {label}" if label else str(e)
        for e, label in zip(rows["engine"], labels, strict=True)
    ]
    return rows.assign(config_label=labels, series=series)


def aggregate_sweep(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard error per (engine, sessions, configuration); see the module
    docstring."""
    if rows.empty:
        return rows
    out = []
    rows = label_configs(rows) if "series" not in rows.columns else rows
    order = {e: i for i, e in enumerate(pd.unique(rows["engine"]))}
    by = [*_CELL, "config"] if "config" in rows.columns else _CELL
    for _, group in rows.groupby(by, sort=False):
        group = one_per_measurement(group)
        first = group.iloc[0]
        source, words = spread(group)
        rec: dict[str, object] = {
            "engine": first["engine"],
            "sessions": first["sessions"],
            "runs": len(group),
            "config_label": first["config_label"],
            "series": first["series"],
        }
        rec["se_source"], rec["spread"] = source, words
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
    # Engines in the order the runs list them, then each configuration's line, by load.
    table["_order"] = table["engine"].map(order)
    lines = {s: i for i, s in enumerate(pd.unique(table["series"]))}
    table["_line"] = table["series"].map(lines)
    return (
        table.sort_values(["_order", "_line", "sessions"], kind="stable")
        .drop(columns=["_order", "_line"])
        .reset_index(drop=True)
    )


def _lines(table: pd.DataFrame) -> str:
    """The column naming a figure's line: `series` (engine and configuration) where the
    table has it, else the engine."""
    return "series" if "series" in table.columns else "engine"


def capacity_crossing(agg: pd.DataFrame) -> dict[str, float]:
    """{series (the engine, with its configuration's label where there are several): the
    session count where the working-set ratio reaches 1}, interpolated linearly between the
    last point below 1 and the first at or above it (the first point itself when none is
    below). Lines whose ratio is unknown or never reaches 1 are left out.
    """
    found: dict[str, float] = {}
    if agg.empty or "working_set_ratio" not in agg.columns:
        return found
    for engine, group in agg.groupby(_lines(agg), sort=False):
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
    """{series (as `capacity_crossing` names it): the smallest session count at which any
    of its runs was saturated} (`analysis.saturation`); lines never saturated are left out."""
    if rows.empty or "saturated" not in rows.columns:
        return {}
    rows = label_configs(rows) if "series" not in rows.columns else rows
    sat = rows[rows["saturated"].map(lambda v: v is True)]
    return {str(e): float(g["sessions"].min()) for e, g in sat.groupby("series", sort=False)}


__all__ = [
    "SWEEP_METRICS",
    "aggregate_sweep",
    "capacity_crossing",
    "first_saturated",
    "label_configs",
    "repeated_seeds",
    "sweep_rows",
    "tag_runs",
]
