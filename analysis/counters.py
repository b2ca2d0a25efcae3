"""The engine-counter hit rate: the delta of scraped prefix-cache counters over a window.

`server_metrics.parquet` is read in long form, one row per sample:
``engine`` (str), ``t_s`` (float, seconds from run start), ``metric`` (str; ``name`` is also
accepted) and ``value`` (float). Rows of one metric at one time with different labels are
summed. Counter pairs understood (hits, queries), in tokens:

- vLLM: ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``
- SGLang: ``sglang:cached_tokens_total`` / ``sglang:prompt_tokens_total``

(each also without the ``_total`` suffix, and with ``_`` for ``:``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.manifest import Window

COUNTER_PAIRS: tuple[tuple[str, str], ...] = (
    ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries"),
    ("sglang:cached_tokens", "sglang:prompt_tokens"),
)


def canonical_name(name: str) -> str:
    """A scraped metric's name in one spelling: without `_total`, with `vllm:` / `sglang:`
    for `vllm_` / `sglang_` (the counters here and the gauges of analysis.saturation)."""
    name = name.removesuffix("_total")
    for prefix in ("vllm", "sglang"):
        if name.startswith(prefix + "_"):
            name = prefix + ":" + name[len(prefix) + 1 :]
    return name


def _delta(samples: pd.DataFrame, window: Window) -> float:
    """Counter value at the window's end minus at its start (last sample at or before each;
    the first sample inside the window when none precedes it)."""
    series = samples.groupby("t_s")["value"].sum().sort_index()
    t = series.index.to_numpy(dtype=float)
    v = series.to_numpy(dtype=float)
    inside = (t >= window.start_s) & (t <= window.end_s)
    if not inside.any():
        return math.nan
    before = np.flatnonzero(t <= window.start_s)
    start_v = v[before[-1]] if len(before) else v[np.flatnonzero(inside)[0]]
    end_v = v[np.flatnonzero(t <= window.end_s)[-1]]
    return float(end_v - start_v)


def counter_hit_rate(server_metrics: pd.DataFrame | None, engine: str, window: Window) -> float:
    """Hits ÷ queries from the engine's counters over the window; NaN when unknown."""
    if server_metrics is None or server_metrics.empty:
        return math.nan
    name_col = "metric" if "metric" in server_metrics.columns else "name"
    if not {"engine", "t_s", "value", name_col} <= set(server_metrics.columns):
        return math.nan
    rows = server_metrics[server_metrics["engine"] == engine]
    if rows.empty:
        return math.nan
    names = rows[name_col].astype(str).map(canonical_name)
    for hits_name, queries_name in COUNTER_PAIRS:
        hits = rows[names == hits_name]
        queries = rows[names == queries_name]
        if hits.empty or queries.empty:
            continue
        dq = _delta(queries, window)
        dh = _delta(hits, window)
        if dq > 0 and not math.isnan(dh):
            return dh / dq
        return math.nan
    return math.nan


__all__ = ["COUNTER_PAIRS", "canonical_name", "counter_hit_rate"]
