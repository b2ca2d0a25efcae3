"""The pricing formulas (the design's contract), exact in `decimal.Decimal`.

Units everywhere: prices in US dollars per 1M tokens, token rates in tokens per minute per
GPU, GPU rates in US dollars per GPU-hour, hit rates as fractions in [0, 1].

With hit rate h (cached ÷ prompt tokens), write fraction w (the share of uncached prompt
tokens written to the provider's cache; 1 by default) and a sheet's prices:

    uncached price  a = (1 − w)·input + w·cache_write        (= input without a premium)
    user cost per 1M input tokens  = (1 − h)·a + h·cached
    revenue per GPU-hour = P·60·(user cost)/1e6 + O·60·output/1e6
    profit per GPU-hour  = revenue − GPU rate
    break-even GPU rate  = revenue
    break-even hit rate  = the h in [0, 1] where profit is zero, P and O held fixed

P and O are the measured prompt and output tokens per minute per GPU. Float inputs are read
through their shortest decimal repr (0.87 is exactly 0.87), so nothing drifts; round only
when displaying (`usd`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from pricing.sheets import GpuRate, PriceSheet, PricingError

Number = Decimal | int | float | str
MILLION = Decimal(1_000_000)
MINUTES_PER_HOUR = Decimal(60)


def dec(value: Number, what: str = "value") -> Decimal:
    """`value` as an exact Decimal: floats through their shortest repr (0.1 → 0.1, not
    0.1000000000000000055…). Raises `PricingError` naming `what` for NaN, ±inf or junk."""
    if isinstance(value, bool):
        raise PricingError(f"{what}: expected a number, got {value!r}")
    try:
        d = (
            value
            if isinstance(value, Decimal)
            else Decimal(repr(value) if isinstance(value, float) else str(value))
        )
    except ArithmeticError as e:
        raise PricingError(f"{what}: expected a number, got {value!r}") from e
    if not d.is_finite():
        raise PricingError(f"{what}: expected a finite number, got {value!r}")
    return d


def _fraction(value: Number, what: str) -> Decimal:
    d = dec(value, what)
    if not Decimal(0) <= d <= Decimal(1):
        raise PricingError(f"{what} must be within [0, 1] (a fraction: 0.87 for 87%), got {value}")
    return d


def _non_negative(value: Number, what: str) -> Decimal:
    d = dec(value, what)
    if d < 0:
        raise PricingError(f"{what} must be ≥ 0, got {value}")
    return d


def usd(amount: Decimal, places: int = 4) -> str:
    """Display rounding (half-even) of an exact dollar amount: `usd(Decimal("5.29405"), 2)`
    → "$5.29". Negative amounts keep their sign: "-$1.20"."""
    q = amount.quantize(Decimal(1).scaleb(-places))
    return f"-${-q:,}" if q < 0 else f"${q:,}"


def uncached_price(sheet: PriceSheet, write_fraction: Number = 1) -> Decimal:
    """USD per 1M uncached prompt tokens: (1 − w)·input + w·cache_write (`input` when the
    sheet has no cache-write price). `write_fraction` w ∈ [0, 1] is the share of uncached
    tokens written to cache; 1 models a provider that caches every new prefix (an agent's
    next turn resumes from the end of this one)."""
    w = _fraction(write_fraction, "write_fraction")
    return (1 - w) * sheet.input + w * sheet.write_price


def user_cost_per_m_input(
    sheet: PriceSheet, hit_rate: Number, write_fraction: Number = 1
) -> Decimal:
    """USD a user pays per 1M prompt tokens at cache hit rate `hit_rate` (fraction in [0, 1]):
    (1 − h)·uncached_price + h·cached. On the Z.ai list, 0.87 → $0.0456 exactly."""
    h = _fraction(hit_rate, "hit_rate")
    return (1 - h) * uncached_price(sheet, write_fraction) + h * sheet.cached


def tier_sheet(sheet: PriceSheet, host_share: Number, external_share: Number = 0) -> PriceSheet:
    """The sheet as it bills an engine whose cache hits came `host_share` from host memory and
    `external_share` from an external store (fractions of the cached tokens; the GPU served
    the rest): its `cached` price the blend (1 − s_h − s_e)·cached + s_h·cached_host +
    s_e·cached_external (issue 34 point 4). The sheet itself when it prices no tier apart,
    so an untiered sheet prices every run exactly as before."""
    if not sheet.prices_tiers:
        return sheet
    h = _fraction(host_share, "host_share")
    e = _fraction(external_share, "external_share")
    if h + e > 1:
        raise PricingError(f"host_share + external_share ({h + e}) exceeds 1")
    blended = (1 - h - e) * sheet.cached + h * sheet.host_cached_price
    blended += e * sheet.external_cached_price
    return sheet.model_copy(update={"cached": blended})


def cost_per_task(
    sheet: PriceSheet,
    prompt_tokens: Number,
    cached_tokens: Number,
    output_tokens: Number,
    write_fraction: Number = 1,
) -> Decimal:
    """USD a user pays for one agent task of `prompt_tokens` prompt tokens (of which
    `cached_tokens` were cache hits) and `output_tokens` generated tokens, summed over the
    task's requests (means over tasks are fine: the price is linear). Uncached tokens are
    billed at `uncached_price` (the write premium where the sheet has one), cached at
    `cached`, output at `output`: the same split as `bills.bill`."""
    p = _non_negative(prompt_tokens, "prompt_tokens")
    c = _non_negative(cached_tokens, "cached_tokens")
    o = _non_negative(output_tokens, "output_tokens")
    if c > p:
        raise PricingError(f"cached_tokens ({c}) exceeds prompt_tokens ({p})")
    uncached = (p - c) * uncached_price(sheet, write_fraction)
    return (uncached + c * sheet.cached + o * sheet.output) / MILLION


BreakEvenStatus = Literal["crosses", "profit_everywhere", "loss_everywhere", "flat"]


@dataclass(frozen=True)
class HitRateBreakEven:
    """Where profit per GPU-hour crosses zero as the hit rate moves over [0, 1], the measured
    token rates held fixed (a pricing what-if: a higher hit rate bills more tokens at the
    cached price, so on a usual sheet profit falls as h rises).

    - `crosses`: `hit_rate` is the zero in [0, 1]; profitable on the side `profitable_below`
      says (below it when cached < uncached price).
    - `profit_everywhere` / `loss_everywhere`: no zero in [0, 1]; `hit_rate` is None and
      `root` is the zero of the profit line outside [0, 1].
    - `flat`: profit does not depend on the hit rate (cached = uncached price); no root.
    """

    status: BreakEvenStatus
    hit_rate: Decimal | None  # fraction in [0, 1], or None when profit has no zero there
    root: Decimal | None  # the zero of the profit line, anywhere (None when flat)
    profit_at_0: Decimal  # USD per GPU-hour at hit rate 0
    profit_at_1: Decimal  # USD per GPU-hour at hit rate 1

    @property
    def profitable_below(self) -> bool:
        """True when profit falls as the hit rate rises (the usual case)."""
        return self.profit_at_0 > self.profit_at_1

    def describe(self) -> str:
        """One sentence for tables and reports."""
        if self.status == "crosses":
            side = "below" if self.profitable_below else "above"
            return f"profit is zero at hit rate {float(self.hit_rate or 0):.4f}; positive {side} it"
        if self.status == "profit_everywhere":
            return "profitable at every hit rate in [0, 1]"
        if self.status == "loss_everywhere":
            return "loss-making at every hit rate in [0, 1]"
        return "profit does not depend on the hit rate (cached price equals uncached price)"


def _hit_rate_break_even(p0: Decimal, p1: Decimal) -> HitRateBreakEven:
    # Profit is linear in h: p(h) = p0 + (p1 − p0)·h, so its zero is p0 / (p0 − p1).
    if p0 == p1:
        return HitRateBreakEven("flat", None, None, p0, p1)
    root = p0 / (p0 - p1)
    if 0 <= root <= 1:
        return HitRateBreakEven("crosses", root, root, p0, p1)
    status: BreakEvenStatus = "profit_everywhere" if p0 > 0 else "loss_everywhere"
    return HitRateBreakEven(status, None, root, p0, p1)


@dataclass(frozen=True)
class Economics:
    """A provider's hour on one GPU at measured token rates, and what its users pay. All
    money in exact US dollars (Decimal); `as_dict` gives JSON-ready floats."""

    sheet: str
    gpu: str | None
    hit_rate: Decimal  # fraction in [0, 1]
    write_fraction: Decimal  # share of uncached prompt tokens billed as cache writes
    prompt_tokens_per_min_per_gpu: Decimal
    output_tokens_per_min_per_gpu: Decimal
    gpu_rate_per_hour: Decimal  # USD per GPU-hour
    user_cost_per_m_input: Decimal  # USD per 1M prompt tokens
    input_revenue_per_gpu_hour: Decimal  # USD
    output_revenue_per_gpu_hour: Decimal  # USD
    break_even: HitRateBreakEven

    @property
    def revenue_per_gpu_hour(self) -> Decimal:
        """USD billed per GPU-hour: prompt plus output revenue."""
        return self.input_revenue_per_gpu_hour + self.output_revenue_per_gpu_hour

    @property
    def profit_per_gpu_hour(self) -> Decimal:
        """USD per GPU-hour: revenue − GPU rate (negative: a loss)."""
        return self.revenue_per_gpu_hour - self.gpu_rate_per_hour

    @property
    def break_even_gpu_rate(self) -> Decimal:
        """The GPU rate (USD per GPU-hour) at which profit is zero: the revenue."""
        return self.revenue_per_gpu_hour

    @property
    def break_even_hit_rate(self) -> Decimal | None:
        """The hit rate in [0, 1] at which profit is zero, or None (see `break_even`)."""
        return self.break_even.hit_rate

    @property
    def margin(self) -> Decimal | None:
        """profit ÷ revenue, or None when revenue is zero."""
        rev = self.revenue_per_gpu_hour
        return None if rev == 0 else self.profit_per_gpu_hour / rev

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: exact values converted to floats (no rounding beyond float's own)."""

        def f(x: Decimal | None) -> float | None:
            return None if x is None else float(x)

        return {
            "sheet": self.sheet,
            "gpu": self.gpu,
            "hit_rate": f(self.hit_rate),
            "write_fraction": f(self.write_fraction),
            "prompt_tokens_per_min_per_gpu": f(self.prompt_tokens_per_min_per_gpu),
            "output_tokens_per_min_per_gpu": f(self.output_tokens_per_min_per_gpu),
            "gpu_rate_per_hour": f(self.gpu_rate_per_hour),
            "user_cost_per_m_input": f(self.user_cost_per_m_input),
            "input_revenue_per_gpu_hour": f(self.input_revenue_per_gpu_hour),
            "output_revenue_per_gpu_hour": f(self.output_revenue_per_gpu_hour),
            "revenue_per_gpu_hour": f(self.revenue_per_gpu_hour),
            "profit_per_gpu_hour": f(self.profit_per_gpu_hour),
            "break_even_gpu_rate": f(self.break_even_gpu_rate),
            "break_even_hit_rate": f(self.break_even_hit_rate),
            "break_even_hit_rate_status": self.break_even.status,
            "margin": f(self.margin),
        }


def provider_economics(
    sheet: PriceSheet,
    gpu_rate: GpuRate | Number,
    *,
    hit_rate: Number,
    prompt_tokens_per_min_per_gpu: Number,
    output_tokens_per_min_per_gpu: Number,
    write_fraction: Number = 1,
) -> Economics:
    """Revenue, profit and break-evens per GPU-hour, exact.

    `gpu_rate` is a `GpuRate` or USD per GPU-hour. Token rates are per minute per GPU (for a
    2-GPU engine, halve the engine's rate). The demo's FlashState point, 4.74M prompt and
    30,850 output tokens/min/GPU at h = 0.87 on Z.ai and $8.60, gives $5.29414 profit.
    """
    h = _fraction(hit_rate, "hit_rate")
    prompt = _non_negative(prompt_tokens_per_min_per_gpu, "prompt_tokens_per_min_per_gpu")
    output = _non_negative(output_tokens_per_min_per_gpu, "output_tokens_per_min_per_gpu")
    if isinstance(gpu_rate, GpuRate):
        rate, gpu_name = gpu_rate.rate_per_gpu_hour, gpu_rate.name
    else:
        rate, gpu_name = _non_negative(gpu_rate, "gpu_rate"), None
    w = _fraction(write_fraction, "write_fraction")
    prompt_m_per_hour = prompt * MINUTES_PER_HOUR / MILLION
    output_revenue = output * MINUTES_PER_HOUR / MILLION * sheet.output

    def profit_at(x: Decimal) -> Decimal:
        return prompt_m_per_hour * user_cost_per_m_input(sheet, x, w) + output_revenue - rate

    cost = user_cost_per_m_input(sheet, h, w)
    return Economics(
        sheet=sheet.name,
        gpu=gpu_name,
        hit_rate=h,
        write_fraction=w,
        prompt_tokens_per_min_per_gpu=prompt,
        output_tokens_per_min_per_gpu=output,
        gpu_rate_per_hour=rate,
        user_cost_per_m_input=cost,
        input_revenue_per_gpu_hour=prompt_m_per_hour * cost,
        output_revenue_per_gpu_hour=output_revenue,
        break_even=_hit_rate_break_even(profit_at(Decimal(0)), profit_at(Decimal(1))),
    )


def host_memory_cost_per_gpu_hour(
    host_gb: Number, usd_per_gb_hour: Number, gpus_per_engine: int
) -> Decimal:
    """USD per GPU-hour an engine's `host_gb` GiB of host memory costs its provider at
    `usd_per_gb_hour` (issue 34 point 4), spread over the engine's GPUs as every figure of
    `Economics` is: 512 GiB at $0.004 on a 2-GPU engine is $1.024 per GPU-hour. Subtract it
    from `Economics.profit_per_gpu_hour` for the profit net of host memory."""
    if gpus_per_engine <= 0:
        raise PricingError(f"gpus_per_engine must be ≥ 1, got {gpus_per_engine}")
    gb = _non_negative(host_gb, "host_gb")
    rate = _non_negative(usd_per_gb_hour, "usd_per_gb_hour")
    return gb * rate / gpus_per_engine


def per_gpu(rate_per_engine: Number, gpus_per_engine: int) -> Decimal:
    """An engine-wide token rate divided over its GPUs (the demo's 61.7K output tokens/min
    per 2-GPU engine is 30,850 per GPU), exact."""
    if gpus_per_engine <= 0:
        raise PricingError(f"gpus_per_engine must be ≥ 1, got {gpus_per_engine}")
    return _non_negative(rate_per_engine, "rate_per_engine") / gpus_per_engine
