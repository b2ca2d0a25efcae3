"""The provider's cost counts host memory (issue 34 point 4): an engine whose spec gives it a
host-memory tier is priced with its host cost per GPU-hour (GiB × rate ÷ GPUs) and its profit
net of it, at `--host-usd-per-gb-hour`, else gpus.yaml's `host_memory` rate, else unpriced;
an engine without one is priced exactly as before (no host key anywhere)."""

from __future__ import annotations

import math
import shutil
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

import pricing
from analysis.economics import (
    PRICE_COLUMNS,
    HostRate,
    engine_economics,
    host_rate,
    price_engines,
)
from analysis.manifest import manifest_engines
from replay.rundir_models import Manifest

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "pricing"
HOST_KEYS = {
    "host_memory_gb",
    "host_usd_per_gb_hour",
    "host_rate_source",
    "host_cost_per_gpu_hour",
    "net_profit_per_gpu_hour",
}


def _metrics(host_gb: list[float | None]) -> pd.DataFrame:
    """The demo's FlashState point on 2-GPU engines, one per host size."""
    n = len(host_gb)
    return pd.DataFrame(
        {
            "engine": [f"e{i}" for i in range(n)],
            "gpus": [2] * n,
            "gpu_type": ["B200"] * n,
            "hit_rate": [0.87] * n,
            "prefill_tokens_per_min_per_gpu": [4.74e6] * n,
            "output_tokens_per_min_per_gpu": [30850.0] * n,
            "host_memory_gb": host_gb,
        }
    )


def test_the_rate_is_the_flag_else_the_pricing_data_else_unpriced(tmp_path: Path) -> None:
    shipped = host_rate(None, SHIPPED)
    assert shipped.usd_per_gb_hour == Decimal("0.00072")
    assert shipped.source == "gpus.yaml host_memory, reported: docs/pricing.md"
    given = host_rate(0.004, SHIPPED)
    assert given == HostRate(Decimal("0.004"), "--host-usd-per-gb-hour")
    bare = tmp_path / "pricing"
    shutil.copytree(SHIPPED, bare)
    gpus = bare / "gpus.yaml"
    gpus.write_text(gpus.read_text().split("\nhost_memory:")[0] + "\n")
    none = host_rate(None, bare)
    assert none.usd_per_gb_hour == 0 and "no host_memory rate" in none.source


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, 1e9])
def test_a_bad_host_rate_names_the_flag(bad: float) -> None:
    with pytest.raises(pricing.PricingError) as err:
        host_rate(bad)
    msg = str(err.value)
    assert msg.startswith(f"--host-usd-per-gb-hour: {bad:g} is not a rate in [0, 1000]"), msg


def test_host_memory_is_a_cost_per_gpu_hour_and_profit_is_net_of_it() -> None:
    m = _metrics([512.0, None])
    prices = price_engines(m, host=host_rate(0.004))
    tiered, plain = prices.engines
    assert tiered.host is not None and plain.host is None
    # 512 GiB × $0.004 ÷ 2 GPUs = $1.024 per GPU-hour, off the demo's $5.29414 profit.
    assert tiered.host.per_gpu_hour == Decimal("1.024")
    assert tiered.economics.profit_per_gpu_hour == plain.economics.profit_per_gpu_hour
    assert tiered.net_profit_per_gpu_hour == tiered.economics.profit_per_gpu_hour - Decimal("1.024")
    shown = tiered.as_dict()
    assert shown["host_cost_per_gpu_hour"] == pytest.approx(1.024)
    assert shown["net_profit_per_gpu_hour"] == pytest.approx(5.29414 - 1.024)
    assert shown["host_rate_source"] == "--host-usd-per-gb-hour"
    assert not HOST_KEYS & set(plain.as_dict())  # untiered: priced as before, no host key
    # At the shipped rate by default: 512 × 0.00072 ÷ 2.
    (default,) = price_engines(_metrics([512.0]), pricing_dir=SHIPPED).engines
    assert default.host is not None and default.host.per_gpu_hour == Decimal("0.18432")
    # Unpriced: net profit is the profit, and the source says so.
    (free,) = price_engines(_metrics([512.0]), host=host_rate(0)).engines
    assert free.net_profit_per_gpu_hour == free.economics.profit_per_gpu_hour


def test_the_table_has_host_columns_nan_for_an_untiered_engine() -> None:
    econ = engine_economics(_metrics([64.0, None]), host=host_rate(0.01)).set_index("engine")
    assert {"host_cost_per_gpu_hour", "net_profit_per_gpu_hour"} <= set(PRICE_COLUMNS)
    assert econ.loc["e0", "host_cost_per_gpu_hour"] == pytest.approx(0.32)
    assert econ.loc["e0", "host_rate_source"] == "--host-usd-per-gb-hour"
    assert (
        econ.loc[["e1"], ["host_cost_per_gpu_hour", "net_profit_per_gpu_hour"]].isna().all().all()
    )
    # A table without a host column at all (every untiered run): no host figures, no rate read.
    plain = engine_economics(_metrics([None]).drop(columns=["host_memory_gb"]))
    assert plain[["host_cost_per_gpu_hour", "net_profit_per_gpu_hour"]].isna().all().all()


def test_the_manifest_spec_gives_each_engine_its_tiers_times_its_replicas() -> None:
    manifest = Manifest.model_validate(
        {
            "engines": [
                {"name": "a", "gpus": 4, "replicas": 2},
                {"name": "b", "gpus": 2},
                {"name": "c", "gpus": 2},
            ],
            "spec": {
                "engines": [
                    {"engine": {"name": "a"}, "host_memory_gb": 256.0, "external_memory_gb": 1024},
                    {"engine": {"name": "b"}, "host_memory_gb": 0.0},
                    {"engine": {"name": "c"}},
                ]
            },
        }
    )
    infos = manifest_engines(manifest)
    a = infos["a"]
    assert (a.host_memory_gb, a.external_memory_gb, a.replicas) == (256.0, 1024.0, 2)
    assert (infos["b"].host_memory_gb, infos["c"].host_memory_gb) == (0.0, 0.0)


def test_hits_from_host_memory_without_host_memory_in_the_spec_are_noted() -> None:
    """A tiered run whose manifest lost `host_memory_gb` (or a real engine whose host tier is
    its server's flags) used to be priced as if it had none, in silence."""
    metrics = _metrics([None, None, 64.0]).assign(
        cached_tokens=[1000.0, 1000.0, 1000.0],
        cached_tokens_host=[337.0, 0.0, 337.0],
        cached_tokens_external=[0.0, 0.0, 0.0],
    )
    notes = price_engines(metrics, pricing_dir=SHIPPED).notes
    assert notes == [
        "e0: 33.7% of its cache hits came from host memory or an external store, but the run's "
        "spec gives it no host_memory_gb (manifest spec.engines[]): host memory is not priced, "
        "profit is before it"
    ]  # e1 had no host hits, e2 is priced with its host memory
    assert price_engines(_metrics([None]), pricing_dir=SHIPPED).notes == []  # untiered
