"""Roll-ups of the measured requests: by turn depth, by session, by tool-gap length (hit rate
against the idle time before the request) and by prompt length.

Each roll-up reads the measured requests (`analysis.metrics.measured_mask`: first token in
the window, finished ok, priming excluded)
and returns one row per engine and bucket: ``engine, bucket, lo, hi, requests, hit_rate,
ideal_hit_rate, uncached_tokens_per_request, redundant_prefill_per_request, ttft_p50``.
Hit rates are token-weighted (cached ÷ prompt tokens of the bucket).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.manifest import Window, manifest_token_scale
from analysis.metrics import engine_data, measured_mask, redundant_tokens, resolve_window
from analysis.runs import Run

INF = math.inf
TURN_EDGES: tuple[float, ...] = (0, 1, 2, 4, 8, 16, 32, 64, 128, INF)
GAP_EDGES: tuple[float, ...] = (0, 1, 5, 15, 30, 60, 120, 300, INF)  # seconds; 300 is the cap
PROMPT_EDGES: tuple[float, ...] = (0, 8e3, 16e3, 32e3, 64e3, 128e3, INF)  # tokens

ROLLUP_COLUMNS = (
    "engine",
    "bucket",
    "lo",
    "hi",
    "requests",
    "hit_rate",
    "ideal_hit_rate",
    "uncached_tokens_per_request",
    "redundant_prefill_per_request",
    "ttft_p50",
)


def _fmt(x: float, unit: str) -> str:
    if unit == "tok" and x >= 1000:
        return f"{x / 1000:g}K"
    return f"{x:g}"


def bucket_labels(edges: Sequence[float], unit: str = "") -> list[str]:
    """Human labels: "0", "2–3" for integer buckets, "[1, 5) s" style otherwise."""
    labels = []
    for lo, hi in itertools.pairwise(edges):
        suffix = f" {unit}" if unit else ""
        if hi == INF:
            labels.append(f"≥ {_fmt(lo, unit)}{suffix}")
        elif unit == "" and hi - lo == 1:
            labels.append(f"{lo:g}")
        elif unit == "":
            labels.append(f"{lo:g}–{hi - 1:g}")
        else:
            labels.append(f"{_fmt(lo, unit)}–{_fmt(hi, unit)}{suffix}")
    return labels


def _served_frame(run: Run, window: Window) -> pd.DataFrame:
    """The window's measured requests, token counts at full size (× the run's token scale,
    as every shown token figure is: `analysis.metrics.engine_metrics`)."""
    scale = manifest_token_scale(run.manifest)
    frames = []
    for engine in run.engines:
        d = engine_data(run, engine)
        served = measured_mask(d, window)
        red, _ = redundant_tokens(d, served)
        frames.append(
            pd.DataFrame(
                {
                    "engine": engine,
                    "turn": d.turn[served],
                    "session": d.session[served],
                    "tool_gap_s": d.tool_gap[served],
                    "prompt": scale * d.prompt[served],
                    "cached": scale * d.cached[served],
                    "ideal": scale * d.ideal[served],
                    "redundant": scale * red,
                    "ttft": d.first[served] - d.scheduled[served],
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=["engine", "turn", "session", "tool_gap_s", "prompt"])
    df = pd.concat(frames, ignore_index=True)
    # Categorical engines keep the manifest's order in every grouped table.
    df["engine"] = pd.Categorical(df["engine"], categories=run.engines)
    return df


def _aggregate(df: pd.DataFrame, key: str) -> pd.DataFrame:
    df = df.assign(
        cached_known=np.where(df["cached"].isna(), 0.0, df["prompt"]),
        cached0=df["cached"].fillna(0.0),
        uncached=df["prompt"] - df["cached"],
    )
    g = df.groupby(["engine", key], sort=True, observed=True)
    out = g.agg(
        requests=("prompt", "size"),
        prompt=("prompt", "sum"),
        cached=("cached0", "sum"),
        cached_known=("cached_known", "sum"),
        ideal=("ideal", "sum"),
        uncached_tokens_per_request=("uncached", "mean"),
        redundant_prefill_per_request=("redundant", "mean"),
        ttft_p50=("ttft", "median"),
    ).reset_index()
    out["engine"] = out["engine"].astype(str)
    out["hit_rate"] = out["cached"] / out["cached_known"].where(out["cached_known"] > 0)
    out["ideal_hit_rate"] = out["ideal"] / out["prompt"].where(out["prompt"] > 0)
    return out


def _by_edges(
    run: Run, window: Window | None, column: str, edges: Sequence[float], unit: str
) -> pd.DataFrame:
    df = _served_frame(run, resolve_window(run, window))
    labels = bucket_labels(edges, unit)
    idx = np.clip(
        np.searchsorted(np.asarray(edges), df[column].to_numpy(float), "right") - 1, 0, None
    )
    df = df.assign(_b=idx)
    out = _aggregate(df, "_b")
    out["bucket"] = [labels[int(i)] for i in out["_b"]]
    out["lo"] = [edges[int(i)] for i in out["_b"]]
    out["hi"] = [edges[int(i) + 1] for i in out["_b"]]
    return out[list(ROLLUP_COLUMNS)]


def by_turn_depth(run: Run, window: Window | None = None) -> pd.DataFrame:
    """Buckets of the request's index inside its trajectory (0, 1, 2–3, 4–7, ...)."""
    return _by_edges(run, window, "turn", TURN_EDGES, "")


def by_tool_gap(run: Run, window: Window | None = None) -> pd.DataFrame:
    """Buckets of the (capped) idle time the session waited before the request, in seconds:
    how the hit rate decays with the tool call's duration."""
    return _by_edges(run, window, "tool_gap_s", GAP_EDGES, "s")


def by_prompt_length(run: Run, window: Window | None = None) -> pd.DataFrame:
    """Buckets of prompt tokens (< 8K, 8K–16K, ... ≥ 128K)."""
    return _by_edges(run, window, "prompt", PROMPT_EDGES, "tok")


def by_session(run: Run, window: Window | None = None) -> pd.DataFrame:
    """One row per engine and session slot."""
    df = _served_frame(run, resolve_window(run, window))
    out = _aggregate(df, "session")
    out["bucket"] = [f"session {int(s)}" for s in out["session"]]
    out["lo"] = out["session"]
    out["hi"] = out["session"] + 1
    return out[list(ROLLUP_COLUMNS)]


ROLLUPS = {
    "turn_depth": by_turn_depth,
    "tool_gap": by_tool_gap,
    "prompt_length": by_prompt_length,
    "session": by_session,
}

__all__ = [
    "ROLLUPS",
    "ROLLUP_COLUMNS",
    "bucket_labels",
    "by_prompt_length",
    "by_session",
    "by_tool_gap",
    "by_turn_depth",
]
