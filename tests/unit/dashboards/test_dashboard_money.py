from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from dashboards.money import (
    priced_metrics,
    profit_vs_discount,
    profit_vs_gpu_rate,
    sheet_with,
    user_cost_vs_hit_rate,
)
from pricing.sheets import get_sheet

# Hand-computed: 4.74M × 60 / 1e6 × $0.0456 + 30,850 × 60 / 1e6 × $0.50 − $8.60.
FS_PROFIT = 284.4 * 0.0456 + 1.851 * 0.50 - 8.60  # = 5.29414


def _demo_metrics() -> pd.DataFrame:
    # The FlashState demo's measured rates, per GPU (2-GPU engines: output halved).
    return pd.DataFrame(
        {
            "engine": ["flashstate", "vllm", "sglang", "idle"],
            "hit_rate": [0.87, 0.30, 0.06, math.nan],
            "prefill_tokens_per_min_per_gpu": [4.74e6, 1.54e6, 1.29e6, 0.0],
            "output_tokens_per_min_per_gpu": [30_850.0, 11_000.0, 7_700.0, 0.0],
        }
    )


def test_demo_profit_and_user_cost() -> None:
    priced = priced_metrics(_demo_metrics(), get_sheet("zai-glm"), 8.60).set_index("engine")
    assert priced.loc["flashstate", "user_cost_per_m_input"] == pytest.approx(0.0456)
    assert priced.loc["vllm", "user_cost_per_m_input"] == pytest.approx(0.114)
    assert priced.loc["sglang", "user_cost_per_m_input"] == pytest.approx(0.1428)
    assert priced.loc["flashstate", "profit_per_gpu_hour"] == pytest.approx(FS_PROFIT)
    # The demo rounds its inputs and shows ≈ $2.27 and ≈ $2.67; exact on these inputs:
    assert priced.loc["vllm", "profit_per_gpu_hour"] == pytest.approx(
        92.4 * 0.114 + 0.66 * 0.50 - 8.60
    )
    assert priced.loc["sglang", "profit_per_gpu_hour"] == pytest.approx(
        77.4 * 0.1428 + 0.462 * 0.50 - 8.60
    )
    # Break-even GPU rate is the revenue: profit + rate.
    assert priced.loc["flashstate", "break_even_gpu_rate"] == pytest.approx(FS_PROFIT + 8.60)
    # An engine with nothing measured yet has no price, not an error.
    assert math.isnan(priced.loc["idle", "profit_per_gpu_hour"])


def test_sheet_with_slider_values() -> None:
    base = get_sheet("zai-glm")
    s = sheet_with(base, input_price=0.30, output_price=1.0, cached_discount=0.5)
    assert (s.input, s.cached, s.output) == (Decimal("0.3"), Decimal("0.15"), Decimal("1.0"))
    # Changing only the input price keeps the sheet's discount (0.03 / 0.15 → 80%).
    assert sheet_with(base, input_price=0.30).cached == Decimal("0.06")
    assert sheet_with(base) == base


def test_cache_write_premium_keeps_its_ratio() -> None:
    base = get_sheet("anthropic-style-5m")
    s = sheet_with(base, input_price=6.0)
    assert s.cache_write == Decimal("7.5")  # 1.25 × input


def test_profit_curves() -> None:
    metrics = _demo_metrics().iloc[:3]
    sheet = get_sheet("zai-glm")
    by_rate = profit_vs_gpu_rate(metrics, sheet, np.array([0.0, 8.6]))
    fs = by_rate[by_rate["engine"] == "flashstate"].set_index("gpu_rate")["profit_per_gpu_hour"]
    assert fs[8.6] == pytest.approx(FS_PROFIT)
    assert fs[0.0] - fs[8.6] == pytest.approx(8.6)
    by_disc = profit_vs_discount(metrics, sheet, 8.6, np.array([0.0, 0.8]))
    fs_d = by_disc[by_disc["engine"] == "flashstate"].set_index("cached_discount_pct")
    assert fs_d.loc[80.0, "profit_per_gpu_hour"] == pytest.approx(FS_PROFIT)
    # No discount: cached tokens bill at the full input price, so profit rises.
    assert fs_d.loc[0.0, "profit_per_gpu_hour"] > fs_d.loc[80.0, "profit_per_gpu_hour"]
    cost = user_cost_vs_hit_rate(sheet, np.array([0.0, 0.87, 1.0]))
    assert list(cost["user_cost_per_m_input"]) == pytest.approx([0.15, 0.0456, 0.03])


def test_task_cost_and_profit_at_goodput_follow_the_sliders() -> None:
    metrics = pd.DataFrame(
        {
            "engine": ["a", "b"],
            "hit_rate": [0.87, 0.87],
            "prefill_tokens_per_min_per_gpu": [4.74e6, 4.74e6],
            "output_tokens_per_min_per_gpu": [30_850.0, 30_850.0],
            "goodput_prefill_tokens_per_min_per_gpu": [4.74e6, 0.0],
            "goodput_output_tokens_per_min_per_gpu": [30_850.0, 0.0],
            "task_prompt_tokens_mean": [1_000_000.0, math.nan],
            "task_cached_tokens_mean": [870_000.0, math.nan],
            "task_output_tokens_mean": [100_000.0, math.nan],
        }
    )
    priced = priced_metrics(metrics, get_sheet("zai-glm"), 8.60)
    a, b = priced.to_dict(orient="records")
    assert a["user_cost_per_task"] == pytest.approx(0.0956)
    assert a["profit_per_gpu_hour_at_goodput"] == pytest.approx(a["profit_per_gpu_hour"])
    assert b["profit_per_gpu_hour_at_goodput"] == pytest.approx(-8.60)  # nothing within the SLO
    assert math.isnan(b["user_cost_per_task"])
