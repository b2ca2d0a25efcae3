"""What-if grids: vectorised floats that agree with the exact formulas."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from pricing import (
    PricingError,
    get_gpu_rate,
    get_sheet,
    profit_vs_gpu_rate,
    profit_vs_hit_rate,
    provider_economics,
    sensitivity_grid,
    what_if,
)

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "pricing"
ZAI = get_sheet("zai-glm", SHIPPED)
ANTHROPIC = get_sheet("anthropic-style-5m", SHIPPED)
B200 = get_gpu_rate("b200", SHIPPED)


def test_what_if_reproduces_the_three_demo_points_at_once() -> None:
    r = what_if(
        ZAI,
        hit_rate=[0.87, 0.30, 0.06],
        gpu_rate=B200,
        prompt_tokens_per_min_per_gpu=[4.74e6, 1.54e6, 1.29e6],
        output_tokens_per_min_per_gpu=np.array([61.7e3, 22.0e3, 15.4e3]) / 2,
    )
    np.testing.assert_allclose(r.user_cost_per_m_input, [0.0456, 0.114, 0.1428], rtol=1e-12)
    np.testing.assert_allclose(r.profit_per_gpu_hour, [5.29414, 2.2636, 2.68372], rtol=1e-12)
    np.testing.assert_allclose(r.break_even_gpu_rate, r.profit_per_gpu_hour + 8.6, rtol=1e-12)


@pytest.mark.parametrize("sheet", [ZAI, ANTHROPIC], ids=["zai", "write-premium"])
def test_grid_points_agree_with_the_exact_path(sheet: object) -> None:
    hs = np.linspace(0, 1, 11)
    gs = np.array([4.0, 8.6, 12.0])
    r = what_if(
        sheet,  # type: ignore[arg-type]
        hit_rate=hs[:, None],
        gpu_rate=gs[None, :],
        prompt_tokens_per_min_per_gpu=2.5e6,
        output_tokens_per_min_per_gpu=20_000,
        write_fraction=0.75,
    )
    assert r.profit_per_gpu_hour.shape == (11, 3)
    for i, h in enumerate(hs):
        for j, g in enumerate(gs):
            exact = provider_economics(
                sheet,  # type: ignore[arg-type]
                float(g),
                hit_rate=float(h),
                prompt_tokens_per_min_per_gpu=2.5e6,
                output_tokens_per_min_per_gpu=20_000,
                write_fraction=0.75,
            )
            assert r.profit_per_gpu_hour[i, j] == pytest.approx(
                float(exact.profit_per_gpu_hour), abs=1e-9
            )
            assert r.user_cost_per_m_input[i, j] == pytest.approx(
                float(exact.user_cost_per_m_input), abs=1e-12
            )


def test_cached_discount_overrides_the_sheet_and_keeps_the_write_ratio() -> None:
    r = what_if(
        ANTHROPIC,
        hit_rate=1.0,
        gpu_rate=0.0,
        prompt_tokens_per_min_per_gpu=1e6,
        output_tokens_per_min_per_gpu=0,
        cached_discount=[0.0, 0.5, 0.9],
    )
    np.testing.assert_allclose(r.cached_price, [3.0, 1.5, 0.3])
    np.testing.assert_allclose(r.user_cost_per_m_input, [3.0, 1.5, 0.3])
    # Uncached tokens (h = 0) still pay the 1.25× write price, whatever the discount.
    r0 = what_if(
        ANTHROPIC,
        hit_rate=0.0,
        gpu_rate=0.0,
        prompt_tokens_per_min_per_gpu=1e6,
        output_tokens_per_min_per_gpu=0,
        cached_discount=0.5,
    )
    assert float(r0.user_cost_per_m_input) == pytest.approx(3.75)
    default = what_if(
        ZAI,
        hit_rate=0.5,
        gpu_rate=0.0,
        prompt_tokens_per_min_per_gpu=0,
        output_tokens_per_min_per_gpu=0,
    )
    assert float(default.cached_discount) == pytest.approx(float(ZAI.cached_discount))


def test_sensitivity_grid_is_the_full_product_in_tidy_form() -> None:
    df = sensitivity_grid(
        ZAI,
        prompt_tokens_per_min_per_gpu=4.74e6,
        output_tokens_per_min_per_gpu=30_850,
        hit_rates=[0.06, 0.30, 0.87],
        gpu_rates=[6.0, 8.6],
        cached_discounts=[0.5, 0.8],
    )
    assert len(df) == 3 * 2 * 2
    point = df[(df.hit_rate == 0.87) & (df.gpu_rate_per_hour == 8.6) & (df.cached_discount == 0.8)]
    assert point.profit_per_gpu_hour.item() == pytest.approx(5.29414, abs=1e-9)
    # A deeper discount (cheaper cached tokens) lowers revenue at a fixed hit rate.
    pivot = df[df.gpu_rate_per_hour == 8.6].pivot(
        index="hit_rate", columns="cached_discount", values="profit_per_gpu_hour"
    )
    assert (pivot[0.8] < pivot[0.5]).all()


def test_profit_curves_over_hit_rate_and_gpu_rate() -> None:
    curve = profit_vs_hit_rate(
        ZAI, B200, prompt_tokens_per_min_per_gpu=1.54e6, output_tokens_per_min_per_gpu=11_000
    )
    assert len(curve) == 101 and curve.hit_rate.iloc[-1] == 1.0
    assert (np.diff(curve.profit_per_gpu_hour) < 0).all()  # at fixed throughput
    exact = provider_economics(
        ZAI,
        B200,
        hit_rate=0.3,
        prompt_tokens_per_min_per_gpu=1.54e6,
        output_tokens_per_min_per_gpu=11_000,
    )
    root = float(exact.break_even_hit_rate or Decimal(-1))
    crossing = curve.hit_rate[np.argmax(curve.profit_per_gpu_hour.to_numpy() < 0)]
    assert root < crossing <= root + 0.01
    by_rate = profit_vs_gpu_rate(
        ZAI,
        [0.0, 8.6, 20.0],
        hit_rate=0.87,
        prompt_tokens_per_min_per_gpu=4.74e6,
        output_tokens_per_min_per_gpu=30_850,
    )
    np.testing.assert_allclose(by_rate.profit_per_gpu_hour, [13.89414, 5.29414, -6.10586])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hit_rate": [0.5, 1.5]}, r"hit_rate must be \[0, 1\], got 1\.5"),
        ({"gpu_rate": -2}, r"gpu_rate must be ≥ 0, got -2"),
        ({"cached_discount": 1.1}, r"cached_discount must be \[0, 1\]"),
        ({"prompt_tokens_per_min_per_gpu": np.nan}, r"prompt_tokens_per_min_per_gpu must be"),
        ({"write_fraction": -0.5}, r"write_fraction must be \[0, 1\]"),
    ],
)
def test_bad_what_if_inputs_are_named(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {
        "hit_rate": 0.5,
        "gpu_rate": 8.6,
        "prompt_tokens_per_min_per_gpu": 1e6,
        "output_tokens_per_min_per_gpu": 1e4,
        **kwargs,
    }
    with pytest.raises(PricingError, match=message):
        what_if(ZAI, **args)  # type: ignore[arg-type]


def test_bad_grid_axes_are_named() -> None:
    with pytest.raises(PricingError, match="gpu_rates must be a non-empty 1-D sequence"):
        sensitivity_grid(
            ZAI,
            prompt_tokens_per_min_per_gpu=1,
            output_tokens_per_min_per_gpu=1,
            hit_rates=[0.5],
            gpu_rates=[],
        )
    with pytest.raises(PricingError, match="points must be ≥ 2"):
        profit_vs_hit_rate(
            ZAI, 8.6, prompt_tokens_per_min_per_gpu=1, output_tokens_per_min_per_gpu=1, points=1
        )
