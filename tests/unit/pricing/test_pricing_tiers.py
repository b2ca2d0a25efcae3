"""Cached tokens priced by cache tier (issue 34 point 4): a sheet may price hits served from
host memory (`cached_host`) or an external store (`cached_external`) apart; left out, as on
every shipped sheet, a host hit costs what a GPU hit costs and nothing changes."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from pricing import (
    PricingConfigError,
    PricingError,
    get_sheet,
    load_sheets,
    tier_sheet,
    user_cost_per_m_input,
)

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "pricing"


def test_shipped_sheets_price_no_tier_apart_and_dump_as_before() -> None:
    for sheet in load_sheets().entries.values():
        assert not sheet.prices_tiers
        assert sheet.host_cached_price == sheet.external_cached_price == sheet.cached
        assert tier_sheet(sheet, 0.7, 0.2) is sheet  # priced exactly as before
        dumped = sheet.model_dump()
        assert "cached_host" not in dumped and "cached_external" not in dumped


def test_a_sheet_with_tier_prices_blends_its_cached_price() -> None:
    base = get_sheet("zai-glm")
    sheet = base.model_copy(
        update={"cached_host": Decimal("0.06"), "cached_external": Decimal("0.09")}
    )
    assert sheet.prices_tiers and sheet.model_dump()["cached_host"] == Decimal("0.06")
    # Half the hits from host, a quarter external, a quarter on the GPU.
    blended = tier_sheet(sheet, Decimal("0.5"), Decimal("0.25"))
    assert blended.cached == Decimal("0.25") * Decimal("0.03") + Decimal("0.03") + Decimal("0.0225")
    assert blended.name == sheet.name and blended.input == sheet.input
    # All hits on the GPU: the sheet's own cached price.
    assert tier_sheet(sheet, 0, 0).cached == base.cached
    # At hit rate h the user pays (1 − h)·input + h·blended cached.
    h = Decimal("0.9")
    assert user_cost_per_m_input(blended, h) == Decimal("0.1") * base.input + h * blended.cached
    with pytest.raises(PricingError, match="exceeds 1"):
        tier_sheet(sheet, 0.8, 0.3)


def test_a_sheet_file_may_give_tier_prices(tmp_path: Path) -> None:
    target = tmp_path / "pricing"
    shutil.copytree(SHIPPED, target)
    path = target / "sheets.yaml"
    text = path.read_text()
    path.write_text(
        text.replace("    cached: 0.03\n", "    cached: 0.03\n    cached_host: 0.05\n", 1)
    )
    sheet = get_sheet("zai-glm", target)
    assert sheet.cached_host == Decimal("0.05") and sheet.cached_external is None
    path.write_text(
        text.replace("    cached: 0.03\n", "    cached: 0.03\n    cached_host: -1\n", 1)
    )
    with pytest.raises(PricingConfigError, match="cached_host"):
        load_sheets(target)
