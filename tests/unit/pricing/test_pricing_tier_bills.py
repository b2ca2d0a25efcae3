"""Cached tokens billed by tier, per token (issue 34 point 4): a host-memory hit at the sheet's
`cached_host`, an external-store hit at `cached_external`, the GPU's share at `cached`; a sheet
without a tier's price bills that tier's hits at `cached` (every shipped sheet). And the
host-memory what-if: profit net of host memory against its size."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pricing import (
    PricingConfigError,
    PricingError,
    bill,
    bills_by,
    get_sheet,
    host_memory_cost_per_gpu_hour,
    load_sheets,
    net_of_host_memory,
    request_costs,
)

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "pricing"
ZAI = get_sheet("zai-glm", SHIPPED)  # input 0.15, cached 0.03, output 2.2 per 1M
TIERED = ZAI.model_copy(update={"cached_host": Decimal("0.05"), "cached_external": Decimal("0.09")})


def test_each_tier_is_billed_at_its_own_rate() -> None:
    # 1M prompt tokens, 600K cached: 300K on the GPU, 200K from host, 100K from the store.
    b = bill(
        TIERED, 1_000_000, 600_000, 0, 0, cached_tokens_host=200_000, cached_tokens_external=100_000
    )
    expected = Decimal("0.3") * Decimal("0.03") + Decimal("0.2") * Decimal("0.05")
    expected += Decimal("0.1") * Decimal("0.09")
    assert b.cached_input_usd == expected  # $0.028, exactly
    assert b.uncached_input_usd == Decimal("0.4") * Decimal("0.15")
    assert (b.cached_tokens_host, b.cached_tokens_external) == (200_000, 100_000)
    # All from the GPU: the sheet's one cached rate.
    assert bill(TIERED, 1_000_000, 600_000, 0, 0).cached_input_usd == Decimal("0.6") * Decimal(
        "0.03"
    )


def test_a_sheet_without_tier_rates_bills_every_hit_at_its_cached_rate() -> None:
    assert not ZAI.prices_tiers
    tiered = bill(ZAI, 1_000_000, 600_000, 5_000, 1, 200_000, 100_000)
    assert tiered.total_usd == bill(ZAI, 1_000_000, 600_000, 5_000, 1).total_usd
    assert tiered.cached_input_usd == Decimal("0.6") * ZAI.cached


def test_request_costs_price_each_request_by_tier() -> None:
    got = request_costs(
        TIERED,
        [1_000_000, 1_000_000],
        [600_000, 600_000],
        [0, 0],
        write_fraction=0,
        cached_tokens_host=[200_000, 0],
        cached_tokens_external=[100_000, 0],
    )
    assert got == pytest.approx([0.4 * 0.15 + 0.028, 0.4 * 0.15 + 0.6 * 0.03])
    flat = request_costs(ZAI, [1_000_000], [600_000], [0], 0, [200_000], [100_000])
    assert flat == pytest.approx(request_costs(ZAI, [1_000_000], [600_000], [0], 0))


def test_bills_by_sums_the_tiers_and_reads_an_untiered_engine_as_gpu_hits() -> None:
    frame = pd.DataFrame(
        {
            "engine": ["a", "a", "b"],
            "prompt_tokens": [500_000, 500_000, 1_000_000],
            "cached_tokens": [300_000, 300_000, 600_000],
            "output_tokens": [0, 0, 0],
            "cached_tokens_host": [100_000, 100_000, None],  # b: no tiers
            "cached_tokens_external": [50_000, 50_000, None],
        }
    )
    out = bills_by(frame, TIERED, "engine", write_fraction=0).set_index("engine")
    assert out.loc["a", "cached_tokens_host"] == 200_000
    assert out.loc["a", "cached_input_usd"] == pytest.approx(0.028)
    assert out.loc["b", "cached_input_usd"] == pytest.approx(0.6 * 0.03)
    # A frame without the tier columns: the columns and dollars it always had.
    plain = bills_by(
        frame.drop(columns=["cached_tokens_host", "cached_tokens_external"]), TIERED, "engine"
    )
    assert "cached_tokens_host" not in plain.columns
    assert plain.set_index("engine").loc["a", "cached_input_usd"] == pytest.approx(0.6 * 0.03)


@pytest.mark.parametrize(
    ("host", "external", "match"),
    [(-1, 0, "must be ≥ 0"), (400_000, 300_000, "exceeds cached_tokens")],
)
def test_bad_tier_counts_are_refused(host: int, external: int, match: str) -> None:
    with pytest.raises(PricingError, match=match):
        bill(TIERED, 1_000_000, 600_000, 0, 1, host, external)
    with pytest.raises(PricingError, match=r"cached_tokens_host|must be a count"):
        request_costs(TIERED, [1_000_000], [600_000], [0], 1, [host], [external])


@pytest.mark.parametrize("value", ["-0.01", ".nan", ".inf", "2000000"])
@pytest.mark.parametrize("field", ["cached_host", "cached_external"])
def test_a_bad_tier_rate_names_the_sheet_file_and_field(
    tmp_path: Path, field: str, value: str
) -> None:
    target = tmp_path / "pricing"
    shutil.copytree(SHIPPED, target)
    path = target / "sheets.yaml"
    text = path.read_text()
    assert "    cached: 0.03\n" in text
    path.write_text(
        text.replace("    cached: 0.03\n", f"    cached: 0.03\n    {field}: {value}\n", 1)
    )
    with pytest.raises(PricingConfigError) as err:
        load_sheets(target)
    msg = str(err.value)
    assert str(path) in msg and f"sheets.zai-glm.{field}" in msg, msg
    assert "\n" not in msg


def test_profit_net_of_host_memory_against_its_size() -> None:
    sizes = np.array([0.0, 64.0, 512.0])
    net = net_of_host_memory(5.0, host_gb=sizes, usd_per_gb_hour=0.004, gpus_per_engine=2)
    assert net == pytest.approx([5.0, 5.0 - 0.128, 5.0 - 1.024])
    # The float curve agrees with the exact cost the prices use.
    exact = host_memory_cost_per_gpu_hour(512, Decimal("0.004"), 2)
    assert 5.0 - float(exact) == pytest.approx(net[-1])
    with pytest.raises(PricingError, match="host_gb must be ≥ 0"):
        net_of_host_memory(5.0, host_gb=[-1.0], usd_per_gb_hour=0.004, gpus_per_engine=2)
    with pytest.raises(PricingError, match="usd_per_gb_hour"):
        net_of_host_memory(5.0, host_gb=[1.0], usd_per_gb_hour=float("nan"), gpus_per_engine=2)
    with pytest.raises(PricingError, match="gpus_per_engine"):
        net_of_host_memory(5.0, host_gb=[1.0], usd_per_gb_hour=0.004, gpus_per_engine=0)
