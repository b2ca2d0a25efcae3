"""Hits by cache tier through the readers (issue 34; docs/cache-tiers.md): a run whose
records carry `cached_tokens_host` / `cached_tokens_external` gets the registry's tier
metrics in its window metrics, summary.json and report, priced by tier where a sheet prices a
tier apart; a run without those columns (untiered, or written before tiers) reads, summarises
and prices exactly as before, with no new key."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import pricing
from analysis import load_run, window_metrics
from analysis.economics import engine_economics, price_engines
from analysis.registry import keys, metric
from analysis.report.catalog import make_tables
from analysis.report.content import analyze
from analysis.summary import build_summary, summarize_dir
from replay.cli import app
from tests.unit.analysis.conftest import RunBuilder

TIER_KEYS = {
    "cached_tokens_host",
    "cached_tokens_external",
    "gpu_hit_rate",
    "host_hit_rate",
    "external_hit_rate",
    "host_hit_share",
    "host_hit_requests",
}
ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "replay" / "data" / "sample-weka.jsonl.gz"


def _requests(b: RunBuilder, engine: str, tiered: bool) -> RunBuilder:
    """Ten requests of 1,000 prompt tokens, 600 cached; of those, tiered: 200 from host on
    every other request (and 0 external)."""
    for i in range(10):
        tier: dict[str, Any] = {"cached_tokens_host": 200 * (i % 2), "cached_tokens_external": 0}
        b.req(engine, 10.0 * i, session=i, cached=600, ideal=700, **(tier if tiered else {}))
    return b


def _write(builder: Callable[[], RunBuilder], name: str, tiered: dict[str, bool]) -> Path:
    b = builder()
    for engine, t in tiered.items():
        _requests(b, engine, t)
    engines = [{"name": e, "gpus": 1, "gpu_type": "b200"} for e in tiered]
    return b.write(name, engines=engines, config={"window": [0, 100]})


def test_a_tiered_run_has_hits_by_tier(builder: Callable[[], RunBuilder]) -> None:
    run = load_run(_write(builder, "tiered", {"a": True}))
    (row,) = window_metrics(run).to_dict(orient="records")
    assert row["cached_tokens_host"] == 1000 and row["cached_tokens_external"] == 0
    assert row["host_hit_rate"] == pytest.approx(0.1)  # 1,000 of 10,000 prompt tokens
    assert row["gpu_hit_rate"] == pytest.approx(0.5)
    assert row["external_hit_rate"] == 0.0
    assert row["host_hit_share"] == pytest.approx(1000 / 6000)
    assert row["host_hit_requests"] == 5
    total = row["gpu_hit_rate"] + row["host_hit_rate"] + row["external_hit_rate"]
    assert total == pytest.approx(row["hit_rate"])
    entry = build_summary(run).engines["a"]
    for key in TIER_KEYS:
        assert entry[key] == pytest.approx(row[key]), key
        assert metric(key).only_when  # produced only for a cache with tiers


def test_an_untiered_run_reads_summarises_and_prices_as_before(
    builder: Callable[[], RunBuilder],
) -> None:
    """A run without tier columns (an untiered cache, or a run directory from before tiers)
    gets no tier key anywhere, and its price is the sheet's formula at its hit rate, on any
    sheet, one that prices host hits apart included."""
    run_dir = _write(builder, "untiered", {"a": False})
    run = load_run(run_dir)
    assert "cached_tokens_host" not in run.requests.columns
    table = window_metrics(run)
    assert not TIER_KEYS & set(table.columns)
    summary = summarize_dir(run_dir)
    entry = json.loads((run_dir / "summary.json").read_text())["engines"]["a"]
    assert not TIER_KEYS & set(entry)
    assert entry["hit_rate"] == pytest.approx(0.6)
    sheet = pricing.get_sheet(None)
    cost = pricing.user_cost_per_m_input(sheet, Decimal(str(entry["hit_rate"])))
    assert summary.engines["a"]["user_cost_per_m_input"] == pytest.approx(float(cost))
    apart = sheet.model_copy(update={"cached_host": Decimal("0.10")})
    same = engine_economics(table, apart)["user_cost_per_m_input"].iloc[0]
    assert same == pytest.approx(float(cost))
    names = [t.name for t in make_tables(analyze([run]))]
    assert "tiers" not in names
    (priced,) = price_engines(table).engines
    assert priced.tiers is None and "host_hit_share" not in priced.as_dict()


def test_an_untiered_engine_beside_a_tiered_one_gets_no_tier_key(
    builder: Callable[[], RunBuilder],
) -> None:
    run_dir = _write(builder, "mixed", {"a": True, "b": False})
    summarize_dir(run_dir)
    engines = json.loads((run_dir / "summary.json").read_text())["engines"]
    assert set(engines["a"]) >= TIER_KEYS
    assert not TIER_KEYS & set(engines["b"])
    (tiers,) = [t for t in make_tables(analyze([load_run(run_dir)])) if t.name == "tiers"]
    assert list(tiers.data["engine"]) == ["a"]


def test_the_report_shows_hits_by_tier(builder: Callable[[], RunBuilder]) -> None:
    run = load_run(_write(builder, "tiered", {"a": True}))
    (tiers,) = [t for t in make_tables(analyze([run])) if t.name == "tiers"]
    shown = [c.key for c in tiers.columns]
    assert shown == ["engine", "hit_rate", *keys("report.tiers")]
    md = tiers.to_markdown()
    assert "Host hit (%)" in md and "| 10.0 |" in md and "| 50.0 |" in md


def test_a_sheet_that_prices_host_hits_apart_prices_them_so(
    builder: Callable[[], RunBuilder],
) -> None:
    """Issue 34 point 4: a cached token from host memory at the sheet's price for that tier.
    Today's sheets price none apart (a host hit costs the user a GPU hit's price); one that
    does blends its cached price by the engine's tier shares."""
    table = window_metrics(load_run(_write(builder, "tiered", {"a": True})))
    sheet = pricing.get_sheet(None)
    plain = price_engines(table, sheet).engines[0].economics
    assert plain.user_cost_per_m_input == pricing.user_cost_per_m_input(sheet, plain.hit_rate)
    host = Decimal("0.09")
    apart = sheet.model_copy(update={"cached_host": host})
    econ = price_engines(table, apart).engines[0].economics
    share = Decimal(1000) / Decimal(6000)
    cached = (1 - share) * sheet.cached + share * host
    hit = econ.hit_rate
    expected = (1 - hit) * sheet.input + hit * cached  # 0.084: 0.06 + 0.6 × 0.04
    assert float(econ.user_cost_per_m_input) == pytest.approx(float(expected), rel=1e-12)
    assert econ.user_cost_per_m_input > plain.user_cost_per_m_input
    shown = price_engines(table, apart).engines[0].as_dict()
    assert shown["host_hit_share"] == pytest.approx(1 / 6) and shown["external_hit_share"] == 0
    assert shown["cached_price_per_m"] == pytest.approx(float(cached))
    assert price_engines(table, sheet).engines[0].as_dict()["cached_price_per_m"] == 0.03
    assert econ.sheet == sheet.name


def test_a_tiered_simulation_end_to_end(tmp_path: Path) -> None:
    """`replay simulate --host-memory-gb` on a tight cache: summary.json's host figures are
    the sweep's summary.csv ones, and `replay report` and `replay price` read them."""
    out = tmp_path / "sim"
    args = [
        "simulate", "--trace", str(SAMPLE), "--policies", "vllm", "--sessions", "8",
        "--timing", "engine", "--duration-min", "12", "--window", "4-12", "--seed", "1",
        "--capacity-blocks", "300", "--host-memory-gb", "60", "--out", str(out),
    ]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    (row,) = list(csv.DictReader((out / "summary.csv").open()))
    (run_dir,) = [p.parent for p in out.glob("*/summary.json")]
    (entry,) = json.loads((run_dir / "summary.json").read_text())["engines"].values()
    assert float(row["host_hit_rate"]) > 0
    for key in ("host_hit_rate", "host_hit_share"):
        assert entry[key] == pytest.approx(float(row[key]), abs=1e-12), key
    assert entry["host_hit_requests"] == int(row["host_hit_requests"])
    assert entry["external_hit_rate"] == 0.0
    assert math.isclose(
        entry["gpu_hit_rate"] + entry["host_hit_rate"], entry["hit_rate"], abs_tol=1e-12
    )
    report = tmp_path / "report"
    res = CliRunner().invoke(app, ["report", str(run_dir), "--out", str(report), "--format", "md"])
    assert res.exit_code == 0, res.output
    assert "Cache hits by tier" in (report / "report.md").read_text()
    res = CliRunner().invoke(app, ["price", str(run_dir), "--json"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["price", str(run_dir)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    host = entry["host_hit_share"]
    (row,) = [x for x in res.output.splitlines() if "of hits from host / external" in x]
    assert row.rstrip(" │").endswith(f"{host:.1%} / 0.0%"), row
    assert "cached price billed per 1M" in res.output


def test_the_price_table_of_an_untiered_run_has_no_tier_row(
    builder: Callable[[], RunBuilder],
) -> None:
    run_dir = _write(builder, "untiered", {"a": False})
    res = CliRunner().invoke(app, ["price", str(run_dir)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "hit rate" in res.output and "of hits from host" not in res.output
