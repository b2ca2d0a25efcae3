"""Claimed cache hits checked against time: a reported hit whose TTFT says the prefill was done.

An engine's `cached_tokens` is its own word. A prompt whose prefix really came from the cache
skips that prefix's prefill, and the time to first token shows it; an engine that reports a
hit while computing the whole prompt anyway (a broken counter, a cache that is looked up but
not used) has the TTFT of a miss. The public cache-pressure tool gates each claimed hit on its
TTFT against the session's warm baseline; this module does the same with the engine's prefill
rate measured from the run's own records.

The rule, per engine, over every request that finished ok with a first token (the whole run,
priming included: a claim is a claim wherever it falls) and met a clear queue:

0. **A clear queue.** A request's TTFT holds its wait behind the requests sent before it that
   had no first token yet (their prefills go first), which the time alone cannot tell from
   its own prefill: in the embedded default's emulated run, 12–16% of the hits an honest
   engine model reported had waits above half their claimed saving, and were flagged. So
   only the requests sent while no earlier request of the run to that engine (replica)
   awaited its first token are fitted, baselined and judged (`clear_queue`). What the
   client cannot see stays: an engine recomputing a preempted request, another client's
   traffic.
1. **Prefill cost.** The requests that claim at most half their prompt cached (primings,
   first turns, context edits: a lie there could hide little; primings left out where
   enough others remain, as they queue together at the start) fit the engine's prefill
   cost of prompt tokens `c..p`: `d·(p − c) + e·(p² − c²)/2` (a cost per token, and one
   per token and position for the attention over the context before it: the step clock's
   own form, `replay.sim.engine.clock`), plus a constant, by least squares refitted once without
   the points more than 3 robust sigmas off (queueing spikes); where a term comes out
   negative, the Theil–Sen slope (median of pairwise slopes) of TTFT against `p − c`.
   Fewer than `MIN_FIT` such requests, or no positive cost: not assessed.
2. **Warm baseline.** A request's residual is `TTFT − cost(c, p)`: its time beyond the prefill its
   claim leaves (queueing, the first decode step). The session's warm baseline is the median
   residual of its warm requests (those claiming more than half their prompt cached; the
   engine's where the session has fewer than `MIN_SESSION`). A median: a minority of lies
   does not move it.
3. **Expected TTFTs.** If the claimed tokens were reused: `baseline + cost(c, p)`; if the
   prefill was redone: `baseline + cost(0, p)`. They differ by the claimed saving.
4. **Flag.** A warm request (a claimed hit of more than half its prompt; smaller claims
   feed the fit and are not judged) is assessed when its claimed saving is at least
   `SIGMAS` times the engine's residual noise (1.4826 × the median absolute deviation of
   the warm requests' residuals from their baselines) and at least `MIN_SAVING_S`; it is a
   `false_hit` when its TTFT lies nearer the full prefill than the hit (above the midpoint
   of the two expectations). Smaller savings are not judged: the clock cannot tell them
   from noise.

A saturated engine leaves few requests a clear queue, so few are judged (`assessed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

MIN_FIT = 4  # requests that claim ≤ half their prompt cached, for the prefill rate
FIT_CACHED_SHARE = 0.5  # ... "at most half"
MIN_SESSION = 5  # requests a session needs for its own baseline
SIGMAS = 4.0  # a claimed saving must stand this many noise sigmas above zero to be judged
MIN_SAVING_S = 0.005  # ... and this many seconds (the records' clock resolution, with margin)
MAX_FIT_POINTS = 400  # Theil–Sen is quadratic: an even subsample beyond this

RULE = (
    "requests sent while no earlier one awaited its first token only; prefill cost "
    "d·(p−c) + e·(p²−c²)/2 fitted on those claiming ≤ half their prompt cached; the "
    "session's median warm residual as its baseline; a claimed hit whose saving is ≥ 4 noise "
    "sigmas is false when its TTFT is nearer the full prefill"
)


@dataclass(frozen=True)
class ClaimedHits:
    """One engine's check: per request (`flags`, aligned with the frame it was given) and the
    evidence summary.json stores."""

    flags: pd.DataFrame  # expected_hit_s, expected_full_s, assessed, false_hit
    evidence: dict[str, Any]

    @property
    def false_hits(self) -> int | None:
        n = self.evidence.get("false_hits")
        return int(n) if n is not None else None


def theil_sen_slope(x: np.ndarray, y: np.ndarray) -> float:
    """The median of the pairwise slopes (pairs with distinct x); NaN when there is none."""
    if len(x) > MAX_FIT_POINTS:
        keep = np.linspace(0, len(x) - 1, MAX_FIT_POINTS).astype(int)
        x, y = x[keep], y[keep]
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    ok = dx != 0
    if not ok.any():
        return math.nan
    return float(np.median((y[j] - y[i])[ok] / dx[ok]))


def _blank_flags(index: pd.Index) -> pd.DataFrame:
    """Flags for requests the check did not judge (failed, no first token, no claim)."""
    blank = {"expected_hit_s": np.nan, "expected_full_s": np.nan, "assessed": False}
    return pd.DataFrame({**blank, "false_hit": False}, index=index)


def _not_assessed(df: pd.DataFrame, why: str, claimed: int) -> ClaimedHits:
    flags = _blank_flags(df.index)
    evidence = {"false_hits": None, "claimed_hits": claimed, "assessed": 0, "reason": why}
    return ClaimedHits(flags, evidence)


@dataclass(frozen=True)
class PrefillCost:
    """Seconds to compute prompt tokens `c..p` (the first `c` cached): `d` per token plus
    `e` per token and position, the attention over everything before it."""

    d: float
    e: float

    def __call__(self, cached: np.ndarray, prompt: np.ndarray) -> np.ndarray:
        return self.d * (prompt - cached) + self.e * (prompt**2 - cached**2) / 2


def fit_prefill(cached: np.ndarray, prompt: np.ndarray, ttft: np.ndarray) -> PrefillCost | None:
    """`ttft ≈ a + cost(cached, prompt)` by least squares, refitted once without the points
    more than 3 robust sigmas off (queueing spikes); the linear Theil–Sen slope where the
    two-term fit gives a negative term; None where TTFT does not grow with the prompt."""
    u, q = prompt - cached, (prompt**2 - cached**2) / 2
    keep = np.ones(len(u), dtype=bool)
    coef = np.zeros(3)
    for _ in range(2):
        x = np.column_stack([np.ones(int(keep.sum())), u[keep], q[keep] * 1e-6])
        coef = np.linalg.lstsq(x, ttft[keep], rcond=None)[0]
        resid = ttft - (coef[0] + coef[1] * u + coef[2] * q * 1e-6)
        mad = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
        keep = np.abs(resid - np.median(resid)) <= 3 * mad if mad > 0 else keep
        if keep.sum() < MIN_FIT:
            break
    if coef[1] >= 0 and coef[2] >= 0 and coef[1] + coef[2] > 0:
        return PrefillCost(float(coef[1]), float(coef[2]) * 1e-6)
    b = theil_sen_slope(u, ttft)
    return PrefillCost(b, 0.0) if b > 0 else None


def check_engine(df: pd.DataFrame, clear_only: bool = True) -> ClaimedHits:
    """The check for one engine's request records (columns `session`, `sent_s`,
    `first_token_s`, `prompt_tokens`, `cached_tokens`, `status`). `clear_only=False` drops
    rule 0 (every request fitted and judged: the rule before it, for the experiment that
    measured it, experiments/claimed_hits_queue.py)."""
    ok = (df["status"].fillna("ok") == "ok") & df["first_token_s"].notna() & df["sent_s"].notna()
    if df.loc[ok, "cached_tokens"].isna().all():
        return _not_assessed(df, "no request that finished reported cached tokens", 0)
    # No count reported claims nothing (vLLM leaves the details out of a cold prompt's usage).
    claimed = int((df.loc[ok, "cached_tokens"].fillna(0) > 0).sum())
    d = df[ok & clear_queue(df)] if clear_only else df[ok]
    if d.empty:
        why = "no request was sent while the engine had no earlier request waiting"
        return _not_assessed(df, why, claimed)
    prompt = d["prompt_tokens"].to_numpy(float)
    cached = d["cached_tokens"].fillna(0).to_numpy(float)
    ttft = (d["first_token_s"] - d["sent_s"]).to_numpy(float)
    fit = cached <= FIT_CACHED_SHARE * prompt
    if "priming" in d.columns:
        # The sessions' warm-up requests go out together at the start and queue behind each
        # other: their TTFTs measure the queue. Left out of the fit where enough remain.
        steady = fit & ~d["priming"].fillna(False).to_numpy(bool)
        fit = steady if steady.sum() >= MIN_FIT else fit
    if fit.sum() < MIN_FIT:
        why = (
            f"{int(fit.sum())} requests claim at most half their prompt cached; the prefill "
            f"rate needs {MIN_FIT}"
        )
        return _not_assessed(df, why, claimed)
    if len(np.unique(prompt[fit] - cached[fit])) < MIN_FIT - 1:
        why = "the requests that claim at most half their prompt cached are all one size"
        return _not_assessed(df, why, claimed)
    cost = fit_prefill(cached[fit], prompt[fit], ttft[fit])
    if cost is None:
        return _not_assessed(df, "TTFT does not grow with computed tokens", claimed)
    as_hit, as_full = cost(cached, prompt), cost(np.zeros_like(prompt), prompt)
    resid = ttft - as_hit
    warm = ~fit
    base = _warm_baselines(d["session"].to_numpy(), resid, warm)
    noise = 1.4826 * float(np.median(np.abs(resid[warm] - base[warm]))) if warm.any() else 0.0
    saving = as_full - as_hit
    floor = max(SIGMAS * noise, MIN_SAVING_S)
    assessed = warm & (saving >= floor)
    false_hit = assessed & (resid - base > saving / 2)
    flags = _blank_flags(df.index)
    flags.loc[d.index, "expected_hit_s"] = base + as_hit
    flags.loc[d.index, "expected_full_s"] = base + as_full
    flags.loc[d.index, "assessed"] = assessed
    flags.loc[d.index, "false_hit"] = false_hit
    evidence = {
        "false_hits": int(false_hit.sum()),
        "claimed_hits": claimed,
        "assessed": int(assessed.sum()),
        "flagged": bool(false_hit.any()),
        "prefill_s_per_token": cost.d,
        "prefill_s_per_token_position": cost.e,
        "fit_requests": int(fit.sum()),
        "clear_queue_requests": len(d),
        "noise_s": noise,
        "min_saving_s": floor,
        "rule": RULE,
    }
    return ClaimedHits(flags, evidence)


def clear_queue(df: pd.DataFrame) -> pd.Series:
    """Per request: sent while no request sent before it to the same engine (and replica,
    where the records name one) was still waiting for its first token. A request with no
    first token waits until it ended (`done_s`), or for ever where neither is known; requests
    sent at the same instant count as ahead of each other."""
    sent = df["sent_s"].to_numpy(float)
    until = df["first_token_s"].to_numpy(float)
    if "done_s" in df.columns:
        until = np.where(np.isnan(until), df["done_s"].to_numpy(float), until)
    until = np.where(np.isnan(until), np.inf, until)
    keys = [df["engine"]] if "engine" in df.columns else []
    if "replica" in df.columns:
        keys.append(df["replica"].astype("string").fillna(""))
    groups = (
        pd.Series(0, index=df.index).groupby(keys, sort=False).indices.values()
        if keys
        else [np.arange(len(df))]
    )
    clear = np.zeros(len(df), dtype=bool)
    for rows in groups:
        rows = np.asarray(rows)
        known = rows[~np.isnan(sent[rows])]
        order = known[np.argsort(sent[known], kind="stable")]
        s, u = sent[order], until[order]
        # The latest wait among the requests sent before each one (ties: at or before).
        ahead = np.maximum.accumulate(np.concatenate([[-np.inf], u[:-1]])) if len(u) else u
        tie = np.zeros(len(s), dtype=bool)
        tie[1:] |= s[1:] == s[:-1]
        tie[:-1] |= s[:-1] == s[1:]
        clear[order] = (ahead <= s) & ~tie
    return pd.Series(clear, index=df.index)


def _warm_baselines(sessions: np.ndarray, resid: np.ndarray, warm: np.ndarray) -> np.ndarray:
    """Each request's warm baseline: the median residual of its session's warm requests
    (claiming more than half their prompt cached), the engine's where the session has fewer
    than `MIN_SESSION`, and 0 where the engine has none."""
    engine = float(np.median(resid[warm])) if warm.any() else 0.0
    base = np.full(len(resid), engine)
    for s in np.unique(sessions):
        mine = (sessions == s) & warm
        if mine.sum() >= MIN_SESSION:
            base[sessions == s] = float(np.median(resid[mine]))
    return base


__all__ = [
    "RULE",
    "ClaimedHits",
    "PrefillCost",
    "check_engine",
    "clear_queue",
    "fit_prefill",
    "theil_sen_slope",
]
