"""Pricing over analysis' metrics: per-engine profit and user cost for the pages.

The arithmetic is pricing's: `pricing.formulas.provider_economics` (exact Decimal) for the
numbers shown, `pricing.whatif.what_if` (vectorised) for the curves. This module only maps a
metrics table (one row per engine: per-GPU token rates and hit rate) onto them, builds the
sheet the sliders describe, and turns results into floats for display.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd

from pricing.formulas import cost_per_task, dec, provider_economics
from pricing.sheets import PriceSheet
from pricing.whatif import what_if

PRICE_COLUMNS = (
    "user_cost_per_m_input",
    "revenue_per_gpu_hour",
    "profit_per_gpu_hour",
    "break_even_gpu_rate",
)
# Where the metrics carry analysis' verdicts: a finished agent task's cost to its user and
# the profit counting only the tokens that met the run's SLO (goodput).
TASK_COLUMNS = ("user_cost_per_task", "profit_per_gpu_hour_at_goodput")


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
    for c, values in _task_and_goodput(metrics, sheet, gpu_rate).items():
        out[c] = values
    return out


def _task_and_goodput(
    metrics: pd.DataFrame, sheet: PriceSheet, gpu_rate: float
) -> dict[str, list[float]]:
    """`TASK_COLUMNS` per engine, NaN where the metrics lack the verdicts' columns."""
    cols: dict[str, list[float]] = {c: [] for c in TASK_COLUMNS}
    for _, row in metrics.iterrows():
        task = [_finite(row.get(f"task_{c}_tokens_mean")) for c in ("prompt", "cached", "output")]
        if all(v is not None for v in task):
            p, c, o = (float(v) for v in task if v is not None)
            cols["user_cost_per_task"].append(float(cost_per_task(sheet, p, min(c, p), o)))
        else:
            cols["user_cost_per_task"].append(math.nan)
        hit = _finite(row.get("hit_rate"))
        gp = _finite(row.get("goodput_prefill_tokens_per_min_per_gpu"))
        go = _finite(row.get("goodput_output_tokens_per_min_per_gpu"))
        if hit is None or gp is None or go is None:
            cols["profit_per_gpu_hour_at_goodput"].append(math.nan)
            continue
        econ = provider_economics(
            sheet,
            gpu_rate,
            hit_rate=min(max(hit, 0.0), 1.0),
            prompt_tokens_per_min_per_gpu=gp,
            output_tokens_per_min_per_gpu=go,
        )
        cols["profit_per_gpu_hour_at_goodput"].append(float(econ.profit_per_gpu_hour))
    return cols


def _operating_points(metrics: pd.DataFrame) -> list[tuple[str, float, float, float]]:
    """(engine, hit rate, prompt and output tokens/min/GPU) of each engine that has them."""
    points = []
    for _, row in metrics.iterrows():
        hit = _finite(row.get("hit_rate"))
        prompt = _finite(row.get("prefill_tokens_per_min_per_gpu"))
        output = _finite(row.get("output_tokens_per_min_per_gpu"))
        if hit is not None and prompt is not None and output is not None:
            points.append((str(row["engine"]), min(max(hit, 0.0), 1.0), prompt, output))
    return points


def profit_vs_gpu_rate(metrics: pd.DataFrame, sheet: PriceSheet, rates: np.ndarray) -> pd.DataFrame:
    """Profit per GPU-hour of each engine as the GPU rate moves over `rates` (long format:
    `engine`, `gpu_rate`, `profit_per_gpu_hour`), through `pricing.whatif.what_if`."""
    frames = [
        pd.DataFrame(
            {
                "engine": engine,
                "gpu_rate": rates,
                "profit_per_gpu_hour": what_if(
                    sheet,
                    hit_rate=hit,
                    gpu_rate=rates,
                    prompt_tokens_per_min_per_gpu=prompt,
                    output_tokens_per_min_per_gpu=output,
                ).profit_per_gpu_hour,
            }
        )
        for engine, hit, prompt, output in _operating_points(metrics)
    ]
    return _stack(frames, ["engine", "gpu_rate", "profit_per_gpu_hour"])


def profit_vs_discount(
    metrics: pd.DataFrame, sheet: PriceSheet, gpu_rate: float, discounts: np.ndarray
) -> pd.DataFrame:
    """Profit per GPU-hour of each engine as the cached-token discount moves over `discounts`
    (fractions of the input price), its measured rates and hit rate held fixed."""
    frames = [
        pd.DataFrame(
            {
                "engine": engine,
                "cached_discount_pct": discounts * 100.0,
                "profit_per_gpu_hour": what_if(
                    sheet,
                    hit_rate=hit,
                    gpu_rate=gpu_rate,
                    cached_discount=discounts,
                    prompt_tokens_per_min_per_gpu=prompt,
                    output_tokens_per_min_per_gpu=output,
                ).profit_per_gpu_hour,
            }
        )
        for engine, hit, prompt, output in _operating_points(metrics)
    ]
    return _stack(frames, ["engine", "cached_discount_pct", "profit_per_gpu_hour"])


def user_cost_vs_hit_rate(sheet: PriceSheet, hit_rates: np.ndarray) -> pd.DataFrame:
    """User cost per 1M input tokens over `hit_rates` (one line: it depends on the sheet only)."""
    cost = what_if(
        sheet,
        hit_rate=hit_rates,
        gpu_rate=0.0,
        prompt_tokens_per_min_per_gpu=0.0,
        output_tokens_per_min_per_gpu=0.0,
    ).user_cost_per_m_input
    return pd.DataFrame(
        {"engine": "any engine", "hit_rate_pct": hit_rates * 100.0, "user_cost_per_m_input": cost}
    )


def _stack(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
