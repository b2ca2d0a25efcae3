"""Loading run directories: the manifest, request records, summary and server metrics.

`load_run` reads one run directory into a `Run`; `find_runs` lists the run directories under
a root folder and refuses any that lead outside it. Every problem is a `RunDirError` whose
message names the file and says what is wrong.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.manifest import (
    EngineInfo,
    Window,
    manifest_engines,
    manifest_notes,
    manifest_window,
)
from replay.rundir import (
    JOURNAL,
    MANIFEST,
    REQUESTS,
    SERVER_METRICS,
    SUMMARY,
    RunDirError,
    read_manifest,
    read_requests,
    read_summary,
    run_status,
    schema_note,
    torn_tail_bytes,
)
from replay.rundir_models import (
    MANIFEST_SCHEMA_VERSION,
    SUMMARY_SCHEMA_VERSION,
    Manifest,
    RunSummary,
)

# Columns that must hold numbers (or nulls); a string there means a broken writer.
_NUMERIC = (
    "session",
    "turn",
    "scheduled_s",
    "sent_s",
    "first_token_s",
    "done_s",
    "prompt_tokens",
    "cached_tokens",
    "ideal_cached_tokens",
    "output_tokens",
    "resume_pos",
    "placement_miss",
    "dependency_miss",
    "capacity_miss",
    "tool_gap_s",
)


@dataclass
class Run:
    """One run directory, loaded."""

    path: Path
    manifest: Manifest
    requests: pd.DataFrame
    summary: RunSummary | None = None
    server_metrics: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id or self.path.name

    @property
    def engines(self) -> list[str]:
        """Engine names: the manifest's order first, then any others found in the records."""
        names = list(manifest_engines(self.manifest))
        for name in pd.unique(self.requests["engine"].dropna()):
            if str(name) not in names:
                names.append(str(name))
        return names

    def engine_info(self, name: str) -> EngineInfo:
        info = manifest_engines(self.manifest).get(name)
        return info if info is not None else EngineInfo(name=name, gpus_assumed=True)

    def default_window(self) -> Window:
        """The manifest's window, else the whole run (from 0 to the last event)."""
        try:
            win = manifest_window(self.manifest)
        except ValueError as e:
            raise RunDirError(f"{self.path / MANIFEST}: {e}") from e
        if win is not None:
            return win
        ends = pd.concat(
            [self.requests["done_s"], self.requests["first_token_s"], self.requests["scheduled_s"]]
        )
        last = float(pd.to_numeric(ends, errors="coerce").max())
        if not last > 0:
            last = 1.0
        # Just past the last event, so a request finishing at the very end is inside.
        return Window(0.0, float(last) * (1 + 1e-9) + 1e-9, "whole run (manifest has no window)")


def covered_s(run: Run) -> float | None:
    """The seconds of the run that its data covers: a finished run (completed, degraded)
    its whole duration (or, where the manifest lacks it, at least its own window), any
    other (interrupted, failed, still running) up to its last recorded event; None when
    none of these is known."""
    cfg = run.manifest.config
    nominal = cfg.duration_s
    if run.manifest.status in ("completed", "degraded"):
        if nominal is not None:
            return float(nominal)
        if cfg.window is not None:
            return float(cfg.window[1])
    req = run.requests
    ends = pd.concat([req["done_s"], req["first_token_s"], req["scheduled_s"]])
    last = float(pd.to_numeric(ends, errors="coerce").max()) if len(ends) else float("nan")
    if math.isnan(last):  # no event recorded
        return None if nominal is None else float(nominal)
    last = last * (1 + 1e-9) + 1e-9  # just past the last event, which is inside
    return last if nominal is None else min(float(nominal), last)


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read a run directory. Raises `RunDirError` naming the file that is missing or bad."""
    run_dir = Path(path)
    if not run_dir.exists():
        raise RunDirError(f"{run_dir}: no such directory")
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: not a directory; pass a run directory (it holds {MANIFEST})")
    manifest = read_manifest(run_dir)
    requests = read_requests(run_dir)
    _check_columns(run_dir / REQUESTS, requests)
    run = Run(path=run_dir, manifest=manifest, requests=requests)
    run.summary = read_summary(run_dir)
    run.server_metrics = _read_server_metrics(run_dir / SERVER_METRICS)
    missing = [e for e in run.engines if run.engine_info(e).gpus_assumed]
    if missing:
        run.notes.append(f"GPUs per engine not in the manifest for {', '.join(missing)}; assumed 1")
    if torn := torn_tail_bytes(run_dir / JOURNAL):
        run.notes.append(
            f"{run_dir / JOURNAL}: its last line is torn ({torn} bytes: the writer was killed "
            "mid-write, or is writing it now); skipped, 1 line"
        )
    run.notes += manifest_notes(manifest)
    for name, version, known in (
        (MANIFEST, manifest.schema_version, MANIFEST_SCHEMA_VERSION),
        (SUMMARY, run.summary.schema_version if run.summary else SUMMARY_SCHEMA_VERSION,
         SUMMARY_SCHEMA_VERSION),
    ):  # fmt: skip
        if note := schema_note(run_dir / name, version, known):
            run.notes.append(note)
    if run_status(run_dir, manifest) == "interrupted (stale)":
        run.notes.append(
            "status says running, but no process writes this run any more (killed?): "
            "interrupted (stale); continue it with `replay run --resume`"
        )
    return run


def distinct_runs(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """`runs` with a run directory given more than once (the same resolved path, however it
    was spelled, or a folder of runs listed beside one of its runs) kept once, and a note
    for each: one run counted twice would read as two seeds."""
    kept: dict[Path, Run] = {}
    times: dict[Path, int] = {}
    for run in runs:
        key = run.path.resolve()
        kept.setdefault(key, run)
        times[key] = times.get(key, 0) + 1
    notes = [f"{path}: given {n} times; counted once" for path, n in times.items() if n > 1]
    return list(kept.values()), notes


def _check_columns(path: Path, df: pd.DataFrame) -> None:
    for col in _NUMERIC:
        series = df[col]
        if not pd.api.types.is_numeric_dtype(series.dtype) and series.notna().any():
            bad = series.dropna()
            bad = bad[pd.to_numeric(bad, errors="coerce").isna()]
            if len(bad):
                row = int(bad.index[0])
                raise RunDirError(
                    f"{path}: column {col!r} must hold numbers; row {row} has {bad.iloc[0]!r}"
                )
    if df["engine"].isna().any():
        row = int(df.index[df["engine"].isna()][0])
        raise RunDirError(f"{path}: column 'engine' is empty in row {row}")


def _read_server_metrics(path: Path) -> pd.DataFrame | None:
    if not path.exists():
        return None
    try:
        return pq.read_table(path).to_pandas()
    except (pa.ArrowInvalid, OSError) as e:
        raise RunDirError(f"{path}: unreadable parquet ({e})") from e


def resolve_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """`path` (relative to `root`, or absolute) resolved; RunDirError if it leads outside."""
    base = Path(root).resolve()
    target = (base / path).resolve()
    if target != base and base not in target.parents:
        raise RunDirError(f"{path}: outside the runs folder {root}; refusing to read it")
    return target


def find_runs(root: str | os.PathLike[str], skipped: list[Path] | None = None) -> list[Path]:
    """Run directories (folders holding manifest.json) under `root`, sorted.

    Linked folders are not followed and a manifest that links outside `root` is skipped (and
    added to `skipped`, when given), so a runs folder cannot be used to read files elsewhere.
    """
    base = Path(root)
    if not base.is_dir():
        raise RunDirError(f"{root}: not a directory of runs")
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(dirpath)
        if MANIFEST in filenames:
            try:
                resolve_inside(base, here / MANIFEST)
            except RunDirError:
                if skipped is not None:
                    skipped.append(here)
                dirnames[:] = []
                continue
            found.append(here)
            dirnames[:] = []  # a run directory does not nest runs
    return sorted(found)


__all__ = ["Run", "RunDirError", "distinct_runs", "find_runs", "load_run", "resolve_inside"]
