"""Pricing over analysis' metrics: per-engine profit and user cost for the pages.

The arithmetic is `pricing.formulas.provider_economics` (exact Decimal); this module only
maps a metrics table (one row per engine, per-GPU token rates and hit rate) onto it, builds
the what-if sheets the sliders describe, and turns results into floats for display.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd

from pricing.formulas import dec, provider_economics, user_cost_per_m_input
from pricing.sheets import PriceSheet

PRICE_COLUMNS = (
    "user_cost_per_m_input",
    "revenue_per_gpu_hour",
    "profit_per_gpu_hour",
    "break_even_gpu_rate",
)


def _finite(value: object) -> float | None:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def sheet_with(
    sheet: PriceSheet,
    *,
    input_price: float | None = None,
    output_price: float | None = None,
    cached_discount: float | None = None,
) -> PriceSheet:
    """`sheet` with the sliders' prices: input and output per 1M tokens, and the cached price
    set as `input × (1 − discount)`. A cache-write premium keeps its ratio to the input price."""
    update: dict[str, Decimal] = {}
    new_input = sheet.input if input_price is None else dec(input_price, "input price")
    if input_price is not None:
        update["input"] = new_input
        if sheet.cache_write is not None:
            update["cache_write"] = new_input * sheet.write_multiplier
    if output_price is not None:
        update["output"] = dec(output_price, "output price")
    if cached_discount is not None:
        update["cached"] = new_input * (1 - dec(cached_discount, "cached discount"))
    elif input_price is not None:
        update["cached"] = new_input * (1 - sheet.cached_discount)
    return sheet.model_copy(update=update)


def price_engines(metrics: pd.DataFrame, sheet: PriceSheet, gpu_rate: float) -> pd.DataFrame:
    """`metrics` (analysis' window metrics, one row per engine) with `PRICE_COLUMNS` added as
    floats; NaN for an engine with nothing measured yet (no hit rate or token rate)."""
    out = metrics.copy()
    cols: dict[str, list[float]] = {c: [] for c in PRICE_COLUMNS}
    for _, row in metrics.iterrows():
        hit = _finite(row.get("hit_rate"))
        prompt = _finite(row.get("prefill_tokens_per_min_per_gpu"))
        output = _finite(row.get("output_tokens_per_min_per_gpu"))
        if hit is None or prompt is None or output is None:
            for c in PRICE_COLUMNS:
                cols[c].append(math.nan)
            continue
        econ = provider_economics(
            sheet,
            gpu_rate,
            hit_rate=min(max(hit, 0.0), 1.0),
            prompt_tokens_per_min_per_gpu=prompt,
            output_tokens_per_min_per_gpu=output,
        )
        cols["user_cost_per_m_input"].append(float(econ.user_cost_per_m_input))
        cols["revenue_per_gpu_hour"].append(float(econ.revenue_per_gpu_hour))
        cols["profit_per_gpu_hour"].append(float(econ.profit_per_gpu_hour))
        cols["break_even_gpu_rate"].append(float(econ.break_even_gpu_rate))
    for c, values in cols.items():
        out[c] = values
    return out


def profit_vs_gpu_rate(metrics: pd.DataFrame, sheet: PriceSheet, rates: np.ndarray) -> pd.DataFrame:
    """Profit per GPU-hour of each engine as the GPU rate moves over `rates` (long format:
    `engine`, `gpu_rate`, `profit_per_gpu_hour`). Profit is revenue − rate, so one pricing
    call per engine gives the whole line."""
    priced = price_engines(metrics, sheet, 0.0)
    rows = [
        {
            "engine": r["engine"],
            "gpu_rate": float(x),
            "profit_per_gpu_hour": r["revenue_per_gpu_hour"] - float(x),
        }
        for _, r in priced.iterrows()
        for x in rates
    ]
    return pd.DataFrame(rows, columns=["engine", "gpu_rate", "profit_per_gpu_hour"])


def profit_vs_discount(
    metrics: pd.DataFrame, sheet: PriceSheet, gpu_rate: float, discounts: np.ndarray
) -> pd.DataFrame:
    """Profit per GPU-hour of each engine as the cached-token discount moves over `discounts`
    (fractions of the input price), its measured rates and hit rate held fixed."""
    frames = []
    for d in discounts:
        priced = price_engines(metrics, sheet_with(sheet, cached_discount=float(d)), gpu_rate)
        frames.append(
            pd.DataFrame(
                {
                    "engine": priced["engine"],
                    "cached_discount_pct": float(d) * 100.0,
                    "profit_per_gpu_hour": priced["profit_per_gpu_hour"],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def user_cost_vs_hit_rate(sheet: PriceSheet, hit_rates: np.ndarray) -> pd.DataFrame:
    """User cost per 1M input tokens over `hit_rates` (one line: it depends on the sheet only)."""
    return pd.DataFrame(
        {
            "engine": "any engine",
            "hit_rate_pct": hit_rates * 100.0,
            "user_cost_per_m_input": [
                float(user_cost_per_m_input(sheet, float(h))) for h in hit_rates
            ],
        }
    )
