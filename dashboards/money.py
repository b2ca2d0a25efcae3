"""Pricing over analysis' metrics for the pages: the numbers through the one pricing of a
run, the curves through `pricing.whatif`.

The numbers shown (profit, user cost, profit at goodput, cost per task) come from
`analysis.economics.engine_economics`, the function `replay price RUN_DIR`, the report and
summary.json use, with the same GPU rule (each engine at its manifest GPU's rate unless a GPU
is chosen). `pricing.whatif.what_if` (vectorised) draws the curves. This module only maps a
metrics table onto them, builds the sheet the sliders describe, and a what-if GPU rate.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd

from analysis.economics import (
    PRICE_COLUMNS,
    TEXT_COLUMNS,
    HostRate,
    engine_economics,
    host_sizes,
    resolve_gpu,
)
from pricing.formulas import dec
from pricing.sheets import GpuRate, PriceSheet
from pricing.whatif import net_of_host_memory, what_if


def _finite(value: object) -> float | None:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def gpu_at(rate_per_gpu_hour: float, base: GpuRate | None = None) -> GpuRate:
    """A what-if GPU rate: `base` (the catalogue's default when None) at the slider's rate."""
    gpu = base if base is not None else resolve_gpu(None)
    return gpu.model_copy(
        update={"rate_per_gpu_hour": dec(rate_per_gpu_hour, "GPU rate"), "status": "illustrative"}
    )


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


def priced_metrics(
    metrics: pd.DataFrame,
    sheet: PriceSheet,
    gpu: GpuRate | float | None = None,
    host: HostRate | None = None,
) -> pd.DataFrame:
    """`metrics` (analysis' window metrics, one row per engine) with the one pricing's
    columns (`analysis.economics.PRICE_COLUMNS`, floats) added; NaN for an engine with
    nothing measured yet. `gpu`: None prices each engine at its own GPU's rate (an unknown
    GPU raises `UnknownGpuError`), a rate or a number prices every engine at it. `host`: the
    host-memory rate (the pricing data's when None) for engines with `host_memory_gb`."""
    rate = gpu_at(gpu) if isinstance(gpu, int | float) else gpu
    econ = engine_economics(metrics, sheet, rate, host=host)
    base = metrics.drop(columns=[c for c in (*TEXT_COLUMNS, *PRICE_COLUMNS) if c in metrics])
    out = base.reset_index(drop=True).merge(econ, on="engine", how="left")
    out.index = metrics.index
    return out


def own_host_gb(metrics: pd.DataFrame) -> float:
    """The most host memory (GiB) any engine of the run has (0: none has a tier)."""
    return max((host_sizes(r)[0] for r in metrics.to_dict(orient="records")), default=0.0)


def with_host_gb(metrics: pd.DataFrame, host_gb: float) -> pd.DataFrame:
    """`metrics` with every engine given `host_gb` GiB of host memory (none at 0): a cost-side
    what-if; hit and token rates stay the run's."""
    out = metrics.drop(columns=["host_memory_gb"], errors="ignore")
    if host_gb > 0:
        out = out.assign(host_memory_gb=float(dec(host_gb, "host memory")))
    return out


def net_profit_vs_host_memory(
    priced: pd.DataFrame, usd_per_gb_hour: float, sizes: np.ndarray
) -> pd.DataFrame:
    """Each priced engine's profit per GPU-hour net of `sizes` GiB of host memory at
    `usd_per_gb_hour` (long format: `engine`, `host_gb`, `net_profit_per_gpu_hour`), its
    measured hit rate held: `pricing.whatif.net_of_host_memory`."""
    frames = []
    for row in priced.to_dict(orient="records"):
        profit, gpus = _finite(row.get("profit_per_gpu_hour")), _finite(row.get("gpus"))
        if profit is None:
            continue
        net = net_of_host_memory(
            profit, host_gb=sizes, usd_per_gb_hour=usd_per_gb_hour, gpus_per_engine=int(gpus or 1)
        )
        frames.append(
            pd.DataFrame(
                {"engine": row["engine"], "host_gb": sizes, "net_profit_per_gpu_hour": net}
            )
        )
    return _stack(frames, ["engine", "host_gb", "net_profit_per_gpu_hour"])


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
