"""The pricing formulas: the demo's numbers reproduced from its inputs, exactly where shown."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pricing import (
    PriceSheet,
    PricingError,
    dec,
    get_gpu_rate,
    get_sheet,
    per_gpu,
    provider_economics,
    uncached_price,
    usd,
    user_cost_per_m_input,
)

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "pricing"
ZAI = get_sheet("zai-glm", SHIPPED)
B200 = get_gpu_rate("b200", SHIPPED)
ANTHROPIC = get_sheet("anthropic-style-5m", SHIPPED)


def sheet(**prices: str) -> PriceSheet:
    fields = {"input": "1", "cached": "0.1", "output": "2", **prices}
    return PriceSheet(name="t", source="test", date="2026", status="illustrative", **fields)


@pytest.mark.parametrize(
    ("hit_rate", "expected"),
    [(0.87, "0.0456"), (0.30, "0.114"), (0.06, "0.1428"), (0, "0.15"), (1, "0.03")],
)
def test_user_cost_reproduces_the_demo_exactly(hit_rate: float, expected: str) -> None:
    # Exact equality: floats are read through their shortest repr, the arithmetic is Decimal.
    assert user_cost_per_m_input(ZAI, hit_rate) == Decimal(expected)


def test_the_user_cost_ratio_is_the_hit_rate_gap() -> None:
    ratio = user_cost_per_m_input(ZAI, 0.06) / user_cost_per_m_input(ZAI, 0.87)
    assert ratio.quantize(Decimal("0.01")) == Decimal("3.13")  # vs SGLang
    ratio = user_cost_per_m_input(ZAI, 0.30) / user_cost_per_m_input(ZAI, 0.87)
    assert ratio.quantize(Decimal("0.1")) == Decimal("2.5")  # the headline "2.5× lower"


# The demo's inputs are printed to three significant figures and its profits to cents, so a
# faithful recomputation can differ by the display rounding (half a cent) plus what half a
# unit in the last printed digit of each input moves the profit by:
#   prompt rate ±0.005M tokens/min/GPU → ±0.005e6·60·(user cost)/1e6 $/GPU-hour
#   output rate ±0.05K tokens/min per 2-GPU engine → ±0.025e3·60·$0.50/1e6 $/GPU-hour
DEMO = [
    # engine, prompt tokens/min/GPU, output tokens/min per 2-GPU engine, hit rate, profit
    ("flashstate", "4.74e6", "61.7e3", "0.87", "5.30"),
    ("vllm", "1.54e6", "22.0e3", "0.30", "2.27"),
    ("sglang", "1.29e6", "15.4e3", "0.06", "2.67"),
]


@pytest.mark.parametrize(("engine", "prompt", "output", "hit_rate", "reported"), DEMO)
def test_profit_reproduces_the_demo_within_its_printed_precision(
    engine: str, prompt: str, output: str, hit_rate: str, reported: str
) -> None:
    out_per_gpu = per_gpu(Decimal(output), 2)
    econ = provider_economics(
        ZAI,
        B200,
        hit_rate=Decimal(hit_rate),
        prompt_tokens_per_min_per_gpu=Decimal(prompt),
        output_tokens_per_min_per_gpu=out_per_gpu,
    )
    cost = user_cost_per_m_input(ZAI, Decimal(hit_rate))
    tolerance = (
        Decimal("0.005")
        + Decimal("0.005e6") * 60 * cost / 1_000_000
        + Decimal("0.025e3") * 60 * ZAI.output / 1_000_000
    )
    assert abs(econ.profit_per_gpu_hour - Decimal(reported)) <= tolerance, (
        engine,
        econ.profit_per_gpu_hour,
        tolerance,
    )
    # Profit is exactly revenue minus the GPU rate, and the break-even GPU rate zeroes it.
    assert econ.profit_per_gpu_hour == econ.revenue_per_gpu_hour - Decimal("8.60")
    at_break_even = provider_economics(
        ZAI,
        econ.break_even_gpu_rate,
        hit_rate=Decimal(hit_rate),
        prompt_tokens_per_min_per_gpu=Decimal(prompt),
        output_tokens_per_min_per_gpu=out_per_gpu,
    )
    assert at_break_even.profit_per_gpu_hour == 0


def test_flashstate_point_exact_values_and_the_write_up_split() -> None:
    econ = provider_economics(
        ZAI,
        B200,
        hit_rate=0.87,
        prompt_tokens_per_min_per_gpu=4.74e6,
        output_tokens_per_min_per_gpu=30_850,
    )
    assert econ.input_revenue_per_gpu_hour == Decimal("12.96864")
    assert econ.output_revenue_per_gpu_hour == Decimal("0.9255")
    assert econ.profit_per_gpu_hour == Decimal("5.29414")
    assert usd(econ.profit_per_gpu_hour, 2) == "$5.29"
    # The write-up: "about $25.95 of FlashState's $27.80 per engine-hour" (two GPUs).
    assert abs(2 * econ.input_revenue_per_gpu_hour - Decimal("25.95")) < Decimal("0.03")
    assert abs(2 * econ.revenue_per_gpu_hour - Decimal("27.80")) < Decimal("0.03")


def test_float_inputs_do_not_drift() -> None:
    assert dec(0.1) + dec(0.2) == Decimal("0.3")
    costs = sum(user_cost_per_m_input(ZAI, h) for h in (0.1, 0.2, 0.3))
    assert costs == Decimal("0.15") * 3 - Decimal("0.12") * Decimal("0.6")


def test_write_premium_is_paid_by_the_uncached_tokens_written_to_cache() -> None:
    # 3.75 per 1M written, 0.30 per 1M read: at h = 0.87, all uncached tokens written.
    assert user_cost_per_m_input(ANTHROPIC, 0.87) == Decimal("0.13") * Decimal("3.75") + Decimal(
        "0.87"
    ) * Decimal("0.30")
    # Half the uncached tokens written: they pay 3.75, the other half plain input (3.00).
    assert uncached_price(ANTHROPIC, 0.5) == Decimal("3.375")
    assert user_cost_per_m_input(ANTHROPIC, 0, write_fraction=0) == Decimal("3.00")
    # A sheet without a cache-write price ignores the write fraction.
    assert user_cost_per_m_input(ZAI, 0.5, write_fraction=0) == user_cost_per_m_input(ZAI, 0.5)


def test_break_even_hit_rate_crosses_inside_the_unit_interval() -> None:
    econ = provider_economics(
        ZAI,
        B200,
        hit_rate=0.30,
        prompt_tokens_per_min_per_gpu=1.54e6,
        output_tokens_per_min_per_gpu=11_000,
    )
    b = econ.break_even
    assert b.status == "crosses" and b.profitable_below
    assert econ.break_even_hit_rate is not None and 0 < econ.break_even_hit_rate < 1
    # Profit at that hit rate is zero (to Decimal's 28 digits: the root is a true quotient).
    at_root = provider_economics(
        ZAI,
        B200,
        hit_rate=econ.break_even_hit_rate,
        prompt_tokens_per_min_per_gpu=1.54e6,
        output_tokens_per_min_per_gpu=11_000,
    )
    assert abs(at_root.profit_per_gpu_hour) < Decimal("1e-20")
    assert "positive below" in b.describe()


@pytest.mark.parametrize(
    ("prompt", "gpu_rate", "status"),
    [(6e6, "8.60", "profit_everywhere"), (1e5, "8.60", "loss_everywhere")],
)
def test_break_even_hit_rate_outside_the_unit_interval_is_none(
    prompt: float, gpu_rate: str, status: str
) -> None:
    econ = provider_economics(
        ZAI,
        Decimal(gpu_rate),
        hit_rate=0.5,
        prompt_tokens_per_min_per_gpu=prompt,
        output_tokens_per_min_per_gpu=0,
    )
    assert econ.break_even.status == status
    assert econ.break_even_hit_rate is None
    assert econ.break_even.root is not None and not 0 <= econ.break_even.root <= 1
    assert econ.gpu is None  # a bare rate names no GPU


def test_break_even_hit_rate_is_flat_when_cached_costs_as_much_as_uncached() -> None:
    econ = provider_economics(
        sheet(cached="1"),
        1,
        hit_rate=0.5,
        prompt_tokens_per_min_per_gpu=1e6,
        output_tokens_per_min_per_gpu=0,
    )
    assert econ.break_even.status == "flat" and econ.break_even.root is None
    assert "does not depend" in econ.break_even.describe()


def test_as_dict_carries_the_json_contract_fields() -> None:
    d = provider_economics(
        ZAI,
        B200,
        hit_rate=0.87,
        prompt_tokens_per_min_per_gpu=4.74e6,
        output_tokens_per_min_per_gpu=30_850,
    ).as_dict()
    assert d["user_cost_per_m_input"] == 0.0456
    assert d["profit_per_gpu_hour"] == 5.29414
    assert d["break_even_gpu_rate"] == d["revenue_per_gpu_hour"] == 13.89414
    assert d["break_even_hit_rate"] is None and d["gpu"] == "b200"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hit_rate": 1.2}, r"hit_rate must be within \[0, 1\].*got 1\.2"),
        ({"hit_rate": -0.1}, r"hit_rate must be within \[0, 1\]"),
        ({"hit_rate": float("nan")}, r"hit_rate: expected a finite number"),
        ({"prompt_tokens_per_min_per_gpu": -1}, r"prompt_tokens_per_min_per_gpu must be ≥ 0"),
        ({"output_tokens_per_min_per_gpu": "abc"}, r"output_tokens_per_min_per_gpu: expected"),
        ({"write_fraction": 2}, r"write_fraction must be within \[0, 1\]"),
        ({"hit_rate": True}, r"hit_rate: expected a number"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {
        "hit_rate": 0.5,
        "prompt_tokens_per_min_per_gpu": 1e6,
        "output_tokens_per_min_per_gpu": 1e4,
        **kwargs,
    }
    with pytest.raises(PricingError, match=message):
        provider_economics(ZAI, B200, **args)  # type: ignore[arg-type]


def test_bad_gpu_rate_and_engine_split_are_named() -> None:
    with pytest.raises(PricingError, match="gpu_rate must be ≥ 0"):
        provider_economics(
            ZAI, -1, hit_rate=0.5, prompt_tokens_per_min_per_gpu=1, output_tokens_per_min_per_gpu=1
        )
    with pytest.raises(PricingError, match="gpus_per_engine must be ≥ 1"):
        per_gpu(100, 0)


def test_usd_rounds_half_even_only_for_display() -> None:
    assert usd(Decimal("5.29414"), 2) == "$5.29"
    assert usd(Decimal("0.1428"), 3) == "$0.143"
    assert usd(Decimal("-1.205"), 2) == "-$1.20"
    assert usd(Decimal("12345.6"), 2) == "$12,345.60"


@given(
    h=st.decimals(min_value=0, max_value=1, places=4),
    prompt=st.integers(min_value=0, max_value=10**8),
    output=st.integers(min_value=0, max_value=10**6),
)
def test_profit_is_linear_in_the_hit_rate_between_its_endpoints(
    h: Decimal, prompt: int, output: int
) -> None:
    def profit(x: Decimal) -> Decimal:
        return provider_economics(
            ZAI,
            B200,
            hit_rate=x,
            prompt_tokens_per_min_per_gpu=prompt,
            output_tokens_per_min_per_gpu=output,
        ).profit_per_gpu_hour

    p0, p1 = profit(Decimal(0)), profit(Decimal(1))
    assert profit(h) == p0 + (p1 - p0) * h


def test_cost_per_task_bills_a_task_like_its_requests() -> None:
    from pricing import bill, cost_per_task, get_sheet

    zai = get_sheet("zai-glm")
    # 130K uncached at $0.15, 870K cached at $0.03, 100K output at $0.50 per 1M.
    assert cost_per_task(zai, 1_000_000, 870_000, 100_000) == Decimal("0.0956")
    assert (
        cost_per_task(zai, 1_000_000, 870_000, 100_000)
        == bill(zai, 1_000_000, 870_000, 100_000).total_usd
    )
    anthropic = get_sheet("anthropic-style-5m")  # uncached prompt tokens pay the write premium
    assert cost_per_task(anthropic, 1_000_000, 0, 0) == Decimal("3.75")
    assert cost_per_task(anthropic, 1_000_000, 0, 0, write_fraction=0) == Decimal("3")
    with pytest.raises(PricingError, match=r"cached_tokens .* exceeds prompt_tokens"):
        cost_per_task(zai, 10, 20, 0)
