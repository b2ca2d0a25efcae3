"""Per-replica figures of an engine of replicas (issue 26), from the records' `replica` and
router columns: what each replica served and hit, how evenly the router spread the load,
which branches of its rule decided, and how well the overlap it predicted matches the
cached tokens the engine reported.

The fleet's totals are the engine's own window metrics (analysis.metrics: every replica's
requests are the engine's, and `gpus` counts every replica's GPUs), so this module adds
only what a one-replica engine lacks: summary.json's `replicas` (how many served in the
window) and `fleet` (the table below). An engine whose records name no replica gets
neither.

Measured requests are those of analysis.metrics (first token inside the window, status
ok, priming left out by the loader). Per replica: `requests`, `share` of the engine's,
`prompt_tokens`, `cached_tokens`, `hit_rate` (cached ÷ prompt, the paper's definition),
`ttft_p50` (s), `predicted_overlap_tokens` (the router's, where it predicts). Fleet:
`imbalance` (the busiest replica's requests ÷ the mean; 1 is even), `branches` (decisions
per branch of the router's rule), `routers` (the names in the records),
`predicted_over_cached` (Σ predicted overlap ÷ Σ reported cached tokens over the measured
requests a router predicted for; 1 is a router whose tree matched the engine's cache; null
for a router that predicted no overlap at all, as the load-only ones).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.manifest import Window


def _num(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df.columns:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _measured(df: pd.DataFrame, window: Window) -> pd.DataFrame:
    first = _num(df, "first_token_s")
    keep = (first >= window.start_s) & (first < window.end_s) & (df["status"] == "ok").to_numpy()
    if "priming" in df.columns:
        keep &= ~df["priming"].fillna(False).astype(bool).to_numpy()
    return df[keep]


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def replica_figures(records: pd.DataFrame, window: Window) -> dict[str, Any] | None:
    """One engine's `replicas` and `fleet` entries (see the module docstring), or None when
    its records name no replica."""
    if "replica" not in records.columns or records["replica"].isna().all():
        return None
    m = _measured(records[records["replica"].notna()], window)
    replica = _num(m, "replica").astype(int)
    prompt, cached = _num(m, "prompt_tokens"), _num(m, "cached_tokens")
    overlap = _num(m, "route_overlap")
    ttft = _num(m, "first_token_s") - _num(m, "scheduled_s")
    seen = sorted({int(r) for r in _num(records, "replica") if math.isfinite(r)})
    total = len(m)
    rows: list[dict[str, Any]] = []
    counts: list[int] = []
    for r in seen:
        sel = replica == r
        p, c = prompt[sel], cached[sel]
        has = ~np.isnan(c)
        o = overlap[sel]
        counts.append(int(sel.sum()))
        rows.append(
            {
                "replica": r,
                "requests": int(sel.sum()),
                "share": _finite(sel.sum() / total) if total else None,
                "prompt_tokens": float(p.sum()),
                "cached_tokens": float(c[has].sum()),
                "hit_rate": _finite(c[has].sum() / p[has].sum()) if p[has].sum() > 0 else None,
                "ttft_p50": _finite(float(np.median(ttft[sel]))) if sel.any() else None,
                "predicted_overlap_tokens": float(o[~np.isnan(o)].sum())
                if (~np.isnan(o)).any()
                else None,
            }
        )
    mean = sum(counts) / len(counts) if counts else 0.0
    predicted = ~np.isnan(overlap) & ~np.isnan(cached)
    # The load-only routers (round_robin, least_load, session_hash) predict nothing: they
    # record an overlap of 0 throughout, and get no ratio.
    denom = float(cached[predicted].sum()) if (overlap[predicted] > 0).any() else 0.0
    branches = (
        m["route_branch"].dropna().astype(str).value_counts().sort_index().to_dict()
        if "route_branch" in m.columns
        else {}
    )
    routers = sorted(records["router"].dropna().astype(str).unique()) if "router" in records else []
    fleet = {
        "per_replica": rows,
        "imbalance": _finite(max(counts) / mean) if mean > 0 else None,
        "branches": {str(k): int(v) for k, v in branches.items()},
        "routers": routers,
        "predicted_over_cached": _finite(float(overlap[predicted].sum()) / denom)
        if denom > 0
        else None,
    }
    return {"replicas": len(seen), "fleet": fleet}


def fleet_metrics(requests: pd.DataFrame, window: Window) -> dict[str, dict[str, Any]]:
    """Per engine with replicas: its `replicas` and `fleet` summary entries."""
    out: dict[str, dict[str, Any]] = {}
    if "replica" not in requests.columns:
        return out
    for name, df in requests.groupby("engine", sort=False):
        got = replica_figures(df, window)
        if got is not None:
            out[str(name)] = got
    return out


__all__ = ["fleet_metrics", "replica_figures"]
