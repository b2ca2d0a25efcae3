"""The engine-counter hit rate: the delta of scraped prefix-cache counters over a window.

`server_metrics.parquet` is read in long form, one row per sample:
``engine`` (str), ``t_s`` (float, seconds from run start), ``metric`` (str; ``name`` is also
accepted) and ``value`` (float). Rows of one metric at one time with different labels are
summed. Counter pairs understood (hits, queries), in tokens:

- vLLM: ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``
- SGLang: ``sglang:cached_tokens_total`` / ``sglang:prompt_tokens_total``

(each also without the ``_total`` suffix, and with ``_`` for ``:``). A vLLM with a KV connector
(host memory, an external store) counts the connector's hits apart: its prefix-cache hits are
``vllm:prefix_cache_hits`` + ``vllm:external_prefix_cache_hits`` (vLLM 0.32,
vllm/v1/metrics/loggers.py:782-788: the cached tokens "sum to vllm:prefix_cache_hits +
vllm:external_prefix_cache_hits").

The offload hit rate (`counter_offload_hit_rate`) needs the ``labels`` column (JSON of the
sample's labels, as `replay.engines.scrape` writes it): vLLM's
``vllm:prompt_tokens_by_source{source="external_kv_transfer"}`` ÷ the family's sum over its
sources (stats.py:426-470, `PromptTokenStats`), counted only when the engine's
``vllm:external_prefix_cache_queries`` grew over the window (it has a KV connector); SGLang's ``sglang:cached_tokens{cache_source}`` "host"
and "storage" ÷ ``sglang:prompt_tokens`` (srt/observability/metrics_collector.py:1869-1873,
2049-2065), only when its cached tokens carry ``cache_source``.
"""

from __future__ import annotations

import json
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
        external = rows[names == _EXTERNAL_HITS] if hits_name == "vllm:prefix_cache_hits" else None
        if external is not None and not external.empty:
            dh += _delta(external, window)  # a KV connector's hits, counted apart
        if dq > 0 and not math.isnan(dh):
            return dh / dq
        return math.nan
    return math.nan


_EXTERNAL_HITS = "vllm:external_prefix_cache_hits"
_EXTERNAL_QUERIES = "vllm:external_prefix_cache_queries"
# (counter, label, the label's offloaded values, the denominator: None = the counter's sum)
_OFFLOAD: tuple[tuple[str, str, frozenset[str], str | None], ...] = (
    ("vllm:prompt_tokens_by_source", "source", frozenset({"external_kv_transfer"}), None),
    (
        "sglang:cached_tokens",
        "cache_source",
        frozenset({"host", "storage"}),
        "sglang:prompt_tokens",
    ),
)


def _label(labels: object, key: str) -> str | None:
    """One label's value from a scraped row's `labels` JSON (None: absent or unreadable)."""
    if not isinstance(labels, str) or not labels:
        return None
    try:
        value = json.loads(labels).get(key)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def counter_offload_hit_rate(
    server_metrics: pd.DataFrame | None, engine: str, window: Window
) -> float:
    """Prompt tokens loaded from host memory or an external store ÷ prompt tokens, from the
    engine's counters over the window (vLLM: its KV connector's tokens; SGLang: HiCache's
    host and storage tokens); NaN when the engine's counters do not carry them."""
    if server_metrics is None or server_metrics.empty:
        return math.nan
    name_col = "metric" if "metric" in server_metrics.columns else "name"
    if not {"engine", "t_s", "value", "labels", name_col} <= set(server_metrics.columns):
        return math.nan
    rows = server_metrics[server_metrics["engine"] == engine]
    names = rows[name_col].astype(str).map(canonical_name)
    if (names == "vllm:prefix_cache_hits").any():
        # A vLLM without a KV connector exports its counters at 0 (created at start,
        # loggers.py:683-706) and never queries it: nothing is loaded, no figure.
        queried = rows[names == _EXTERNAL_QUERIES]
        if queried.empty or not _delta(queried, window) > 0:
            return math.nan
    for counter, key, offloaded, denominator in _OFFLOAD:
        family = rows[names == counter]
        tiers = family["labels"].map(lambda x, k=key: _label(x, k))
        if family.empty or tiers.isna().all():
            continue
        total = family if denominator is None else rows[names == denominator]
        if total.empty:
            return math.nan
        part = family[tiers.isin(offloaded)]
        d_total = _delta(total, window)
        d_part = 0.0 if part.empty else _delta(part, window)
        if d_total > 0 and not math.isnan(d_part):
            return d_part / d_total
        return math.nan
    return math.nan


__all__ = ["COUNTER_PAIRS", "canonical_name", "counter_hit_rate", "counter_offload_hit_rate"]
