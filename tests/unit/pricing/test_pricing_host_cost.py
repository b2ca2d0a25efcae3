"""The provider's cost of host memory (issue 34 point 4): a rate per GiB-hour over the
engine's host memory, spread over its GPUs, exact; the rate is data with its source
(`gpus.yaml`'s `host_memory`), optional, and a bad one names its field."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from pricing import (
    PricingConfigError,
    PricingError,
    get_host_memory_rate,
    host_memory_cost_per_gpu_hour,
    load_gpu_rates,
)

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "pricing"


def test_host_memory_cost_is_gib_times_rate_over_the_gpus() -> None:
    assert host_memory_cost_per_gpu_hour(512, 0.004, 2) == Decimal("1.024")
    assert host_memory_cost_per_gpu_hour(64, "0.0035", 1) == Decimal("0.224")
    assert host_memory_cost_per_gpu_hour(0, 0.01, 8) == 0
    # the shipped rate: 512 GiB on a 2-GPU engine
    rate = get_host_memory_rate(SHIPPED)
    assert rate is not None
    assert host_memory_cost_per_gpu_hour(512, rate.usd_per_gb_hour, 2) == Decimal("0.18432")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 0.01, 2), "host_gb must be ≥ 0"),
        ((64, -0.01, 2), "usd_per_gb_hour must be ≥ 0"),
        ((64, 0.01, 0), "gpus_per_engine must be ≥ 1"),
        ((64, float("nan"), 2), "usd_per_gb_hour: expected a finite number"),
    ],
)
def test_bad_host_cost_inputs_are_named(args: tuple, message: str) -> None:
    with pytest.raises(PricingError, match=message.replace("(", r"\(")):
        host_memory_cost_per_gpu_hour(*args)


def test_the_shipped_rate_is_the_dram_price_amortised_with_its_source() -> None:
    rate = get_host_memory_rate(SHIPPED)
    assert rate is not None and rate.status == "reported"
    # $76,999 for 4,096 GiB over 3 years of 8,760 hours, rounded up
    assert rate.usd_per_gb_hour == Decimal("0.00072")
    assert Decimal(76999) / 4096 / (3 * 8760) < rate.usd_per_gb_hour
    assert "76,999" in rate.source and "2,048 GB" in rate.notes


def test_a_pricing_folder_without_the_rate_leaves_host_memory_unpriced(tmp_path: Path) -> None:
    folder = tmp_path / "pricing"
    shutil.copytree(SHIPPED, folder)
    text = (folder / "gpus.yaml").read_text()
    (folder / "gpus.yaml").write_text(text[: text.index("\n# What a provider pays for the host")])
    assert get_host_memory_rate(folder) is None
    assert load_gpu_rates(folder).names == load_gpu_rates(SHIPPED).names
    (folder / "gpus.yaml").write_text(
        text.replace("usd_per_gb_hour: 0.00072", "usd_per_gb_hour: -1")
    )
    with pytest.raises(PricingConfigError, match=r"field 'host_memory.usd_per_gb_hour'"):
        get_host_memory_rate(folder)


def test_the_files_host_rate_has_the_flags_bound(tmp_path: Path) -> None:
    """5,000 USD per GiB-hour passed the file (its bound was the GPU rate's, 1,000,000) and
    the flag refused it; `replay price RUN_DIR` priced at it and the dashboard stopped."""
    folder = tmp_path / "pricing"
    shutil.copytree(SHIPPED, folder)
    text = (folder / "gpus.yaml").read_text()
    (folder / "gpus.yaml").write_text(
        text.replace("usd_per_gb_hour: 0.00072", "usd_per_gb_hour: 5000")
    )
    with pytest.raises(
        PricingConfigError,
        match=r"field 'host_memory.usd_per_gb_hour': must be at most 1,000 US dollars per GiB-hour",
    ):
        get_host_memory_rate(folder)
    (folder / "gpus.yaml").write_text(
        text.replace("usd_per_gb_hour: 0.00072", "usd_per_gb_hour: 1000")
    )
    rate = get_host_memory_rate(folder)
    assert rate is not None and rate.usd_per_gb_hour == 1000  # the bound itself prices
