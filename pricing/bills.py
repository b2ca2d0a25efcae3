"""What a user paid: per request, per session, per finished trajectory.

Token counts are integers, so sums over any grouping are exact; each group's dollars are then
computed once in `Decimal` (`bill`), so a session's total never carries float drift. The
per-request array (`request_costs`) is float, for charts and per-row columns; sum the token
counts and call `bill` when the total is what gets shown.

A request's prompt splits into `cached` tokens (read from cache, billed at `cached`) and
`prompt − cached` uncached tokens, of which the share `write_fraction` (default 1: all) is
billed at the sheet's cache-write price and the rest at `input`. Output is billed at `output`.

Cached tokens by tier (issue 34 point 4): of the cached tokens, those host memory served
(`cached_tokens_host`) are billed at the sheet's `cached_host` price and those an external
store served (`cached_tokens_external`) at `cached_external`, each the sheet's `cached` where
it gives none; the GPU's share (cached − host − external) at `cached`. A frame without the
tier columns (an untiered run) bills every cached token at `cached`, as before.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pricing.formulas import MILLION, Number, _fraction, uncached_price
from pricing.sheets import PriceSheet, PricingError

TOKEN_COLUMNS = ("prompt_tokens", "cached_tokens", "output_tokens")
# The records' cached tokens by tier (null: an engine whose cache has no tiers, read as 0).
TIER_COLUMNS = ("cached_tokens_host", "cached_tokens_external")


@dataclass(frozen=True)
class Bill:
    """A user's charge for some requests, in exact US dollars, split by what was billed."""

    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    uncached_input_usd: Decimal  # uncached prompt tokens at the base input price
    cache_write_premium_usd: Decimal  # the extra paid for tokens written to cache (≥ 0 usually)
    cached_input_usd: Decimal  # cached prompt tokens at the cached price
    output_usd: Decimal  # generated tokens at the output price
    cached_tokens_host: int = 0  # of the cached tokens, those host memory served
    cached_tokens_external: int = 0  # ... and those an external store served

    @property
    def input_usd(self) -> Decimal:
        """Everything billed for prompt tokens."""
        return self.uncached_input_usd + self.cache_write_premium_usd + self.cached_input_usd

    @property
    def total_usd(self) -> Decimal:
        return self.input_usd + self.output_usd

    @property
    def hit_rate(self) -> Decimal | None:
        """cached ÷ prompt tokens, or None with no prompt tokens."""
        return None if self.prompt_tokens == 0 else Decimal(self.cached_tokens) / self.prompt_tokens


def _check_counts(prompt: int, cached: int, output: int) -> None:
    if min(prompt, cached, output) < 0:
        raise PricingError(
            f"token counts must be ≥ 0, got prompt={prompt}, cached={cached}, output={output}"
        )
    if cached > prompt:
        raise PricingError(f"cached_tokens ({cached}) exceeds prompt_tokens ({prompt})")


def _check_tiers(cached: int, host: int, external: int) -> None:
    if min(host, external) < 0:
        raise PricingError(
            f"cached tokens by tier must be ≥ 0, got host={host}, external={external}"
        )
    if host + external > cached:
        raise PricingError(
            f"cached_tokens_host + cached_tokens_external ({host + external}) exceeds "
            f"cached_tokens ({cached})"
        )


def bill(
    sheet: PriceSheet,
    prompt_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    write_fraction: Number = 1,
    cached_tokens_host: int = 0,
    cached_tokens_external: int = 0,
) -> Bill:
    """The exact charge (USD) for `prompt_tokens` prompt tokens of which `cached_tokens` were
    cache hits (`cached_tokens_host` of them from host memory, `cached_tokens_external` from
    an external store, each at its tier's price), plus `output_tokens` generated tokens: one
    request or any sum of requests."""
    prompt, cached, output = int(prompt_tokens), int(cached_tokens), int(output_tokens)
    host, external = int(cached_tokens_host), int(cached_tokens_external)
    _check_counts(prompt, cached, output)
    _check_tiers(cached, host, external)
    w = _fraction(write_fraction, "write_fraction")
    uncached = Decimal(prompt - cached)
    gpu = Decimal(cached - host - external)
    cached_usd = gpu * sheet.cached + host * sheet.host_cached_price
    cached_usd += external * sheet.external_cached_price
    return Bill(
        prompt_tokens=prompt,
        cached_tokens=cached,
        output_tokens=output,
        uncached_input_usd=uncached * sheet.input / MILLION,
        cache_write_premium_usd=uncached * w * (sheet.write_price - sheet.input) / MILLION,
        cached_input_usd=cached_usd / MILLION,
        output_usd=output * sheet.output / MILLION,
        cached_tokens_host=host,
        cached_tokens_external=external,
    )


def request_costs(
    sheet: PriceSheet,
    prompt_tokens: npt.ArrayLike,
    cached_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    write_fraction: Number = 1,
    cached_tokens_host: npt.ArrayLike = 0,
    cached_tokens_external: npt.ArrayLike = 0,
) -> npt.NDArray[np.float64]:
    """USD per request, vectorised over arrays of token counts (floats: use `bill` on summed
    counts for totals that are displayed); cached tokens by tier at their tier's price.
    Raises `PricingError` on negative or NaN counts, cached > prompt or host + external >
    cached, naming the first bad position."""
    p = np.asarray(prompt_tokens, dtype=np.float64)
    c = np.asarray(cached_tokens, dtype=np.float64)
    o = np.asarray(output_tokens, dtype=np.float64)
    h = np.asarray(cached_tokens_host, dtype=np.float64)
    e = np.asarray(cached_tokens_external, dtype=np.float64)
    named = (
        ("prompt_tokens", p),
        ("cached_tokens", c),
        ("output_tokens", o),
        ("cached_tokens_host", h),
        ("cached_tokens_external", e),
    )
    for name, arr in named:
        bad = ~np.isfinite(arr) | (arr < 0)
        if bad.any():
            i = int(np.flatnonzero(bad.ravel())[0])
            raise PricingError(f"{name}[{i}] must be a count ≥ 0, got {arr.ravel()[i]}")
    over = c > p
    if over.any():
        i = int(np.flatnonzero(over.ravel())[0])
        raise PricingError(f"cached_tokens[{i}] ({c.ravel()[i]:g}) exceeds prompt_tokens")
    p, c, o, h, e = np.broadcast_arrays(p, c, o, h, e)
    tiers = h + e > c
    if tiers.any():
        i = int(np.flatnonzero(tiers.ravel())[0])
        raise PricingError(
            f"cached_tokens_host[{i}] + cached_tokens_external[{i}] exceeds cached_tokens"
        )
    a = float(uncached_price(sheet, write_fraction))
    cached = (c - h - e) * float(sheet.cached) + h * float(sheet.host_cached_price)
    cached += e * float(sheet.external_cached_price)
    out: npt.NDArray[np.float64] = ((p - c) * a + cached + o * float(sheet.output)) / 1e6
    return out


def _token_frame(frame: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in TOKEN_COLUMNS if c not in frame.columns]
    if missing:
        raise PricingError(f"request frame lacks column(s) {', '.join(missing)}")
    for col in TOKEN_COLUMNS:
        nulls = int(frame[col].isna().sum())
        if nulls:
            raise PricingError(
                f"column '{col}' has {nulls} null value(s); fill them before pricing "
                "(e.g. 0 cached tokens for an engine that reports none)"
            )
        negative = frame.index[frame[col] < 0]
        if len(negative):
            raise PricingError(f"column '{col}' is negative in row {negative[0]}")
    # Checked per row: in a group sum, one bad row could hide behind the others.
    over = frame.index[frame["cached_tokens"] > frame["prompt_tokens"]]
    if len(over):
        row = frame.loc[over[0]]
        raise PricingError(
            f"row {over[0]}: cached_tokens ({row['cached_tokens']}) exceeds prompt_tokens "
            f"({row['prompt_tokens']})"
        )
    tiers = [c for c in TIER_COLUMNS if c in frame.columns]
    if not tiers:
        return frame
    # An engine without tiers has null tier columns beside a tiered one's: none from a tier.
    frame = frame.assign(**{c: frame[c].fillna(0) for c in tiers})
    for col in tiers:
        negative = frame.index[frame[col] < 0]
        if len(negative):
            raise PricingError(f"column '{col}' is negative in row {negative[0]}")
    over = frame.index[frame[tiers].sum(axis=1) > frame["cached_tokens"]]
    if len(over):
        raise PricingError(f"row {over[0]}: cached tokens by tier exceed cached_tokens")
    return frame


def bills_by(
    frame: pd.DataFrame,
    sheet: PriceSheet,
    by: str | Sequence[str],
    write_fraction: Number = 1,
) -> pd.DataFrame:
    """One row per group of `by` with summed token counts (exact integers) and dollars.

    Columns: `requests`, the three token sums (and the cached tokens by tier where the frame
    has `TIER_COLUMNS`, each tier billed at its price), `hit_rate`, `uncached_input_usd`,
    `cache_write_premium_usd`, `cached_input_usd`, `output_usd`, `total_usd`. Dollars are
    each group's exact `bill` converted to float at the end (display precision is the
    caller's). The frame needs `prompt_tokens`, `cached_tokens`, `output_tokens` without
    nulls; which rows to bill (e.g. status ok, not priming) is the caller's choice.
    """
    keys = [by] if isinstance(by, str) else list(by)
    absent = [k for k in keys if k not in frame.columns]
    if absent:
        raise PricingError(f"request frame lacks grouping column(s) {', '.join(absent)}")
    frame = _token_frame(frame)
    tiers = [c for c in TIER_COLUMNS if c in frame.columns]
    sums = frame.groupby(keys, sort=True, dropna=False)[[*TOKEN_COLUMNS, *tiers]].sum()
    counts = frame.groupby(keys, sort=True, dropna=False).size()
    rows: list[dict[str, Any]] = []
    # Both groupbys sort by the same keys, so their rows line up.
    for (_, tokens), n in zip(sums.iterrows(), counts.to_numpy(), strict=True):
        p, c, o = (int(tokens[col]) for col in TOKEN_COLUMNS)
        h, e = (int(tokens[col]) if col in tiers else 0 for col in TIER_COLUMNS)
        b = bill(sheet, p, c, o, write_fraction, h, e)
        by_tier = {col: int(tokens[col]) for col in tiers}
        rows.append(
            {
                "requests": int(n),
                "prompt_tokens": b.prompt_tokens,
                "cached_tokens": b.cached_tokens,
                **by_tier,
                "output_tokens": b.output_tokens,
                "hit_rate": None if b.hit_rate is None else float(b.hit_rate),
                "uncached_input_usd": float(b.uncached_input_usd),
                "cache_write_premium_usd": float(b.cache_write_premium_usd),
                "cached_input_usd": float(b.cached_input_usd),
                "output_usd": float(b.output_usd),
                "total_usd": float(b.total_usd),
            }
        )
    return pd.DataFrame(rows, index=sums.index).reset_index()


def session_bills(
    frame: pd.DataFrame, sheet: PriceSheet, write_fraction: Number = 1
) -> pd.DataFrame:
    """What each replay session paid: `bills_by` over (engine, session), or session alone
    when the frame has no engine column."""
    keys = ["engine", "session"] if "engine" in frame.columns else ["session"]
    return bills_by(frame, sheet, keys, write_fraction)


def trajectory_bills(
    frame: pd.DataFrame,
    sheet: PriceSheet,
    finished: Collection[Hashable] | None = None,
    write_fraction: Number = 1,
) -> pd.DataFrame:
    """What each trajectory run paid, its subagents included (their rows carry the parent's
    trajectory id): `bills_by` over (engine, session, trajectory), dropping `engine` when
    the frame lacks it. `finished`, when given, keeps only those trajectories: trajectory ids,
    or key tuples matching the grouping columns, e.g. ("vllm", 3, "traj-17")."""
    keys = [k for k in ("engine", "session", "trajectory") if k in frame.columns]
    if "trajectory" not in keys:
        raise PricingError("request frame lacks column 'trajectory'")
    out = bills_by(frame, sheet, keys, write_fraction)
    if finished is None:
        return out
    wanted = set(finished)
    if all(not isinstance(k, tuple) for k in wanted):
        mask = out["trajectory"].isin(list(wanted))
    else:
        mask = pd.Series([tuple(r) in wanted for r in out[keys].itertuples(index=False)])
    return out[mask.to_numpy()].reset_index(drop=True)


__all__ = [
    "Bill",
    "bill",
    "bills_by",
    "request_costs",
    "session_bills",
    "trajectory_bills",
]
