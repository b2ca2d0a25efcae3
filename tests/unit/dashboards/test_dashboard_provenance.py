"""The dashboard says what a run is (issue 32 point 4): every page that opens a run shows its
provenance card, and its seed band where it has one; a ratio between engines of a saturated run
is labelled a ratio of ceilings (point 3)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboards.timeline import versus_best_other
from replay.band import Band, EngineBand, SeedPoint, write_band


def _page(module: str, root: str) -> None:
    import importlib
    from pathlib import Path

    importlib.import_module(f"dashboards.views.{module}").render(Path(root))


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("page", ["replay", "pricing_whatif", "sessions"])
def test_each_page_that_opens_a_run_says_what_it_is_and_shows_its_band(
    runs_root: Path, tmp_path: Path, page: str
) -> None:
    root = tmp_path / "runs"
    shutil.copytree(runs_root / "small", root / "small")
    engines = [EngineBand(e, e, [SeedPoint(k, h, 0.98, 1.0, 1e4) for k, h in enumerate([0.8, 0.2])])
               for e in ("a", "b")]  # fmt: skip
    write_band(root / "small", Band(37, [0, 1], "engine", "sim-engine", engines, [0.98]))
    at = AppTest.from_function(_page, args=(page, str(root)), default_timeout=60)
    at.query_params["run"] = "small"
    at.run()
    assert not at.exception and not at.error
    card = " ".join(i.value for i in at.info)
    assert "What this is:" in card and "0.98× the demo's offered load" in card
    assert "seed band 0–1" in card
    band = [e for e in at.expander if e.label.startswith("Seed band (2 seeds)")]
    assert band and "on the cliff" in band[0].label


def test_a_ratio_of_a_saturated_run_is_a_ratio_of_ceilings() -> None:
    plain = versus_best_other(200.0, 100.0, True, str)
    assert plain == ("2.00× better", "green")
    ceiling = versus_best_other(200.0, 100.0, True, str, ceilings=True)
    assert ceiling == ("2.00× better (ratio of ceilings: saturated)", "gray")
    loss = versus_best_other(-2.0, 1.0, True, lambda x: f"${x:.2f}", ceilings=True)
    assert loss == ("$3.00 worse (ratio of ceilings: saturated)", "gray")
