"""Replay fidelity: how far a live replay drifted from the trace, and whether the engine's
cache was warm before the run started.

**Drift** (live runs; the client records what the trace said beside what happened), over
the requests scheduled in the window that finished ``ok``:

- output: the live output length against the trace's (``expected_output_tokens``); with
  ``ignore_eos`` and ``max_tokens`` = the trace's they match, so every mismatch is an
  engine that stopped early or ran on;
- prompt: the live prompt length against the trace's ``in`` (``trace_prompt_tokens``);
  token-id prompts match by construction, a text endpoint counts its own tokens;
- continuation: the share of turns that the trace continues (not a context edit) whose
  prompt extends the actual prompt + output of the turn it continues exactly (its lineage
  predecessor, ``replay.traces.lineage``: the previous turn except after a side call;
  ``extends_previous``).

A run drifts when more than 1% of requests mismatch (`DRIFT_FLAG`) or fewer than 99% of
continuation turns extend exactly. aiperf found cloned traces inflating hit rates (its issue
1106); a drifted replay inflates or deflates them the same way, silently.

**Warm start**: the hit rate over the run's first minutes (`WARM_START_S`, or up to the
window's start if earlier; priming requests included), and the part of it no earlier request
of the run can explain: Σ max(cached − ideal, 0) ÷ Σ prompt tokens, where ideal is the
longest prefix this run had already computed. A cold cache cannot hit beyond the ideal, so
an excess above 1% means prefixes were cached before the run (vLLM users report TTFT up to
49× lower on a repeated run, vllm issues 54227 and 52884).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.manifest import Window

DRIFT_FLAG = 0.01
WARM_START_S = 180.0
WARM_EXCESS_FLAG = 0.01


def _num(df: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def drift(df: pd.DataFrame, window: Window) -> dict[str, Any]:
    """Drift counts for one engine's records (all rows); see the module docstring."""
    sched = _num(df, "scheduled_s")
    rows = df[(sched >= window.start_s) & (sched < window.end_s) & (df["status"] == "ok")]
    out, exp = _num(rows, "output_tokens"), _num(rows, "expected_output_tokens")
    known = np.isfinite(exp) & (exp > 0)
    out_mis = known & (out != exp)
    prompt, trace_in = _num(rows, "prompt_tokens"), _num(rows, "trace_prompt_tokens")
    pknown = np.isfinite(trace_in)
    p_mis = pknown & (prompt != trace_in)
    ext = rows["extends_previous"]
    ext_known = ext.notna().to_numpy()
    ext_true = ext[ext_known].astype(bool).to_numpy()
    n_out, n_p, n_ext = int(known.sum()), int(pknown.sum()), int(ext_known.sum())
    result: dict[str, Any] = {
        "requests": len(rows),
        "output_compared": n_out,
        "output_mismatches": int(out_mis.sum()),
        "output_mismatch_share": out_mis.sum() / n_out if n_out else math.nan,
        "output_delta_mean": float((out - exp)[known].mean()) if n_out else math.nan,
        "prompt_compared": n_p,
        "prompt_mismatches": int(p_mis.sum()),
        "prompt_mismatch_share": p_mis.sum() / n_p if n_p else math.nan,
        "prompt_delta_mean": float((prompt - trace_in)[pknown].mean()) if n_p else math.nan,
        "continuation_turns": n_ext,
        "continuation_exact": int(ext_true.sum()),
        "continuation_exact_share": float(ext_true.mean()) if n_ext else math.nan,
    }
    reasons = []
    if n_out and result["output_mismatch_share"] > DRIFT_FLAG:
        reasons.append(
            f"{result['output_mismatches']} of {n_out} outputs differ in length from the trace"
        )
    if n_p and result["prompt_mismatch_share"] > DRIFT_FLAG:
        reasons.append(f"{result['prompt_mismatches']} of {n_p} prompts differ from the trace's")
    if n_ext and result["continuation_exact_share"] < 1 - DRIFT_FLAG:
        miss = n_ext - result["continuation_exact"]
        reasons.append(
            f"{miss} of {n_ext} continuation turns do not extend the turn they continue exactly"
        )
    result["flagged"] = bool(reasons)
    result["reasons"] = reasons
    if not (n_out or n_p or n_ext):
        result["flagged"] = None
        result["reason"] = "the records carry no trace lengths to compare"
    return {k: (float(v) if isinstance(v, np.floating) else v) for k, v in result.items()}


def warm_start(df: pd.DataFrame, window: Window) -> dict[str, Any]:
    """Hit rate and unexplained hits over the run's first minutes (see the module docstring)."""
    span = WARM_START_S if window.start_s <= 0 else min(WARM_START_S, window.start_s)
    first = _num(df, "first_token_s")
    rows = df[(first >= 0) & (first < span) & (df["status"] == "ok")]
    prompt = _num(rows, "prompt_tokens")
    cached = _num(rows, "cached_tokens")
    ideal = _num(rows, "ideal_cached_tokens")
    has = np.isfinite(cached)
    total = float(prompt[has].sum())
    excess = float(np.clip(cached[has] - np.nan_to_num(ideal[has]), 0, None).sum())
    hit = float(cached[has].sum()) / total if total > 0 else math.nan
    ex = excess / total if total > 0 else math.nan
    return {
        "warm_start_s": span,
        "warm_start_requests": int(has.sum()),
        "warm_start_hit_rate": hit,
        "warm_start_excess_hit_rate": ex,
        "warm_start_flagged": bool(math.isfinite(ex) and ex > WARM_EXCESS_FLAG),
    }


__all__ = ["DRIFT_FLAG", "WARM_EXCESS_FLAG", "WARM_START_S", "drift", "warm_start"]
