"""What a report holds: every analysis of the runs (`analyze` → `ReportData`). The tables
(`catalog.py`) and figures (`figures.py`) are built from it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.comparison import comparison_panel
from analysis.economics import engine_economics
from analysis.manifest import Window, manifest_seed
from analysis.metrics import resolve_window
from analysis.registry import keys
from analysis.rollups import ROLLUPS
from analysis.runs import Run, distinct_runs
from analysis.summary import error_note, run_warnings
from analysis.sweeps import (
    aggregate_sweep,
    capacity_crossing,
    label_configs,
    repeated_seeds,
    tag_runs,
)
from analysis.uncertainty import compare, metrics_with_se, paired_deltas

# The metrics the report tests for significant differences (the registry's view).
COMPARED = keys("report.significance")


@dataclass
class RunAnalysis:
    run: Run
    window: Window
    metrics: pd.DataFrame  # window metrics + standard errors + pricing, one row per engine
    panel: pd.DataFrame
    significance: pd.DataFrame
    paired: pd.DataFrame
    rollups: dict[str, pd.DataFrame]
    # What sets its configuration apart from the other runs' (`analysis.sweeps.label_configs`).
    config_label: str = ""


@dataclass
class ReportData:
    runs: list[RunAnalysis]
    metrics: pd.DataFrame  # every run's rows
    sweep: pd.DataFrame  # aggregated by engine and session count
    crossing: dict[str, float]
    sheet: str | None
    gpu: str | None
    notes: list[str] = field(default_factory=list)
    paired_across: pd.DataFrame = field(default_factory=pd.DataFrame)
    pricing_dir: Path | None = None
    warnings: list[str] = field(default_factory=list)  # saturated, drifted, warm-started


def analyze_run(
    run: Run,
    window: Window | tuple[float, float] | str | None = None,
    sheet: str | None = None,
    gpu: str | None = None,
    pricing_dir: Path | None = None,
    bin_s: float = 60.0,
    notes: list[str] | None = None,
) -> RunAnalysis:
    notes = notes if notes is not None else []
    win = resolve_window(run, window)
    metrics = metrics_with_se(run, win, bin_s)
    for name, rate in zip(metrics["engine"], metrics["error_rate"], strict=True):
        if (flag := error_note(str(name), rate)) is not None:
            notes.append(flag)
    econ = engine_economics(metrics, sheet, gpu, pricing_dir, notes)
    metrics = metrics.merge(econ, on="engine", how="left")
    significance = (
        pd.concat([compare(metrics, m) for m in COMPARED if len(metrics) > 1], ignore_index=True)
        if len(metrics) > 1
        else pd.DataFrame()
    )
    engines = list(metrics["engine"])
    paired = [paired_deltas(run, a, b, win) for a, b in itertools.combinations(engines, 2)]
    return RunAnalysis(
        run=run,
        window=win,
        metrics=tag_runs(metrics, run),
        panel=comparison_panel(metrics),
        significance=significance,
        paired=pd.concat(paired, ignore_index=True) if paired else pd.DataFrame(),
        rollups={name: fn(run, win) for name, fn in ROLLUPS.items()},
    )


def analyze(
    runs: list[Run],
    window: Window | tuple[float, float] | str | None = None,
    sheet: str | None = None,
    gpu: str | None = None,
    pricing_dir: Path | None = None,
    bin_s: float = 60.0,
) -> ReportData:
    """Analyse each run (metrics, errors, pricing, comparisons, roll-ups) and the sweep. A
    run directory given twice is analysed once; the sweep pools seeds of one configuration
    only (`analysis.sweeps`). Both are said in the notes."""
    runs, notes = distinct_runs(runs)
    analyses = []
    for run in runs:
        notes += [f"{run.run_id}: {n}" for n in run.notes]
        run_notes: list[str] = []
        analyses.append(analyze_run(run, window, sheet, gpu, pricing_dir, bin_s, run_notes))
        notes += [f"{run.run_id}: {n}" for n in dict.fromkeys(run_notes)]
    cross = paired_across_runs(analyses)
    metrics = label_configs(pd.concat([a.metrics for a in analyses], ignore_index=True))
    notes += repeated_seeds(metrics)
    labels = dict(zip(metrics["run_dir"], metrics["config_label"], strict=True))
    for a in analyses:
        a.config_label = labels.get(str(a.run.path.resolve()), "")
    sweep = aggregate_sweep(metrics)
    warnings = []
    # What the runs cannot know, once per reason (a sweep repeats it for every run).
    unknown: dict[str, dict[str, None]] = {}
    runs_of: dict[str, dict[str, None]] = {}
    for a in analyses:
        prefix = f"{a.run.run_id}: " if len(analyses) > 1 else ""
        for rec in a.metrics.to_dict(orient="records"):
            warnings += [prefix + w for w in run_warnings(str(rec["engine"]), rec)]
            for key, why in (rec.get("unknown") or {}).items():
                keys = unknown.setdefault(str(why), {})
                keys.setdefault(str(key), None)
                runs_of.setdefault(str(why), {}).setdefault(a.run.run_id, None)
    for why, keys in unknown.items():
        if "drift" in keys and len(keys) == 1:
            continue  # simulated runs replay the trace's lengths: nothing to say
        names = list(runs_of[why])
        which = names[0] if len(names) == 1 else f"{len(names)} runs"
        notes.append(f"{which}: n/a ({', '.join(k for k in keys if k != 'drift')}): {why}")
    data = ReportData(analyses, metrics, sweep, capacity_crossing(sweep), sheet, gpu, notes, cross)
    data.warnings = warnings
    return data


def paired_across_runs(analyses: list[RunAnalysis]) -> pd.DataFrame:
    """Paired deltas between engines of *different* runs that replayed the same workload:
    the same session count, seed and window (the simulator's one-run-per-policy layout)."""
    groups: dict[tuple[object, ...], list[tuple[RunAnalysis, str]]] = {}
    for a in analyses:
        seed = manifest_seed(a.run.manifest)
        if seed is None:
            continue  # without a recorded seed the workloads cannot be known to match
        sessions = a.metrics["sessions"].iloc[0] if len(a.metrics) else None
        key = (sessions, seed, a.window.start_s, a.window.end_s)
        groups.setdefault(key, []).extend((a, str(e)) for e in a.metrics["engine"])
    frames = []
    for members in groups.values():
        for (a, ea), (b, eb) in itertools.combinations(members, 2):
            if a is b or ea == eb:
                continue
            d = paired_deltas(a.run, ea, eb, a.window, reference_run=b.run)
            frames.append(d.assign(run_id=a.run.run_id, reference_run=b.run.run_id))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = ["ReportData", "RunAnalysis", "analyze", "analyze_run", "paired_across_runs"]
