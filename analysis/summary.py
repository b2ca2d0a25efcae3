"""`summary.json`: per-engine window metrics, as `replay.rundir_models.RunSummary`.

This module is summary.json's one producer: `replay run` builds it at the end of a run
(`summary_of_dir`, handed to the executor as `RunPlan.summarize`), `replay simulate` after
each simulated run (`summarize_dir`), and `replay report` rewrites it. Per-engine keys an
earlier summary holds that this module does not compute are kept.

```
{"schema_version": 1, "run_id": ..., "window": [start_s, end_s], "window_source": ...,
 "bin_s": 60, "notes": [...],
 "engines": {name: {metric: value, "<metric>_se": standard error, ...}}}
```
NaN becomes null.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.economics import PRICE_COLUMNS, TEXT_COLUMNS, engine_economics
from analysis.manifest import Window
from analysis.metrics import resolve_window
from analysis.registry import METRICS, Severity, severity, summary_keys
from analysis.replicas import fleet_metrics
from analysis.runs import Run, load_run
from analysis.uncertainty import metrics_with_se
from pricing import PricingError
from replay.rundir import SUMMARY, write_summary_file
from replay.rundir_models import RunStatus, RunSummary

OVERFLOW_FLAG = 0.01  # a run whose overflow rate passes 1% is flagged
# An engine whose error share in the window passes 5% is flagged (`error_flagged`) and a live
# run ends `degraded`: its throughput and latency then measure the failures (an engine that
# died, a broken endpoint) more than the engine. A choice, not a source's number: retries and
# the odd timeout stay well below it in healthy runs.
ERROR_FLAG = 0.05


def error_note(name: str, error_rate: Any) -> str | None:
    """The note for an engine whose window error share passes ERROR_FLAG, else None."""
    if (
        isinstance(error_rate, int | float)
        and math.isfinite(error_rate)
        and error_rate > ERROR_FLAG
    ):
        return (
            f"{name}: {error_rate:.1%} of requests in the window failed (over "
            f"{ERROR_FLAG:.0%}): degraded, its numbers measure the failures, not the engine"
        )
    return None


# What summary.json keeps of a metrics table: the registry's stored metrics and their
# standard errors (replay.metric_registry), keyed by engine.
_SUMMARY_COLUMNS = {"engine", *summary_keys()}
# Metrics produced only under a condition (the registry's `only_when`: hits by cache tier,
# an engine of replicas): an engine without them gets no key, not a null, even when another
# engine of the same table has them (an untiered engine's summary.json stays as it was).
_CONDITIONAL = frozenset(m.key for m in METRICS if m.only_when and m.summary)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# Columns `engine_economics` adds; a report's own sheet is replaced by the default's so
# that every writer of summary.json produces the same keys and values.
_PRICE_COLUMNS = (*TEXT_COLUMNS, *PRICE_COLUMNS)


def _with_economics(table: pd.DataFrame) -> pd.DataFrame:
    """The default sheet's prices (user cost per task, profit at goodput); pricing is a
    bonus, so a pricing error (an engine's GPU without a rate) leaves the table without
    them — and only a pricing error: anything else is a bug."""
    table = table.drop(columns=[c for c in _PRICE_COLUMNS if c in table.columns])
    if table.empty:
        return table
    try:
        econ = engine_economics(table)
    except PricingError:
        return table
    return table.merge(econ.drop(columns=["gpu_rate_per_hour"], errors="ignore"), on="engine")


@dataclass(frozen=True)
class RunWarning:
    """A line a run's final table, report and dashboard print for one engine: the registry
    metric that raised it (its `severity` says how loud) and the text."""

    metric: str
    text: str

    @property
    def severity(self) -> Severity:
        return severity(self.metric)


def engine_warnings(name: str, row: Mapping[Any, Any]) -> list[RunWarning]:
    """The warnings of one engine's row: nothing measured, saturated, drifted, false hits,
    warm start."""
    out = []
    if row.get("requests") == 0:
        out.append(
            RunWarning(
                "requests",
                f"{name}: no request was measured in the window (none finished ok with its "
                "first token inside it): its figures measure nothing; the engine may have hung "
                "or failed (see the errors), or the window missed the traffic",
            )
        )
    if row.get("saturated") is True:
        ev = row.get("saturation") or {}
        why = "; ".join(ev.get("reasons") or []) if isinstance(ev, dict) else ""
        out.append(
            RunWarning(
                "saturated",
                f"{name}: SATURATED — the engine did not keep up ({why}); its latencies "
                "measure its queue and its throughput is its ceiling, not the workload's demand",
            )
        )
    drift = row.get("drift")
    if isinstance(drift, dict) and drift.get("flagged"):
        out.append(
            RunWarning(
                "drift", f"{name}: replay drifted from the trace ({'; '.join(drift['reasons'])})"
            )
        )
    false_hits = row.get("false_hits")
    if isinstance(false_hits, int) and false_hits > 0:
        ev = row.get("claimed_hits") or {}
        out.append(
            RunWarning(
                "false_hits",
                f"{name}: {false_hits} of {ev.get('assessed', '?')} judged cache hits (sent "
                "with no earlier request waiting) had the TTFT of a full prefill: the engine "
                "may have computed the tokens it reported cached (or a later request's prefill "
                "shared its step), so its hit rate may overstate what its cache saved",
            )
        )
    if row.get("warm_start_flagged"):
        ex = row.get("warm_start_excess_hit_rate") or 0.0
        out.append(
            RunWarning(
                "warm_start_flagged",
                f"{name}: the cache was warm at the start: {ex:.1%} of the first minutes' "
                "prompt tokens hit prefixes no request of this run had computed (restart the "
                "engine, or reset its prefix cache, before measuring)",
            )
        )
    return out


def run_warnings(name: str, row: Mapping[Any, Any]) -> list[str]:
    """The texts of `engine_warnings`."""
    return [w.text for w in engine_warnings(name, row)]


def build_summary(
    run: Run, window: Window | tuple[float, float] | None = None, bin_s: float = 60.0
) -> RunSummary:
    """Per-engine window metrics with time-bin standard errors, ready for `summary.json`."""
    win = resolve_window(run, window)
    return summary_from_table(run, win, metrics_with_se(run, win, bin_s), bin_s)


def summary_from_table(
    run: Run, win: Window, table: pd.DataFrame, bin_s: float = 60.0
) -> RunSummary:
    """The summary from an already computed `metrics_with_se` table (extra columns, such as
    pricing, are left out so every writer produces the same keys)."""
    table = _with_economics(table)
    keep = [c for c in table.columns if c in _SUMMARY_COLUMNS]
    previous = run.summary.engines if run.summary is not None else {}
    engines: dict[str, dict[str, Any]] = {}
    notes = list(run.notes)
    for row in table[keep].to_dict(orient="records"):
        name = str(row["engine"])
        old = previous.get(name)
        kept = old.model_dump(mode="json") if old is not None else {}
        entry: dict[str, Any] = {k: v for k, v in kept.items() if k not in row}
        entry.update(
            {
                str(k): _jsonable(v)
                for k, v in row.items()
                if k != "engine" and not (k in _CONDITIONAL and _jsonable(v) is None)
            }
        )
        entry["overflow_flagged"] = bool((row["overflow_rate"] or 0) > OVERFLOW_FLAG)
        if entry["overflow_flagged"]:
            notes.append(f"{name}: overflow rate {row['overflow_rate']:.1%} is over 1%")
        flagged = error_note(name, row.get("error_rate"))
        entry["error_flagged"] = flagged is not None
        if flagged is not None:
            notes.append(flagged)
        notes += run_warnings(name, entry)
        engines[name] = entry
    # An engine of replicas: per-replica figures beside the fleet's (analysis.replicas).
    for name, extra in fleet_metrics(run.requests, win).items():
        if name in engines:
            engines[name].update(_jsonable(extra))
    return RunSummary.model_validate(
        {
            "run_id": run.run_id,
            "window": win.as_list(),
            "window_source": win.source,
            "bin_s": bin_s,
            "notes": notes,
            "engines": engines,
        }
    )


def write_summary(
    run: Run,
    window: Window | tuple[float, float] | None = None,
    summary: RunSummary | None = None,
) -> Path:
    """Atomically (re)write the run's summary.json (built here unless given); its path."""
    summary = summary if summary is not None else build_summary(run, window)
    write_summary_file(run.path, summary)
    run.summary = summary
    return run.path / SUMMARY


def summary_of_dir(run_dir: Path, status: RunStatus | None = None) -> RunSummary:
    """The summary of a run directory on its manifest's window, not written (`replay run`
    hands this to the executor, which writes it with the run's last manifest update).

    `status`: the status the run is about to be closed with. The manifest still says
    `running` when the executor asks, and a running run's data is taken to cover only up to
    its last event (`analysis.runs.covered_s`), so without it a completed run whose last
    request ended before the run did would be summarised on a clipped window that
    `replay price` and the report, reading the closed run, do not use."""
    run = load_run(run_dir)
    if status is not None:
        run.manifest = run.manifest.model_copy(update={"status": status})
    return build_summary(run)


def summarize_dir(run_dir: str | Path) -> RunSummary:
    """Load the run directory and (re)write its summary.json; the summary."""
    run = load_run(run_dir)
    write_summary(run)
    assert run.summary is not None
    return run.summary


__all__ = [
    "ERROR_FLAG",
    "RunSummary",
    "RunWarning",
    "build_summary",
    "engine_warnings",
    "error_note",
    "run_warnings",
    "summarize_dir",
    "summary_from_table",
    "summary_of_dir",
    "write_summary",
]
