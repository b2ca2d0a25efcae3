"""Pricing what-if: move the GPU rate, the prices and the cached discount; every engine's
profit per GPU-hour and user cost follow, over one run's measured token rates and hit rates.
Host memory (issue 34 point 4) moves the cost side: each engine's profit net of a chosen
host-memory size at a chosen rate, and a curve of it against the size (the hit rate stays
the run's; `replay plan-host` simulates it at each size).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from analysis.economics import MAX_HOST_RATE, MAX_TIER_GB, HostRate, host_rate
from analysis.registry import column_format, figure_label, header, in_view, keys, metric
from dashboards.alike import window_words
from dashboards.figures import engine_bars_figure, whatif_figure
from dashboards.loading import RunUnavailable, run_metrics
from dashboards.money import (
    gpu_at,
    net_profit_vs_host_memory,
    own_host_gb,
    priced_metrics,
    profit_vs_discount,
    profit_vs_gpu_rate,
    sheet_with,
    user_cost_vs_hit_rate,
    with_host_gb,
)
from dashboards.views.common import pick_pricing, pick_run_group
from pricing import PricingError, dec

# The registry's "pricing" view: the table's columns, headers and formats.
TABLE = ("engine", *keys("pricing"))
_FORMATS = {
    m.key: st.column_config.NumberColumn(header(m), format=column_format(m))
    for m in in_view("pricing")
}


def render(root: Path) -> None:
    st.header("Pricing what-if")
    run = pick_run_group(root, key="pricing_run")
    if run is None:
        return
    engines = run.engines
    choice = pick_pricing(
        "whatif", gpu_hint=run.engine_info(engines[0]).gpu_type if engines else None
    )
    if choice is None or choice.gpu is None:
        return
    try:
        metrics = run_metrics(run)
    except RunUnavailable as e:
        st.error(str(e))
        return
    counted = window_words(
        float(metrics["window_start_s"].iloc[0]), float(metrics["window_end_s"].iloc[0])
    )
    base = choice.sheet
    tag = f"{base.name}_{choice.gpu.name}"  # new defaults when the sheet or GPU changes
    c1, c2, c3, c4 = st.columns(4)
    gpu_rate = c1.slider(
        "GPU rate ($/GPU-hour)",
        0.0,
        30.0,
        float(choice.gpu.rate_per_gpu_hour),
        0.05,
        key=f"w_gpu_{tag}",
    )
    input_price = c2.slider(
        "Input price ($/1M)",
        0.0,
        max(1.0, float(base.input) * 4),
        float(base.input),
        0.005,
        key=f"w_in_{tag}",
    )
    output_price = c3.slider(
        "Output price ($/1M)",
        0.0,
        max(2.0, float(base.output) * 4),
        float(base.output),
        0.01,
        key=f"w_out_{tag}",
    )
    discount = c4.slider(
        "Cached discount (%)",
        0.0,
        100.0,
        round(float(base.cached_discount) * 100, 1),
        0.5,
        key=f"w_disc_{tag}",
    )
    sheet = sheet_with(
        base, input_price=input_price, output_price=output_price, cached_discount=discount / 100
    )
    st.caption(
        f"Sheet {base.name} ({base.status}, {base.date}): input ${sheet.input:.4f}, cached "
        f"${sheet.cached:.4f}, output ${sheet.output:.4f} per 1M tokens"
        + (f", cache writes ${sheet.write_price:.4f}" if base.cache_write is not None else "")
        + f". Token rates and hit rates over the measured {counted}."
    )
    host = _host_inputs(own_host_gb(metrics), run.run_id)
    if host is None:
        return
    host_gb, host_usd = host
    priced = priced_metrics(
        with_host_gb(metrics, host_gb), sheet, gpu_at(gpu_rate, choice.gpu), host_usd
    )
    left, right = st.columns(2)
    left.plotly_chart(
        engine_bars_figure(
            dict(zip(priced["engine"], priced["profit_per_gpu_hour"], strict=True)),
            "Profit per GPU-hour",
            "$ per GPU-hour",
            subtitle=counted,
        ),
        key="whatif_profit",
        width="stretch",
    )
    right.plotly_chart(
        engine_bars_figure(
            dict(zip(priced["engine"], priced["user_cost_per_m_input"], strict=True)),
            "User cost per 1M input tokens",
            "$ per 1M input",
            subtitle=counted,
        ),
        key="whatif_cost",
        width="stretch",
    )
    st.dataframe(
        priced[[c for c in TABLE if _shown(priced, c)]],
        hide_index=True,
        width="stretch",
        column_config=_FORMATS,
    )
    st.caption(
        "User $/task: what a user pays for one finished agent task (its uncached, cached and "
        "output tokens at these prices). Profit at goodput counts only the tokens of requests "
        "that met the run's SLO; a saturated engine's raw profit is its ceiling, not a "
        "service anyone would buy."
    )
    _host_curve(priced, host_gb, host_usd, counted)
    a, b, c = st.columns(3)
    a.plotly_chart(
        whatif_figure(
            profit_vs_gpu_rate(metrics, sheet, np.linspace(0.0, 30.0, 61)),
            "gpu_rate",
            "profit_per_gpu_hour",
            "GPU rate ($/h)",
            header(metric("profit_per_gpu_hour")),
            subtitle=counted,
        ),
        key="whatif_rate_curve",
        width="stretch",
    )
    b.plotly_chart(
        whatif_figure(
            profit_vs_discount(metrics, sheet, gpu_rate, np.linspace(0.0, 1.0, 21)),
            "cached_discount_pct",
            "profit_per_gpu_hour",
            "cached discount (%)",
            header(metric("profit_per_gpu_hour")),
            subtitle=counted,
        ),
        key="whatif_discount_curve",
        width="stretch",
    )
    c.plotly_chart(
        whatif_figure(
            user_cost_vs_hit_rate(sheet, np.linspace(0.0, 1.0, 21)),
            "hit_rate_pct",
            "user_cost_per_m_input",
            figure_label(metric("hit_rate")),
            header(metric("user_cost_per_m_input")),
            subtitle="the price sheet alone: no run's window",
        ),
        key="whatif_cost_curve",
        width="stretch",
    )


def _shown(priced: pd.DataFrame, key: str) -> bool:
    """A column of the table: a metric produced under a condition (host memory) only when
    some engine has it, so an untiered run's table is as it was."""
    if key not in priced.columns:
        return False
    return key == "engine" or not metric(key).only_when or bool(priced[key].notna().any())


def _host_inputs(own_gb: float, run_id: str) -> tuple[float, HostRate] | None:
    """The host-memory size (GiB per engine) and rate the page prices at: the run's own size
    and the pricing data's rate by default."""
    try:
        default = host_rate(None)
    except PricingError as e:
        st.error(f"Cannot read the host-memory rate: {e}")
        return None
    left, right = st.columns(2)
    gb = left.number_input(
        "Host memory per engine (GiB)",
        min_value=0.0,
        # A fleet's replicas each hold up to MAX_TIER_GB: the run's own size stays in range.
        max_value=max(float(MAX_TIER_GB), own_gb),
        value=own_gb,
        step=64.0,
        key=f"w_host_gb_{run_id}",
    )
    usd = right.number_input(
        "Host memory rate ($/GiB-hour)",
        min_value=0.0,
        max_value=MAX_HOST_RATE,
        value=float(default.usd_per_gb_hour),
        step=0.0001,
        format="%.5f",
        key="w_host_rate",
    )
    same = dec(usd) == default.usd_per_gb_hour
    rate = default if same else HostRate(dec(usd, "host rate"), "the page's rate")
    st.caption(
        f"Host memory moves the provider's cost only: every engine priced with {gb:g} GiB at "
        f"${usd:g} per GiB-hour ({rate.source}); its hit rate and token rates are the run's, "
        f"measured with {own_gb:g} GiB of host memory. `replay plan-host` simulates the hit "
        "rate at each size (docs/cache-tiers.md, the planner)."
    )
    return gb, rate


def _host_curve(priced: pd.DataFrame, host_gb: float, rate: HostRate, counted: str) -> None:
    """Net profit per GPU-hour against host-memory size, the hit rate held at the run's."""
    top = max(1024.0, 2 * host_gb)
    curve = net_profit_vs_host_memory(
        priced, float(rate.usd_per_gb_hour), np.linspace(0.0, top, 33)
    )
    st.plotly_chart(
        whatif_figure(
            curve,
            "host_gb",
            "net_profit_per_gpu_hour",
            "host memory per engine (GiB)",
            header(metric("net_profit_per_gpu_hour")),
            subtitle=f"{counted}; hit rate held at the run's",
        ),
        key="whatif_host_curve",
        width="stretch",
    )
