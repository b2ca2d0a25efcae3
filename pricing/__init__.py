"""Pricing: price sheets and GPU rates in, dollars out. Pure; imports nothing else of ours.

Units: prices in US dollars per 1M tokens, token rates in tokens per minute per GPU, GPU rates
in US dollars per GPU-hour, hit rates and discounts as fractions in [0, 1].

    from pricing import get_sheet, get_gpu_rate, provider_economics, per_gpu
    econ = provider_economics(
        get_sheet("zai-glm"), get_gpu_rate("b200"), hit_rate=0.87,
        prompt_tokens_per_min_per_gpu=4.74e6,
        output_tokens_per_min_per_gpu=per_gpu(61.7e3, gpus_per_engine=2),
    )
    econ.profit_per_gpu_hour   # Decimal('5.29414'), exact; round with usd(x, 2) to show

Data: `configs/pricing/{sheets,gpus}.yaml`; every loader takes the directory (default:
`$REPLAY_CONFIG_DIR/pricing`, else `configs/pricing` beside this package).
"""

from pricing.bills import Bill, bill, bills_by, request_costs, session_bills, trajectory_bills
from pricing.formulas import (
    Economics,
    HitRateBreakEven,
    cost_per_task,
    dec,
    host_memory_cost_per_gpu_hour,
    per_gpu,
    provider_economics,
    tier_sheet,
    uncached_price,
    usd,
    user_cost_per_m_input,
)
from pricing.sheets import (
    Catalog,
    GpuRate,
    HostMemoryRate,
    PriceSheet,
    PricingConfigError,
    PricingError,
    UnknownNameError,
    default_pricing_dir,
    get_gpu_rate,
    get_host_memory_rate,
    get_sheet,
    load_gpu_rates,
    load_sheets,
)
from pricing.whatif import (
    WhatIf,
    net_of_host_memory,
    profit_vs_gpu_rate,
    profit_vs_hit_rate,
    sensitivity_grid,
    what_if,
)

__all__ = [
    "Bill",
    "Catalog",
    "Economics",
    "GpuRate",
    "HitRateBreakEven",
    "HostMemoryRate",
    "PriceSheet",
    "PricingConfigError",
    "PricingError",
    "UnknownNameError",
    "WhatIf",
    "bill",
    "bills_by",
    "cost_per_task",
    "dec",
    "default_pricing_dir",
    "get_gpu_rate",
    "get_host_memory_rate",
    "get_sheet",
    "host_memory_cost_per_gpu_hour",
    "load_gpu_rates",
    "load_sheets",
    "net_of_host_memory",
    "per_gpu",
    "profit_vs_gpu_rate",
    "profit_vs_hit_rate",
    "provider_economics",
    "request_costs",
    "sensitivity_grid",
    "session_bills",
    "tier_sheet",
    "trajectory_bills",
    "uncached_price",
    "usd",
    "user_cost_per_m_input",
    "what_if",
]
