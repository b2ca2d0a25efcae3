"""Pricing what-if: move the GPU rate, the prices and the cached discount; every engine's
profit per GPU-hour and user cost follow, over one run's measured token rates and hit rates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from analysis.registry import column_format, figure_label, header, in_view, keys, metric
from dashboards.alike import window_words
from dashboards.figures import engine_bars_figure, whatif_figure
from dashboards.loading import RunUnavailable, run_metrics
from dashboards.money import (
    gpu_at,
    priced_metrics,
    profit_vs_discount,
    profit_vs_gpu_rate,
    sheet_with,
    user_cost_vs_hit_rate,
)
from dashboards.views.common import pick_pricing, pick_run_group

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
    priced = priced_metrics(metrics, sheet, gpu_at(gpu_rate, choice.gpu))
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
        priced[[c for c in TABLE if c in priced.columns]],
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
