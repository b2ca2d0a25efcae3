"""What a user paid: per request, per session, per finished trajectory.

Token counts are integers, so sums over any grouping are exact; each group's dollars are then
computed once in `Decimal` (`bill`), so a session's total never carries float drift. The
per-request array (`request_costs`) is float, for charts and per-row columns; sum the token
counts and call `bill` when the total is what gets shown.

A request's prompt splits into `cached` tokens (read from cache, billed at `cached`) and
`prompt − cached` uncached tokens, of which the share `write_fraction` (default 1: all) is
billed at the sheet's cache-write price and the rest at `input`. Output is billed at `output`.
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


def bill(
    sheet: PriceSheet,
    prompt_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    write_fraction: Number = 1,
) -> Bill:
    """The exact charge (USD) for `prompt_tokens` prompt tokens of which `cached_tokens` were
    cache hits, plus `output_tokens` generated tokens: one request or any sum of requests."""
    prompt, cached, output = int(prompt_tokens), int(cached_tokens), int(output_tokens)
    _check_counts(prompt, cached, output)
    w = _fraction(write_fraction, "write_fraction")
    uncached = Decimal(prompt - cached)
    return Bill(
        prompt_tokens=prompt,
        cached_tokens=cached,
        output_tokens=output,
        uncached_input_usd=uncached * sheet.input / MILLION,
        cache_write_premium_usd=uncached * w * (sheet.write_price - sheet.input) / MILLION,
        cached_input_usd=cached * sheet.cached / MILLION,
        output_usd=output * sheet.output / MILLION,
    )


def request_costs(
    sheet: PriceSheet,
    prompt_tokens: npt.ArrayLike,
    cached_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    write_fraction: Number = 1,
) -> npt.NDArray[np.float64]:
    """USD per request, vectorised over arrays of token counts (floats: use `bill` on summed
    counts for totals that are displayed). Raises `PricingError` on negative or NaN counts
    or cached > prompt, naming the first bad position."""
    p = np.asarray(prompt_tokens, dtype=np.float64)
    c = np.asarray(cached_tokens, dtype=np.float64)
    o = np.asarray(output_tokens, dtype=np.float64)
    for name, arr in (("prompt_tokens", p), ("cached_tokens", c), ("output_tokens", o)):
        bad = ~np.isfinite(arr) | (arr < 0)
        if bad.any():
            i = int(np.flatnonzero(bad.ravel())[0])
            raise PricingError(f"{name}[{i}] must be a count ≥ 0, got {arr.ravel()[i]}")
    over = c > p
    if over.any():
        i = int(np.flatnonzero(over.ravel())[0])
        raise PricingError(f"cached_tokens[{i}] ({c.ravel()[i]:g}) exceeds prompt_tokens")
    a = float(uncached_price(sheet, write_fraction))
    out: npt.NDArray[np.float64] = (
        (p - c) * a + c * float(sheet.cached) + o * float(sheet.output)
    ) / 1e6
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
    return frame


def bills_by(
    frame: pd.DataFrame,
    sheet: PriceSheet,
    by: str | Sequence[str],
    write_fraction: Number = 1,
) -> pd.DataFrame:
    """One row per group of `by` with summed token counts (exact integers) and dollars.

    Columns: `requests`, the three token sums, `hit_rate`, `uncached_input_usd`,
    `cache_write_premium_usd`, `cached_input_usd`, `output_usd`, `total_usd`. Dollars are
    each group's exact `bill` converted to float at the end (display precision is the
    caller's). The frame needs `prompt_tokens`, `cached_tokens`, `output_tokens` without
    nulls; which rows to bill (e.g. status ok, not priming) is the caller's choice.
    """
    keys = [by] if isinstance(by, str) else list(by)
    absent = [k for k in keys if k not in frame.columns]
    if absent:
        raise PricingError(f"request frame lacks grouping column(s) {', '.join(absent)}")
    _token_frame(frame)
    sums = frame.groupby(keys, sort=True, dropna=False)[list(TOKEN_COLUMNS)].sum()
    counts = frame.groupby(keys, sort=True, dropna=False).size()
    rows: list[dict[str, Any]] = []
    # Both groupbys sort by the same keys, so their rows line up.
    for (_, tokens), n in zip(sums.iterrows(), counts.to_numpy(), strict=True):
        p, c, o = (int(tokens[col]) for col in TOKEN_COLUMNS)
        b = bill(sheet, p, c, o, write_fraction)
        rows.append(
            {
                "requests": int(n),
                "prompt_tokens": b.prompt_tokens,
                "cached_tokens": b.cached_tokens,
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
