"""The pricing what-if answers "profit against host memory size" (issue 34 point 4): a host
size and a host rate move the provider's cost (host cost per GPU-hour, profit net of it), the
hit rate held at the run's with a caption saying so and naming `replay plan-host`; a run
without host memory shows its table as before until a size is chosen (AppTest on real run
directories)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboards.money import net_profit_vs_host_memory, with_host_gb
from replay.records import RequestRecord
from replay.rundir import RunWriter
from replay.rundir_models import Manifest

SHIPPED_RATE = 0.00072  # configs/pricing/gpus.yaml host_memory, USD per GiB-hour


def _write(root: Path, host_gb: float | None, replicas: int = 1) -> Path:
    """One 2-GPU B200 engine, 60 requests of 1,000 prompt tokens with 500 cached; its spec
    gives it `host_gb` GiB of host memory (none: no tier) per replica."""
    spec = {"engines": [{"engine": {"name": "e"}, "host_memory_gb": host_gb}]} if host_gb else None
    manifest = {
        "engines": [{"name": "e", "gpus": 2 * replicas, "gpu_type": "B200", "replicas": replicas}],
        "config": {"window": [0, 600]},
        "spec": spec,
    }
    with RunWriter(root / "r", Manifest.model_validate(manifest)) as w:
        for i in range(60):
            t = i * 10.0
            w.add(
                RequestRecord(
                    engine="e", session=i, trajectory=f"t{i}", agent="main", turn=0,
                    scheduled_s=t, sent_s=t, first_token_s=t + 1, done_s=t + 2,
                    prompt_tokens=1000, cached_tokens=500, ideal_cached_tokens=500,
                    output_tokens=10, expected_output_tokens=10,
                )
            )  # fmt: skip
    return root / "r"


def _page(root: str) -> None:
    from pathlib import Path

    from dashboards.views import pricing_whatif

    pricing_whatif.render(Path(root))


def _table(at: AppTest) -> pd.DataFrame:
    return at.dataframe[0].value.set_index("engine")


def _input(at: AppTest, label: str) -> Any:
    return next(n for n in at.number_input if n.label.startswith(label))


@pytest.mark.usefixtures("fresh_cache")
def test_host_size_and_rate_move_the_cost_side(tmp_path: Path) -> None:
    _write(tmp_path, 64.0)
    at = AppTest.from_function(_page, args=(str(tmp_path),), default_timeout=60).run()
    assert not at.exception and not at.error
    assert _input(at, "Host memory per engine").value == 64.0  # the run's own
    assert _input(at, "Host memory rate").value == pytest.approx(SHIPPED_RATE)
    row = _table(at).loc["e"]
    assert row["host_cost_per_gpu_hour"] == pytest.approx(64 * SHIPPED_RATE / 2)
    profit = row["profit_per_gpu_hour"]
    assert row["net_profit_per_gpu_hour"] == pytest.approx(profit - 64 * SHIPPED_RATE / 2)
    captions = " ".join(c.value for c in at.caption)
    assert "hit rate and token rates are the run's" in captions
    assert "replay plan-host" in captions and "measured with 64 GiB" in captions
    keys = [c.proto.id for c in at.get("plotly_chart")]
    assert any("whatif_host_curve" in k for k in keys), keys
    # A larger host at another rate: the cost moves, the profit before it does not.
    _input(at, "Host memory per engine").set_value(512.0).run()
    _input(at, "Host memory rate").set_value(0.01).run()
    assert not at.exception
    row = _table(at).loc["e"]
    assert row["profit_per_gpu_hour"] == pytest.approx(profit)
    assert row["host_cost_per_gpu_hour"] == pytest.approx(2.56)  # 512 × 0.01 ÷ 2
    assert row["net_profit_per_gpu_hour"] == pytest.approx(profit - 2.56)
    assert "the page's rate" in " ".join(c.value for c in at.caption)


@pytest.mark.usefixtures("fresh_cache")
def test_a_run_without_host_memory_shows_its_table_as_before(tmp_path: Path) -> None:
    _write(tmp_path, None)
    at = AppTest.from_function(_page, args=(str(tmp_path),), default_timeout=60).run()
    assert not at.exception and not at.error
    assert _input(at, "Host memory per engine").value == 0.0
    table = _table(at)
    assert not {c for c in table.columns if c.startswith(("host_", "net_profit"))}
    _input(at, "Host memory per engine").set_value(128.0).run()
    row = _table(at).loc["e"]
    assert row["host_cost_per_gpu_hour"] == pytest.approx(128 * SHIPPED_RATE / 2)


@pytest.mark.usefixtures("fresh_cache")
def test_a_run_whose_replicas_hold_more_host_memory_than_one_may_opens(tmp_path: Path) -> None:
    """A fleet of 2 replicas at the largest host memory a replica may have (1,048,576 GiB)
    holds twice that; the size input's default used to pass its bound and stop the page
    (StreamlitValueAboveMaxError)."""
    _write(tmp_path, 1_048_576.0, replicas=2)
    at = AppTest.from_function(_page, args=(str(tmp_path),), default_timeout=60).run()
    assert not at.exception and not at.error
    assert _input(at, "Host memory per engine").value == 2 * 1_048_576.0


@pytest.mark.usefixtures("fresh_cache")
def test_a_host_rate_past_the_flags_bound_is_refused_in_the_pricing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpus.yaml's host_memory rate has the flag's bound (1,000 USD per GiB-hour): 5,000
    passed the file's old bound (1,000,000) and stopped the page with
    StreamlitValueAboveMaxError; now the page says which field of which file."""
    shipped = Path(__file__).resolve().parents[3] / "configs" / "pricing"
    pricing = tmp_path / "config" / "pricing"
    shutil.copytree(shipped, pricing)
    gpus = pricing / "gpus.yaml"
    gpus.write_text(gpus.read_text().replace("usd_per_gb_hour: 0.00072", "usd_per_gb_hour: 5000"))
    monkeypatch.setenv("REPLAY_CONFIG_DIR", str(tmp_path / "config"))
    _write(tmp_path / "runs", 64.0)
    at = AppTest.from_function(_page, args=(str(tmp_path / "runs"),), default_timeout=60).run()
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "field 'host_memory.usd_per_gb_hour': must be at most 1,000" in errors


def test_the_curve_is_profit_less_size_times_rate_over_gpus() -> None:
    priced = pd.DataFrame(
        {"engine": ["a", "b", "c"], "gpus": [2, 8, 1], "profit_per_gpu_hour": [5.0, 1.0, None]}
    )
    curve = net_profit_vs_host_memory(priced, 0.004, np.array([0.0, 512.0]))
    got = curve.set_index(["engine", "host_gb"])["net_profit_per_gpu_hour"]
    assert got[("a", 512.0)] == pytest.approx(5.0 - 1.024)
    assert got[("b", 512.0)] == pytest.approx(1.0 - 0.256)
    assert got[("a", 0.0)] == 5.0 and "c" not in set(curve["engine"])  # nothing to price
    assert "host_memory_gb" not in with_host_gb(priced.assign(host_memory_gb=64.0), 0)
    assert set(with_host_gb(priced, 96)["host_memory_gb"]) == {96.0}
