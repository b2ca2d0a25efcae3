"""What-if pricing: profit and user cost over grids of GPU rate, cached discount and hit rate.

Vectorised with numpy broadcasting for dashboard sliders and the report's sensitivity
figures. These are float64 computations (relative error ~1e-16, far below a cent), not the
exact Decimal path of `pricing.formulas`: use `provider_economics` for a figure that is
printed as *the* number, and these for curves and heat maps.

Throughput is an input, not a model: moving the hit rate here re-prices the same measured
token rates (what a different cached-token price or hit rate would bill for the same work);
it does not predict how throughput would change with the hit rate.

Units: prices USD per 1M tokens, token rates tokens per minute per GPU, GPU rates USD per
GPU-hour, hit rates and discounts fractions in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from pricing.sheets import GpuRate, PriceSheet, PricingError

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class WhatIf:
    """Broadcast arrays, all of one shape: the inputs as used, and the results."""

    hit_rate: FloatArray
    gpu_rate_per_hour: FloatArray  # USD per GPU-hour
    cached_discount: FloatArray  # 1 − cached/input
    cached_price: FloatArray  # USD per 1M cached prompt tokens
    prompt_tokens_per_min_per_gpu: FloatArray
    output_tokens_per_min_per_gpu: FloatArray
    user_cost_per_m_input: FloatArray  # USD per 1M prompt tokens
    revenue_per_gpu_hour: FloatArray  # USD
    profit_per_gpu_hour: FloatArray  # USD

    @property
    def break_even_gpu_rate(self) -> FloatArray:
        """USD per GPU-hour at which profit is zero (the revenue)."""
        return self.revenue_per_gpu_hour


def _checked(name: str, value: npt.ArrayLike, lo: float, hi: float | None) -> FloatArray:
    arr = np.asarray(value, dtype=np.float64)
    bad = ~np.isfinite(arr) | (arr < lo) | (False if hi is None else arr > hi)
    if np.any(bad):
        first = arr.ravel()[int(np.flatnonzero(np.ravel(bad))[0])]
        where = f"[{lo:g}, {hi:g}]" if hi is not None else f"≥ {lo:g}"
        raise PricingError(f"{name} must be {where}, got {first:g}")
    return arr


def what_if(
    sheet: PriceSheet,
    *,
    hit_rate: npt.ArrayLike,
    gpu_rate: GpuRate | npt.ArrayLike,
    prompt_tokens_per_min_per_gpu: npt.ArrayLike,
    output_tokens_per_min_per_gpu: npt.ArrayLike,
    cached_discount: npt.ArrayLike | None = None,
    write_fraction: float = 1.0,
) -> WhatIf:
    """User cost and provider profit for every broadcast combination of the inputs.

    `cached_discount` d replaces the sheet's cached price with input·(1 − d) (the sheet's own
    discount when None; Z.ai's is 0.8). The cache-write price keeps the sheet's ratio to
    input. Scalars and arrays mix freely: `hit_rate=np.linspace(0, 1, 101)[:, None]` against
    `gpu_rate=np.array([6, 8.6, 12])` gives a 101×3 grid.
    """
    h = _checked("hit_rate", hit_rate, 0.0, 1.0)
    rate_in = gpu_rate.rate_per_gpu_hour if isinstance(gpu_rate, GpuRate) else gpu_rate
    g = _checked("gpu_rate", np.asarray(rate_in, dtype=np.float64), 0.0, None)
    p = _checked("prompt_tokens_per_min_per_gpu", prompt_tokens_per_min_per_gpu, 0.0, None)
    o = _checked("output_tokens_per_min_per_gpu", output_tokens_per_min_per_gpu, 0.0, None)
    w = float(_checked("write_fraction", write_fraction, 0.0, 1.0))
    d = _checked(
        "cached_discount",
        float(sheet.cached_discount) if cached_discount is None else cached_discount,
        0.0,
        1.0,
    )
    h, g, p, o, d = np.broadcast_arrays(h, g, p, o, d)
    base = float(sheet.input)
    cached = base * (1.0 - d)
    uncached = (1.0 - w) * base + w * base * float(sheet.write_multiplier)
    cost = (1.0 - h) * uncached + h * cached
    revenue = 60.0 * (p * cost + o * float(sheet.output)) / 1e6
    return WhatIf(
        hit_rate=h,
        gpu_rate_per_hour=g,
        cached_discount=d,
        cached_price=cached,
        prompt_tokens_per_min_per_gpu=p,
        output_tokens_per_min_per_gpu=o,
        user_cost_per_m_input=cost,
        revenue_per_gpu_hour=revenue,
        profit_per_gpu_hour=revenue - g,
    )


def net_of_host_memory(
    profit_per_gpu_hour: npt.ArrayLike,
    *,
    host_gb: npt.ArrayLike,
    usd_per_gb_hour: float,
    gpus_per_engine: int,
) -> FloatArray:
    """Profit per GPU-hour less host memory's cost, `host_gb` × rate ÷ GPUs (the float form of
    `pricing.host_memory_cost_per_gpu_hour`), broadcast over profits and host sizes: the
    what-if "profit against host memory size" with the hit rate held at the measured one."""
    if gpus_per_engine < 1:
        raise PricingError(f"gpus_per_engine must be ≥ 1, got {gpus_per_engine}")
    gb = _checked("host_gb", host_gb, 0.0, None)
    rate = float(_checked("usd_per_gb_hour", usd_per_gb_hour, 0.0, None))
    profit = np.asarray(profit_per_gpu_hour, dtype=np.float64)
    out: FloatArray = profit - gb * rate / gpus_per_engine
    return out


def sensitivity_grid(
    sheet: PriceSheet,
    *,
    prompt_tokens_per_min_per_gpu: float,
    output_tokens_per_min_per_gpu: float,
    hit_rates: Sequence[float] | npt.ArrayLike,
    gpu_rates: Sequence[float] | npt.ArrayLike,
    cached_discounts: Sequence[float] | npt.ArrayLike | None = None,
    write_fraction: float = 1.0,
) -> pd.DataFrame:
    """A tidy table over the full grid hit_rates × gpu_rates × cached_discounts (the sheet's
    own discount when None), one measured operating point (token rates per minute per GPU).

    Columns: `hit_rate`, `gpu_rate_per_hour`, `cached_discount`, `cached_price`,
    `user_cost_per_m_input`, `revenue_per_gpu_hour`, `profit_per_gpu_hour` (USD). Ready for
    plotly line charts (filter one axis) and heat maps (pivot two).
    """
    hs = np.atleast_1d(np.asarray(hit_rates, dtype=np.float64))
    gs = np.atleast_1d(np.asarray(gpu_rates, dtype=np.float64))
    ds = np.atleast_1d(
        np.asarray(
            float(sheet.cached_discount) if cached_discounts is None else cached_discounts,
            dtype=np.float64,
        )
    )
    for name, axis in (("hit_rates", hs), ("gpu_rates", gs), ("cached_discounts", ds)):
        if axis.ndim != 1 or axis.size == 0:
            raise PricingError(f"{name} must be a non-empty 1-D sequence")
    r = what_if(
        sheet,
        hit_rate=hs[:, None, None],
        gpu_rate=gs[None, :, None],
        cached_discount=ds[None, None, :],
        prompt_tokens_per_min_per_gpu=prompt_tokens_per_min_per_gpu,
        output_tokens_per_min_per_gpu=output_tokens_per_min_per_gpu,
        write_fraction=write_fraction,
    )
    return pd.DataFrame(
        {
            "hit_rate": r.hit_rate.ravel(),
            "gpu_rate_per_hour": r.gpu_rate_per_hour.ravel(),
            "cached_discount": r.cached_discount.ravel(),
            "cached_price": r.cached_price.ravel(),
            "user_cost_per_m_input": r.user_cost_per_m_input.ravel(),
            "revenue_per_gpu_hour": r.revenue_per_gpu_hour.ravel(),
            "profit_per_gpu_hour": r.profit_per_gpu_hour.ravel(),
        }
    )


def profit_vs_hit_rate(
    sheet: PriceSheet,
    gpu_rate: GpuRate | float,
    *,
    prompt_tokens_per_min_per_gpu: float,
    output_tokens_per_min_per_gpu: float,
    points: int = 101,
) -> pd.DataFrame:
    """Profit and user cost on an even grid of `points` hit rates over [0, 1], one GPU rate."""
    rate = float(gpu_rate.rate_per_gpu_hour if isinstance(gpu_rate, GpuRate) else gpu_rate)
    if points < 2:
        raise PricingError(f"points must be ≥ 2, got {points}")
    return sensitivity_grid(
        sheet,
        prompt_tokens_per_min_per_gpu=prompt_tokens_per_min_per_gpu,
        output_tokens_per_min_per_gpu=output_tokens_per_min_per_gpu,
        hit_rates=np.linspace(0.0, 1.0, points),
        gpu_rates=[rate],
    )


def profit_vs_gpu_rate(
    sheet: PriceSheet,
    gpu_rates: Sequence[float] | npt.ArrayLike,
    *,
    hit_rate: float,
    prompt_tokens_per_min_per_gpu: float,
    output_tokens_per_min_per_gpu: float,
) -> pd.DataFrame:
    """Profit over the given GPU rates (USD per GPU-hour) at one measured hit rate."""
    return sensitivity_grid(
        sheet,
        prompt_tokens_per_min_per_gpu=prompt_tokens_per_min_per_gpu,
        output_tokens_per_min_per_gpu=output_tokens_per_min_per_gpu,
        hit_rates=[hit_rate],
        gpu_rates=gpu_rates,
    )
