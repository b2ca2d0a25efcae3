"""What a user paid per request, session and finished trajectory."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pricing import (
    PricingError,
    bill,
    bills_by,
    get_sheet,
    request_costs,
    session_bills,
    trajectory_bills,
)

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "pricing"
ZAI = get_sheet("zai-glm", SHIPPED)
ANTHROPIC = get_sheet("anthropic-style-5m", SHIPPED)


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "engine": ["a", "a", "a", "a", "b"],
            "session": [0, 0, 0, 1, 0],
            "trajectory": ["t1", "t1", "t2", "t3", "t1"],
            "prompt_tokens": [100_000, 140_000, 50_000, 10_000, 100_000],
            "cached_tokens": [0, 100_000, 0, 5_000, 90_000],
            "output_tokens": [500, 700, 300, 100, 500],
        }
    )


def test_one_request_bill_is_exact_and_split_by_what_was_billed() -> None:
    b = bill(ZAI, 140_000, 100_000, 700)
    assert b.uncached_input_usd == Decimal("0.006")  # 40K × $0.15/1M
    assert b.cached_input_usd == Decimal("0.003")  # 100K × $0.03/1M
    assert b.output_usd == Decimal("0.00035")  # 700 × $0.50/1M
    assert b.cache_write_premium_usd == 0
    assert b.total_usd == Decimal("0.00935")
    assert b.hit_rate == Decimal(100_000) / 140_000


def test_write_premium_goes_to_the_uncached_tokens_written() -> None:
    b = bill(ANTHROPIC, 140_000, 100_000, 0)
    assert b.uncached_input_usd == Decimal("0.12")  # 40K × $3.00/1M
    assert b.cache_write_premium_usd == Decimal("0.03")  # 40K × $0.75/1M
    half = bill(ANTHROPIC, 140_000, 100_000, 0, write_fraction=0.5)
    assert half.cache_write_premium_usd == Decimal("0.015")


def test_a_bill_at_hit_rate_h_matches_the_per_million_formula() -> None:
    # 1M prompt tokens at 87% cached cost exactly the demo's $0.0456.
    assert bill(ZAI, 1_000_000, 870_000, 0).total_usd == Decimal("0.0456")


def test_request_costs_vectorised_agree_with_exact_bills() -> None:
    df = frame()
    costs = request_costs(ZAI, df["prompt_tokens"], df["cached_tokens"], df["output_tokens"])
    exact = [float(bill(ZAI, p, c, o).total_usd) for p, c, o in df[list(df.columns[3:])].values]
    np.testing.assert_allclose(costs, exact, rtol=1e-12)


def test_session_bills_sum_exactly_per_engine_and_session() -> None:
    out = session_bills(frame(), ZAI)
    assert list(out.columns[:2]) == ["engine", "session"]
    row = out[(out.engine == "a") & (out.session == 0)].iloc[0]
    assert row.requests == 3
    assert row.prompt_tokens == 290_000 and row.cached_tokens == 100_000
    expected = bill(ZAI, 290_000, 100_000, 1_500).total_usd
    assert row.total_usd == float(expected)
    assert len(out) == 3


def test_trajectory_bills_include_subagents_and_filter_finished() -> None:
    df = frame()
    df.loc[len(df)] = ["a", 0, "t1", 20_000, 10_000, 50]  # a subagent row of t1
    out = trajectory_bills(df, ZAI)
    t1 = out[(out.engine == "a") & (out.trajectory == "t1")].iloc[0]
    assert t1.requests == 3 and t1.prompt_tokens == 260_000
    only = trajectory_bills(df, ZAI, finished={"t2", "t3"})
    assert sorted(only.trajectory) == ["t2", "t3"]
    by_key = trajectory_bills(df, ZAI, finished={("b", 0, "t1")})
    assert list(by_key.engine) == ["b"]


def test_bills_by_any_grouping_and_total_matches_the_sum_of_requests() -> None:
    df = frame()
    by_engine = bills_by(df, ZAI, "engine")
    total = bill(
        ZAI,
        int(df.prompt_tokens.sum()),
        int(df.cached_tokens.sum()),
        int(df.output_tokens.sum()),
    ).total_usd
    per_request = sum(
        (bill(ZAI, p, c, o).total_usd for p, c, o in df[list(df.columns[3:])].values),
        Decimal(0),
    )
    assert per_request == total  # linear and exact: no drift however it is grouped
    assert by_engine.total_usd.sum() == pytest.approx(float(total), rel=1e-15)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.assign(cached_tokens=[None, 1, 2, 3, 4]), r"'cached_tokens' has 1 null"),
        (lambda d: d.drop(columns="output_tokens"), r"lacks column\(s\) output_tokens"),
        (
            lambda d: d.assign(cached_tokens=[200_000, 0, 0, 0, 0]),
            r"row 0: cached_tokens \(200000\) exceeds prompt_tokens \(100000\)",
        ),
        (lambda d: d.drop(columns="session"), r"lacks grouping column\(s\) session"),
        (
            lambda d: d.assign(output_tokens=[1, 1, -1, 1, 1]),
            r"'output_tokens' is negative in row 2",
        ),
    ],
)
def test_bad_frames_say_what_to_fix(mutate: object, message: str) -> None:
    df = mutate(frame())  # type: ignore[operator]
    with pytest.raises(PricingError, match=message):
        bills_by(df, ZAI, ["engine", "session"])


def test_bad_counts_are_named() -> None:
    with pytest.raises(PricingError, match=r"token counts must be ≥ 0"):
        bill(ZAI, -1, 0, 0)
    with pytest.raises(PricingError, match=r"cached_tokens\[1\] \(5\) exceeds prompt_tokens"):
        request_costs(ZAI, [10, 4], [1, 5], [0, 0])
    with pytest.raises(PricingError, match=r"output_tokens\[0\] must be a count ≥ 0, got nan"):
        request_costs(ZAI, [10], [1], [float("nan")])
    with pytest.raises(PricingError, match="lacks column 'trajectory'"):
        trajectory_bills(frame().drop(columns="trajectory"), ZAI)
