"""Window metrics per engine, defined as in the paper (and DESIGN.md).

Every metric reads the measured requests only: priming requests (``priming == True``) warm a
session's earlier context and are excluded. For a window [start, end):

- prefill throughput counts the prompt tokens (cached and computed alike) of every request
  whose first token lands in the window, whatever its final status;
- the *measured* requests are those of them that finished ``ok``; they give ``requests``,
  the hit rates, TTFT, end-to-end latency, uncached and redundant tokens and the miss split
  (the same set as the simulator's own summary; a live engine reports cached tokens only
  when a request completes);
- output tokens are counted where they were generated: a request's tokens are spread evenly
  from its first token to its end, and the part inside the window counts;
- error and overflow rates read the requests *scheduled* in the window (cancelled ones, cut
  off by the run's end, are left out of the denominator);
- a trajectory counts as finished when its session moved on to another trajectory (the
  replay rules), at the end of its last request; it counts if that end is in the window.

TTFT and end-to-end latency are measured from the request's *scheduled* time, so queueing in
the client is part of them. Rates are per minute; ``_per_gpu`` divides by the engine's GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.counters import counter_hit_rate, counter_offload_hit_rate
from analysis.manifest import (
    Window,
    manifest_sessions,
    manifest_token_scale,
    manifest_working_set_ratio,
)
from analysis.runs import Run, covered_s
from replay.metric_registry import METRICS as REGISTRY
from replay.rundir import RunDirError
from replay.windows import WindowError, clip_to_covered, parse_window_min, seconds

ERROR_STATUSES = ("error", "timeout")

# name -> (label, unit, description) of the metrics computed here: a view of the registry
# (replay.metric_registry), which defines them once.
METRICS: dict[str, tuple[str, str, str]] = {
    m.key: (m.label, m.unit, m.description) for m in REGISTRY if m.source == "analysis.metrics"
}

# Columns of `window_metrics` besides METRICS (identity and raw totals).
ID_COLUMNS = (
    "engine",
    "gpus",
    "gpu_type",
    "sessions",
    "window_start_s",
    "window_end_s",
    "window_s",
)


# The metrics read over the measured requests alone (ratios, percentiles and means of them),
# which an engine with none measured cannot know: null, with this reason (`unknown`).
MEASURED_ONLY = (
    "hit_rate",
    "ideal_hit_rate",
    "theoretical_hit_rate_aiperf",
    "inferencex_total_tok_s_per_gpu",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "e2e_p50",
    "e2e_mean",
    "uncached_tokens_per_request",
    "uncached_tokens_p50",
    "redundant_prefill_per_request",
    "placement_miss_per_request",
    "dependency_miss_per_request",
    "capacity_miss_per_request",
    "gpu_hit_rate",
    "host_hit_rate",
    "external_hit_rate",
    "host_hit_share",
    "slo_request_share",
)
NOTHING_MEASURED = (
    "no request was measured in the window (none finished ok with its first token inside it)"
)


@dataclass
class EngineData:
    """One engine's measured requests as float arrays (NaN for null), ready for masking."""

    name: str
    scheduled: np.ndarray
    first: np.ndarray
    done: np.ndarray
    prompt: np.ndarray
    cached: np.ndarray
    ideal: np.ndarray
    output: np.ndarray
    resume: np.ndarray
    placement: np.ndarray
    dependency: np.ndarray
    capacity: np.ndarray
    tool_gap: np.ndarray
    turn: np.ndarray
    session: np.ndarray
    status: np.ndarray
    finish_times: np.ndarray  # when each finished trajectory ended
    # When the request was sent (NaN where the executor did not record it), and aiperf's
    # theoretical prefix-cache counts of its turn (NaN where the records lack them).
    sent: np.ndarray | None = None
    theory_hit: np.ndarray | None = None
    theory_total: np.ndarray | None = None
    # Cached tokens host memory and an external store served (issue 34): None where the
    # engine's records carry no tier columns (an untiered cache, a run before tiers).
    cached_host: np.ndarray | None = None
    cached_external: np.ndarray | None = None


def _floats(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df.columns:  # a column an older run's records do not have
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def finish_times(df: pd.DataFrame) -> np.ndarray:
    """End times of trajectories whose session moved on to another one (main agent only)."""
    main = df[df["agent"].fillna("main") == "main"]
    if main.empty:
        return np.empty(0)
    main = main.sort_values(["session", "scheduled_s"], kind="stable")
    traj = main["trajectory"].astype(str).to_numpy()
    sess = main["session"].to_numpy()
    new_block = np.ones(len(main), dtype=bool)
    new_block[1:] = (traj[1:] != traj[:-1]) | (sess[1:] != sess[:-1])
    block = np.cumsum(new_block)
    done = pd.to_numeric(main["done_s"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    last_row = np.ones(len(main), dtype=bool)
    last_row[:-1] = block[1:] != block[:-1]
    session_end = np.ones(len(main), dtype=bool)
    session_end[:-1] = sess[1:] != sess[:-1]
    # The last trajectory of each session was still running (or cut off) at the run's end;
    # one whose last request failed was abandoned, not finished.
    status = main["status"].fillna("ok").astype(str).to_numpy()
    dropped = np.union1d(block[session_end], block[last_row & (status != "ok")])
    ends = pd.Series(done).groupby(block).max()
    finished = ends[~ends.index.isin(dropped)]
    return finished.dropna().to_numpy(dtype=float)


# The record columns of cached tokens by tier (replay.records; the GPU's share is the rest).
TIER_COLUMNS = ("cached_tokens_host", "cached_tokens_external")


def _tier(df: pd.DataFrame) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The engine's host and external cached tokens, or (None, None) where its records carry
    neither (a tier column a tiered record leaves null counts as 0)."""
    cols = [_floats(df, c) for c in TIER_COLUMNS]
    if len(df) == 0 or all(np.isnan(c).all() for c in cols):
        return None, None
    host, external = (np.nan_to_num(c, nan=0.0) for c in cols)
    return host, external


def engine_data(run: Run, engine: str) -> EngineData:
    df = run.requests[run.requests["engine"] == engine]
    finished = finish_times(df)
    measured = df[~df["priming"].fillna(False).astype(bool)]
    host, external = _tier(measured)
    return EngineData(
        name=engine,
        scheduled=_floats(measured, "scheduled_s"),
        first=_floats(measured, "first_token_s"),
        done=_floats(measured, "done_s"),
        prompt=_floats(measured, "prompt_tokens"),
        cached=_floats(measured, "cached_tokens"),
        ideal=_floats(measured, "ideal_cached_tokens"),
        output=_floats(measured, "output_tokens"),
        resume=_floats(measured, "resume_pos"),
        placement=_floats(measured, "placement_miss"),
        dependency=_floats(measured, "dependency_miss"),
        capacity=_floats(measured, "capacity_miss"),
        tool_gap=_floats(measured, "tool_gap_s"),
        turn=_floats(measured, "turn"),
        session=_floats(measured, "session"),
        status=measured["status"].fillna("ok").astype(str).to_numpy(),
        finish_times=finished,
        sent=_floats(measured, "sent_s"),
        theory_hit=_floats(measured, "theoretical_hit_blocks"),
        theory_total=_floats(measured, "theoretical_blocks"),
        cached_host=host,
        cached_external=external,
    )


def _pct(values: np.ndarray, q: float) -> float:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if len(values) else math.nan


def _mean(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else math.nan


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def output_tokens_in(d: EngineData, start: float, end: float) -> float:
    """Output tokens generated inside [start, end): each request's tokens spread evenly from
    its first token to its end (all at the first token when the two coincide)."""
    ok = ~np.isnan(d.first) & (d.output > 0)
    f, n = d.first[ok], d.output[ok]
    e = np.where(np.isnan(d.done[ok]), f, d.done[ok])
    span = e - f
    overlap = np.clip(np.minimum(e, end) - np.maximum(f, start), 0.0, None)
    point = (f >= start) & (f < end)
    share = np.where(span > 0, overlap / np.where(span > 0, span, 1.0), point.astype(float))
    return float((n * share).sum())


def redundant_tokens(d: EngineData, mask: np.ndarray) -> tuple[np.ndarray, str]:
    """Per request in `mask`: ideal − actual resume position (the simulator's `resume_pos`
    where known, else the reported cached tokens), floored at 0; and where it came from."""
    resume = d.resume[mask]
    actual = np.where(np.isnan(resume), d.cached[mask], resume)
    red = np.clip(d.ideal[mask] - actual, 0.0, None)
    known = ~np.isnan(resume)
    source = "simulated" if known.all() else ("ideal − reported" if not known.any() else "mixed")
    return red, source


def inferencex_total_tok_s_per_gpu(
    d: EngineData, mask: np.ndarray, gpus: int, token_scale: float = 1.0
) -> float:
    """InferenceX's tok/s/GPU over the requests in `mask` (issue 35, point 2): every prompt
    token (cached ones included) plus every output token of those requests, over the span
    from the first one's start (sent; scheduled where not recorded) to the last one's end,
    per GPU, at full size. InferenceX (github SemiAnalysisAI/InferenceX,
    utils/agentic/aggregation/request_metrics.py `compute_throughput_stats`, and
    process_agentic_result.py `build_agg`, which divides by the GPUs) computes it over
    aiperf's profiling-phase records without an error: (Σ input_sequence_length +
    Σ output_sequence_length) ÷ (max request_end − min request_start) ÷ GPUs; aiperf's
    input_sequence_length is the whole prompt. Our profiling phase is the measured window's
    requests (`measured_mask`: first token in the window, finished ok, priming left out)."""
    if not mask.any():
        return math.nan
    sent = d.sent if d.sent is not None else np.full(len(d.first), np.nan)
    start = np.where(np.isnan(sent[mask]), d.scheduled[mask], sent[mask])
    end = d.done[mask]
    if np.isnan(start).all() or np.isnan(end).all():
        return math.nan
    span = float(np.nanmax(end) - np.nanmin(start))
    tokens = float(np.nansum(d.prompt[mask]) + np.nansum(d.output[mask]))
    return tokens * token_scale / span / gpus if span > 0 else math.nan


def theoretical_hit_rate_aiperf(d: EngineData, mask: np.ndarray) -> float:
    """aiperf's theoretical prefix-cache hit rate over the requests in `mask`: Σ hit blocks
    ÷ Σ blocks of their turns (`replay.traces.prefix`: per trace, one seen-set over the root
    and its subagents in the trace's clock; aiperf/metrics/theoretical_prefix_cache.py sums
    the same two counts over the profiling phase's valid records). NaN where the records
    carry no counts (a run before issue 35)."""
    if d.theory_hit is None or d.theory_total is None:
        return math.nan
    hit, total = d.theory_hit[mask], d.theory_total[mask]
    known = ~np.isnan(hit) & ~np.isnan(total)
    return _ratio(float(np.clip(hit[known], 0, total[known]).sum()), float(total[known].sum()))


def tier_metrics(d: EngineData, mask: np.ndarray) -> dict[str, Any]:
    """Hits by cache tier over the requests in `mask` (issue 34; docs/cache-tiers.md), as the
    simulator's summary.csv counts them (`replay.sim.measures`): host and external cached
    tokens ÷ prompt tokens, the GPU's the rest of the cached tokens, and host ÷ cached. Empty
    where the engine's records carry no tier columns, so an untiered run's figures and
    summary.json are what they were. Over the requests whose cached tokens are known, as
    `hit_rate`, so the three rates add up to it."""
    if d.cached_host is None or d.cached_external is None:
        return {}
    known = mask & ~np.isnan(d.cached)
    prompt = float(d.prompt[known].sum())
    cached = float(d.cached[known].sum())
    host = float(d.cached_host[known].sum())
    external = float(d.cached_external[known].sum())
    return {
        "cached_tokens_host": host,
        "cached_tokens_external": external,
        "gpu_hit_rate": _ratio(cached - host - external, prompt),
        "host_hit_rate": _ratio(host, prompt),
        "external_hit_rate": _ratio(external, prompt),
        "host_hit_share": _ratio(host, cached),
        "host_hit_requests": int((d.cached_host[known] > 0).sum()),
    }


def measured_mask(d: EngineData, window: Window) -> np.ndarray:
    """Measured requests: first token in the window and finished `ok` (priming already out)."""
    return (d.first >= window.start_s) & (d.first < window.end_s) & (d.status == "ok")


def engine_metrics(
    d: EngineData, window: Window, gpus: int, token_scale: float = 1.0
) -> dict[str, Any]:
    """The window metrics of one engine (see the module docstring for the definitions).

    `token_scale` (the manifest's `config.token_scale`) multiplies the token throughputs and
    the per-request token counts (uncached, redundant, misses): a run that replayed a trace
    with token lengths divided by S (the bundled sample against emulators scaled alike) reads
    at full size everywhere it is shown, so per-GPU rates, prices and per-request figures are
    comparable with real engines and never mixed. The raw token totals (`prompt_tokens`,
    `cached_tokens`, ...) stay as recorded; they are inputs to ratios, not shown."""
    start, end = window.start_s, window.end_s
    minutes = window.duration_s / 60.0
    served = (d.first >= start) & (d.first < end)
    measured = measured_mask(d, window)
    prompt = d.prompt[measured]
    cached = d.cached[measured]
    has_cached = ~np.isnan(cached)
    ok = measured & ~np.isnan(d.done)
    scheduled = (d.scheduled >= start) & (d.scheduled < end)
    status = d.status[scheduled]
    attempted = int((status != "cancelled").sum())
    red, source = redundant_tokens(d, measured)
    out_tokens = output_tokens_in(d, start, end)
    ttft = d.first[measured] - d.scheduled[measured]
    e2e = d.done[ok] - d.scheduled[ok]
    prefill = float(d.prompt[served].sum())
    return {
        "requests": int(measured.sum()),
        "requests_scheduled": int(scheduled.sum()),
        "prompt_tokens": float(prompt.sum()),
        "cached_tokens": float(cached[has_cached].sum()),
        "ideal_cached_tokens": float(d.ideal[measured].sum()),
        "output_tokens": out_tokens,
        "output_tokens_per_min": out_tokens * token_scale / minutes,
        "output_tokens_per_min_per_gpu": out_tokens * token_scale / minutes / gpus,
        "prefill_tokens_per_min_per_gpu": prefill * token_scale / minutes / gpus,
        "hit_rate": _ratio(float(cached[has_cached].sum()), float(prompt[has_cached].sum())),
        "ideal_hit_rate": _ratio(float(d.ideal[measured].sum()), float(prompt.sum())),
        "theoretical_hit_rate_aiperf": theoretical_hit_rate_aiperf(d, measured),
        "inferencex_total_tok_s_per_gpu": inferencex_total_tok_s_per_gpu(
            d, measured, gpus, token_scale
        ),
        "ttft_p50": _pct(ttft, 50),
        "ttft_p90": _pct(ttft, 90),
        "ttft_p99": _pct(ttft, 99),
        "e2e_p50": _pct(e2e, 50),
        "e2e_mean": _mean(e2e),
        "trajectories_finished": int(((d.finish_times >= start) & (d.finish_times < end)).sum()),
        "errors": int(np.isin(status, ERROR_STATUSES).sum()),
        "error_rate": _ratio(float(np.isin(status, ERROR_STATUSES).sum()), attempted),
        "overflow_rate": _ratio(float((status == "overflow").sum()), attempted),
        "uncached_tokens_per_request": token_scale * _mean(prompt - cached),
        "uncached_tokens_p50": token_scale * _pct(prompt - cached, 50),
        "redundant_prefill_per_request": token_scale * _mean(red),
        "miss_source": source,
        "placement_miss_per_request": token_scale * _mean(d.placement[measured]),
        "dependency_miss_per_request": token_scale * _mean(d.dependency[measured]),
        "capacity_miss_per_request": token_scale * _mean(d.capacity[measured]),
        **tier_metrics(d, measured),
    }


def resolve_window(run: Run, window: Window | tuple[float, float] | str | None) -> Window:
    """`window` (default: the run's own; text: a command's `--window A-B` as given, in
    minutes, a bad one a WindowError naming the flag) inside the time the run's data covers
    (`replay.windows.clip_to_covered`): a given window past the data is a RunDirError, one
    that ends after it is clipped; the clip is said in the window's source and the run's
    notes, so rates are divided by the time covered and a report says which."""
    own = run.default_window()
    if window is None:
        win = own
    elif isinstance(window, Window):
        win = window
    elif isinstance(window, str):
        win = Window(*seconds(parse_window_min(window, "--window")), f"--window {window} min")
    else:
        win = Window(float(window[0]), float(window[1]), "argument")
    given = win.source != own.source  # the run's own window (passed on again) is never refused
    end = covered_s(run)
    if end is None:
        return win
    try:
        lo, hi, note = clip_to_covered(win.start_s, win.end_s, end, win.source, given)
    except WindowError as e:
        raise RunDirError(f"{run.path}: {e}") from None
    if note is None:
        return win
    if note not in run.notes:
        run.notes.append(note)
    if hi == win.end_s:
        return win
    return Window(lo, hi, f"{win.source}, clipped to the data's end at {hi:.6g} s")


def window_metrics(run: Run, window: Window | tuple[float, float] | None = None) -> pd.DataFrame:
    """One row per engine: identity columns (`ID_COLUMNS`), then every metric in `METRICS`
    plus raw totals (`prompt_tokens`, `output_tokens`, ...), `miss_source`,
    `working_set_ratio` and `run_id`. The window defaults to the manifest's."""
    win = resolve_window(run, window)
    sessions = manifest_sessions(run.manifest)
    if sessions is None:
        sessions = int(run.requests["session"].nunique())
    rows = []
    for engine in run.engines:
        info = run.engine_info(engine)
        row: dict[str, Any] = {
            "engine": engine,
            "gpus": info.gpus,
            "gpu_type": info.gpu_type,
            "sessions": sessions,
            "window_start_s": win.start_s,
            "window_end_s": win.end_s,
            "window_s": win.duration_s,
        }
        row["token_scale"] = manifest_token_scale(run.manifest)
        row.update(engine_metrics(engine_data(run, engine), win, info.gpus, row["token_scale"]))
        row["counter_hit_rate"] = counter_hit_rate(run.server_metrics, engine, win)
        row["counter_offload_hit_rate"] = counter_offload_hit_rate(run.server_metrics, engine, win)
        row["working_set_ratio"] = working_set_ratio(run, engine)
        # Its cache tiers (issue 34), all replicas' GiB: only for an engine that has them, so
        # an untiered run's table (and summary.json) is as it was.
        for key in ("host_memory_gb", "external_memory_gb"):
            if gb := getattr(info, key):
                row[key] = gb * info.replicas
        row["run_id"] = run.run_id
        rows.append(row)
    return pd.DataFrame(rows)


def working_set_ratio(run: Run, engine: str) -> float:
    """Working set ÷ cache capacity, from summary.json (per engine) or the manifest."""
    entry = run.summary.engines.get(engine) if run.summary is not None else None
    value = entry.get("working_set_ratio") if entry is not None else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    value = manifest_working_set_ratio(run.manifest, engine)
    return math.nan if value is None else value


__all__ = [
    "ID_COLUMNS",
    "MEASURED_ONLY",
    "METRICS",
    "NOTHING_MEASURED",
    "TIER_COLUMNS",
    "EngineData",
    "engine_data",
    "engine_metrics",
    "inferencex_total_tok_s_per_gpu",
    "measured_mask",
    "resolve_window",
    "theoretical_hit_rate_aiperf",
    "tier_metrics",
    "window_metrics",
]
