"""Cached loading of run directories for the pages.

Each load is keyed on the run directory's path and a stamp of its files' sizes and
modification times, so moving a slider reuses the parsed run, while a run still being written
(the Live page) is re-read as soon as a file changes. Errors are not cached: a fixed file is
picked up on the next rerun.

The parsed `Run` is held with `st.cache_resource` (one shared object, no copy): a 100,000-row
run is ~25 MB pickled, and `st.cache_data` would pickle it on store and unpickle it on every
rerun, which the play control does twice a second. Pages only read it (filters make new
frames; pandas' copy-on-write keeps the shared one intact). Derived tables (metrics) are
small and use `st.cache_data`, keyed on the same path and stamp.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import streamlit as st

from analysis.metrics import resolve_window, window_metrics
from analysis.runs import Run, RunDirError, load_run
from analysis.sweeps import sweep_rows
from analysis.verdicts import with_verdicts
from dashboards.combine import combine
from dashboards.paths import PathRefused, open_inside
from dashboards.timeline import metrics_at

# Files whose change means the run must be re-read (the run-directory contract's names).
RUN_FILES = (
    "manifest.json",
    "requests.parquet",
    "requests.jsonl",
    "summary.json",
    "server_metrics.parquet",
)

Stamp = tuple[tuple[str, int, int], ...]
# A run's identity for the caches: each member directory and its file stamp.
RunKey = tuple[tuple[str, Stamp], ...]
# Errors that mean "this run's files break the contract" (analysis names most as RunDirError).
_BAD_FILES = (RunDirError, OSError, ValueError, KeyError, TypeError, pa.ArrowException)


class RunUnavailable(Exception):
    """A run the page cannot show; the message is what the page prints, never a traceback."""


def run_stamp(run_dir: Path) -> Stamp:
    """(name, size, mtime_ns) of each run file present: the cache key's freshness part."""
    out = []
    for name in RUN_FILES:
        try:
            info = os.stat(run_dir / name)
        except OSError:
            continue
        out.append((name, info.st_size, info.st_mtime_ns))
    return tuple(out)


@st.cache_resource(show_spinner="Loading run…", max_entries=8, ttl=3600)
def _load_cached(path: str, stamp: Stamp) -> Run:
    del stamp  # only part of the cache key
    return load_run(path)


def load(root: Path, name: str) -> Run:
    """The run `name` (relative to `root`); RunUnavailable with a readable message when the
    path is outside `root` or the directory is missing, incomplete or malformed."""
    try:
        path = open_inside(root, name)
    except PathRefused as e:
        raise RunUnavailable(str(e)) from e
    try:
        return _load_cached(str(path), run_stamp(path))
    except RunDirError as e:
        raise RunUnavailable(f"Cannot open this run: {e}") from e
    except _BAD_FILES as e:
        # A file that parses but breaks the contract in a way analysis does not name.
        raise RunUnavailable(
            f"Cannot open this run: {path} has a malformed file ({type(e).__name__}: {e}). "
            "Check it against the run-directory contract in docs/run-directory.md."
        ) from e


def load_group(root: Path, names: list[str]) -> Run:
    """Several runs of the same workload as one (see `dashboards.combine`); each member is
    loaded (and cached) on its own, so the group costs one concatenation."""
    runs = [load(root, name) for name in names]
    return _combined_cached(run_key_of(runs), runs)


@st.cache_resource(show_spinner=False, max_entries=8, ttl=3600)
def _combined_cached(key: RunKey, _runs: list[Run]) -> Run:
    return combine(_runs)


def run_key_of(runs: list[Run]) -> RunKey:
    return tuple(
        (p, run_stamp(Path(p)))
        for r in runs
        for p in (r.manifest.dashboard_members or [str(r.path)])
    )


def run_key(run: Run) -> RunKey:
    """The cache key of a loaded run (or a combined one: all its members)."""
    return run_key_of([run])


def _failed(run: Run, e: Exception) -> RunUnavailable:
    return RunUnavailable(f"Cannot compute metrics for {run.run_id}: {type(e).__name__}: {e}")


# The leading underscore keeps Streamlit from hashing the run: its key identifies it.
@st.cache_data(show_spinner=False, max_entries=512)
def _metrics_at_cached(key: RunKey, t: float, start: float, stop: float, _run: Run) -> pd.DataFrame:
    return metrics_at(_run, t, start, stop)


def run_metrics_at(run: Run, t: float, start: float, stop: float = math.inf) -> pd.DataFrame:
    """`dashboards.timeline.metrics_at`, cached per run file stamp and time (the slider moves
    in steps, so a replayed stretch is computed once)."""
    try:
        return _metrics_at_cached(run_key(run), float(t), float(start), float(stop), run)
    except _BAD_FILES as e:
        raise _failed(run, e) from e


@st.cache_data(show_spinner=False, max_entries=256)
def _sweep_rows_cached(key: RunKey, _run: Run) -> pd.DataFrame:
    return sweep_rows([_run])


def run_sweep_rows(run: Run) -> pd.DataFrame:
    """analysis' sweep rows of one run (metrics with time-bin standard errors), cached."""
    try:
        return _sweep_rows_cached(run_key(run), run)
    except _BAD_FILES as e:
        raise _failed(run, e) from e


@st.cache_data(show_spinner=False, max_entries=64)
def _metrics_cached(key: RunKey, window: tuple[float, float] | None, _run: Run) -> pd.DataFrame:
    win = resolve_window(_run, window)
    return with_verdicts(_run, window_metrics(_run, win), win)


def run_metrics(run: Run, window: tuple[float, float] | None = None) -> pd.DataFrame:
    """analysis' window metrics of `run` (its default window when None) with the verdicts
    (`analysis.verdicts`: saturation, tasks, SLOs, goodput, drift), cached per file stamp."""
    try:
        return _metrics_cached(run_key(run), window, run)
    except _BAD_FILES as e:
        raise _failed(run, e) from e
