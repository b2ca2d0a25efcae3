"""What a run's numbers mean: per engine and window, the saturation verdict, agent tasks,
SLO shares and goodput, replay drift and the warm-start check — and which metrics the run
cannot know at all.

`engine_verdicts` adds these keys to each engine's row of `analysis.metrics.window_metrics`
(so summary.json, reports, the final table and the dashboard all read them from one place):
`saturated`, `saturation`, `tasks_finished`, `tasks_per_hour_per_gpu`,
`task_latency_p50_s`, `task_latency_p90_s`, `task_slowdown_p50`, `task_slowdown_p90`,
`slo`, `slo_request_share`, `slo_task_share`, `goodput_output_tokens_per_min_per_gpu`,
`goodput_prefill_tokens_per_min_per_gpu`, the task token means that price a task,
`warm_start_*`, `false_hits` and `claimed_hits` (reported hits checked against TTFT:
`analysis.claimed_hits`), `drift` (live runs) and `unknown` ({metric: why the run cannot know it}).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.claimed_hits import check_engine
from analysis.fidelity import drift, warm_start
from analysis.manifest import Window, manifest_token_scale
from analysis.metrics import (
    MEASURED_ONLY,
    NOTHING_MEASURED,
    EngineData,
    engine_data,
    measured_mask,
    output_tokens_in,
)
from analysis.registry import TRACE_TIMING_REASON, executor_of, unknown_to
from analysis.runs import Run
from analysis.saturation import QUEUE_METRICS, RUNNING_METRICS, gauge_series, saturation
from analysis.slo import manifest_slo, request_within, share
from analysis.tasks import task_metrics, task_table, window_tasks
from replay.rundir_models import Manifest

# Metrics a trace-timing simulation cannot know (its clock is the trace's, not an engine's),
# and why: the registry's (replay.metric_registry).
TRACE_TIMING_UNKNOWN = tuple(
    k for k in unknown_to("sim-trace") if k not in unknown_to("sim-engine")
)


# The record columns the verdicts read (copying only these keeps a 100K-request run fast).
_COLUMNS = (
    "session",
    "trajectory",
    "agent",
    "turn",
    "scheduled_s",
    "sent_s",
    "first_token_s",
    "done_s",
    "prompt_tokens",
    "cached_tokens",
    "ideal_cached_tokens",
    "output_tokens",
    "expected_output_tokens",
    "status",
    "tool_gap_s",
    "priming",
    "attempt",
    "trace_prompt_tokens",
    "trace_latency_s",
    "extends_previous",
)


def run_clock(manifest: Manifest) -> str:
    """ "trace" for a trace-timing simulation, else "engine" (live runs, engine timing)."""
    return "trace" if executor_of(manifest) == "sim-trace" else "engine"


def is_live(manifest: Manifest) -> bool:
    return executor_of(manifest) in ("live", "emulated")


def engine_verdicts(
    run: Run, engine: str, d: EngineData, win: Window, gpus: int, token_scale: float
) -> dict[str, Any]:
    """The keys listed in the module docstring for one engine."""
    req = run.requests
    df = req.loc[req["engine"] == engine, [c for c in _COLUMNS if c in req.columns]]
    clock = run_clock(run.manifest)
    measured = df[~df["priming"].fillna(False).astype(bool)]
    sched = pd.to_numeric(measured["scheduled_s"], errors="coerce").to_numpy(float)
    sent = pd.to_numeric(measured["sent_s"], errors="coerce").to_numpy(float)
    first = pd.to_numeric(measured["first_token_s"], errors="coerce").to_numpy(float)
    queue = gauge_series(run.server_metrics, engine, QUEUE_METRICS, win)
    running = gauge_series(run.server_metrics, engine, RUNNING_METRICS, win)
    sat, evidence = saturation(sched, sent, first, win, queue, running, clock)
    out: dict[str, Any] = {"saturated": sat, "saturation": evidence}
    tasks = task_table(df)
    out.update(task_metrics(tasks, win, gpus))
    slo, slo_source = manifest_slo(run.manifest)
    out["slo"] = {**slo.model_dump(), "source": slo_source, "text": slo.text()}
    mask = measured_mask(d, win)
    within = request_within(
        slo, d.scheduled[mask], d.first[mask], d.done[mask], d.output[mask], token_scale
    )
    out["slo_request_share"] = share(within)
    done = window_tasks(tasks, win)
    slow = done["slowdown"].astype(float).to_numpy() if len(done) else np.empty(0)
    if slo.task_slowdown is None:
        out["slo_task_share"] = math.nan
    elif len(slow) and np.isfinite(slow).all():
        out["slo_task_share"] = share(slow <= slo.task_slowdown)
    else:
        out["slo_task_share"] = math.nan
    # Goodput: only the requests that met the request SLO, counted like the raw rates.
    good = np.zeros(len(d.first), dtype=bool)
    good[np.flatnonzero(mask)[within]] = True
    minutes = win.duration_s / 60.0
    kept = _subset(d, good)
    good_out = output_tokens_in(kept, win.start_s, win.end_s)
    out["goodput_output_tokens_per_min_per_gpu"] = good_out * token_scale / minutes / gpus
    out["goodput_prefill_tokens_per_min_per_gpu"] = (
        float(d.prompt[good].sum()) * token_scale / minutes / gpus
    )
    # A finished task's tokens (means over the window's tasks), at full size, to price it.
    for col in ("prompt_tokens", "cached_tokens", "output_tokens"):
        mean = float(done[col].astype(float).mean()) if len(done) else math.nan
        out[f"task_{col}_mean"] = mean * token_scale
    out.update(warm_start(df, win))
    got = check_engine(df)
    out["false_hits"], out["claimed_hits"] = got.false_hits, got.evidence
    # What this executor cannot know, with the registry's reasons; drift (a JSON object, not
    # a number) last, after any reason the data gives.
    cannot = unknown_to(executor_of(run.manifest))
    unknown = {k: why for k, why in cannot.items() if k != "drift"}
    for key in unknown:
        out[key] = math.nan
    if "task_slowdown_p50" not in unknown and len(done) and not np.isfinite(slow).all():
        why = "the records carry no trace latencies (trace_latency_s), so no slowdown"
        unknown.update({k: why for k in ("task_slowdown_p50", "task_slowdown_p90")})
        unknown["slo_task_share"] = why
    if "drift" in cannot:
        out["drift"] = None
        unknown["drift"] = cannot["drift"]
    else:
        out["drift"] = drift(df, win)
    out["unknown"] = unknown
    return out


def _subset(d: EngineData, keep: np.ndarray) -> EngineData:
    """An `EngineData` with only the `keep` requests (for the goodput token count)."""
    fields = {
        k: (v[keep] if isinstance(v, np.ndarray) and k != "finish_times" else v)
        for k, v in vars(d).items()
    }
    return EngineData(**fields)


def with_verdicts(run: Run, table: pd.DataFrame, window: Window) -> pd.DataFrame:
    """`table` (a `window_metrics` table of `run` over `window`) with every engine's verdict
    keys added as columns (dict-valued ones as objects)."""
    rows = []
    for rec in table.to_dict(orient="records"):
        engine = str(rec["engine"])
        gpus = int(rec.get("gpus") or 1)
        scale = manifest_token_scale(run.manifest)
        rec.update(engine_verdicts(run, engine, engine_data(run, engine), window, gpus, scale))
        if rec.get("requests") == 0:
            rec["unknown"] = _nothing_measured(rec)
        for key in rec.get("unknown") or {}:
            if key in rec and isinstance(rec[key], int | float) and key != "drift":
                rec[key] = math.nan
        rows.append(rec)
    return pd.DataFrame(rows, columns=[*table.columns, *_new_keys(rows, table)])


def _nothing_measured(rec: dict[Any, Any]) -> dict[str, str]:
    """`rec`'s `unknown` with every metric of the measured requests that is null for want of
    one (`analysis.metrics.MEASURED_ONLY`) and its reason; a reason already given (a
    trace-timing run's) stays, and drift stays last."""
    unknown = dict(rec.get("unknown") or {})
    drift = {"drift": unknown.pop("drift")} if "drift" in unknown else {}
    for key in MEASURED_ONLY:
        value = rec.get(key)
        if isinstance(value, float) and math.isnan(value):
            unknown.setdefault(key, NOTHING_MEASURED)
    return {**unknown, **drift}


def _new_keys(rows: list[dict[Any, Any]], table: pd.DataFrame) -> list[str]:
    seen: dict[str, None] = {}
    for r in rows:
        for k in r:
            if k not in table.columns:
                seen[k] = None
    return list(seen)


__all__ = [
    "TRACE_TIMING_REASON",
    "TRACE_TIMING_UNKNOWN",
    "engine_verdicts",
    "is_live",
    "run_clock",
    "with_verdicts",
]
