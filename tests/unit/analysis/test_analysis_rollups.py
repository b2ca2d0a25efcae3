"""Roll-ups, sweeps and pricing per engine, against hand-computed values."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

import pricing
from analysis.economics import comparison_panel, engine_economics
from analysis.rollups import bucket_labels, by_prompt_length, by_session, by_tool_gap, by_turn_depth
from analysis.runs import load_run
from analysis.sweeps import aggregate_sweep, capacity_crossing, sweep_rows

Builder = Callable[[], Any]


def _gaps(builder: Builder) -> Any:
    b = builder()
    b.req("a", 10.0, turn=0, tool_gap_s=0.5, prompt=1000, cached=900, ideal=1000)
    b.req("a", 20.0, turn=3, tool_gap_s=10.0, prompt=1000, cached=500, ideal=1000)
    b.req("a", 30.0, turn=5, tool_gap_s=12.0, prompt=3000, cached=900, ideal=3000, session=1)
    b.req("a", 40.0, turn=6, tool_gap_s=300.0, prompt=20000, cached=0, ideal=19000, session=1)
    b.req("a", 41.0, turn=6, tool_gap_s=5.0, prompt=9, priming=True)
    return load_run(b.write(config={"window": [0, 100]}))


def test_hit_rate_against_idle_gap(builder: Builder) -> None:
    r = by_tool_gap(_gaps(builder)).set_index("bucket")
    assert list(r.index) == ["0–1 s", "5–15 s", "≥ 300 s"]
    assert r.loc["0–1 s", "hit_rate"] == pytest.approx(0.9)
    assert r.loc["5–15 s", "hit_rate"] == pytest.approx(1400 / 4000)  # token-weighted
    assert r.loc["5–15 s", "requests"] == 2
    assert r.loc["5–15 s", "uncached_tokens_per_request"] == pytest.approx((500 + 2100) / 2)
    assert r.loc["≥ 300 s", "hit_rate"] == 0.0
    assert r.loc["≥ 300 s", "redundant_prefill_per_request"] == pytest.approx(19000)


def test_turn_prompt_and_session_rollups(builder: Builder) -> None:
    run = _gaps(builder)
    turns = by_turn_depth(run).set_index("bucket")
    assert list(turns.index) == ["0", "2–3", "4–7"]
    assert turns.loc["4–7", "requests"] == 2
    prompts = by_prompt_length(run).set_index("bucket")
    assert list(prompts.index) == ["0–8K tok", "16K–32K tok"]
    sessions = by_session(run).set_index("bucket")
    assert sessions.loc["session 1", "hit_rate"] == pytest.approx(900 / 23000)
    assert sessions.loc["session 0", "ideal_hit_rate"] == pytest.approx(1.0)


def test_bucket_labels() -> None:
    assert bucket_labels((0, 1, 2, 4, math.inf)) == ["0", "1", "2–3", "≥ 4"]


def _sweep_run(builder: Builder, name: str, sessions: int, seed: int, cached: int) -> Any:
    b = builder()
    b.req("a", 10.0, prompt=1000, cached=cached, ideal=1000)
    return load_run(
        b.write(
            name,
            engines=[{"name": "a", "gpus": 1}],
            config={"window": [0, 60], "sessions": sessions, "seed": seed},
            working_set_ratio=sessions / 12,
        )
    )


def test_sweep_aggregates_seeds(builder: Builder) -> None:
    runs = [
        _sweep_run(builder, "s8a", 8, 0, 900),
        _sweep_run(builder, "s8b", 8, 1, 700),
        _sweep_run(builder, "s16", 16, 0, 300),
    ]
    rows = sweep_rows(runs)
    assert sorted(rows["seed"]) == [0, 0, 1]
    agg = aggregate_sweep(rows).set_index("sessions")
    assert agg.loc[8, "runs"] == 2
    assert agg.loc[8, "hit_rate"] == pytest.approx(0.8)
    assert agg.loc[8, "hit_rate_se"] == pytest.approx(0.1)  # std 0.1414 / sqrt 2
    assert agg.loc[8, "se_source"] == "seeds"
    assert agg.loc[16, "se_source"] == "time bins"
    assert agg.loc[16, "working_set_ratio"] == pytest.approx(16 / 12)
    # ratios 8/12 and 16/12: the working set reaches the cache at 12 sessions
    assert capacity_crossing(agg.reset_index()) == {"a": pytest.approx(12.0)}


def _metrics() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "engine": ["flashstate", "vllm", "sglang"],
            "gpu_type": ["B200", "B200", None],
            "hit_rate": [0.87, 0.30, 0.06],
            "prefill_tokens_per_min_per_gpu": [4.74e6, 1.54e6, 1.29e6],
            "output_tokens_per_min_per_gpu": [30850.0, 11000.0, 7700.0],
        }
    )


def test_engine_economics_reproduces_the_demo() -> None:
    econ = engine_economics(_metrics()).set_index("engine")
    assert econ.loc["flashstate", "user_cost_per_m_input"] == pytest.approx(0.0456)
    assert econ.loc["vllm", "user_cost_per_m_input"] == pytest.approx(0.114)
    # 4.74M x 60 / 1M x $0.0456 + 30,850 x 60 / 1M x $0.50 - $8.60
    assert econ.loc["flashstate", "profit_per_gpu_hour"] == pytest.approx(5.29414)
    # the demo's $2.27 and $2.67, from its rounded inputs: 92.4M x $0.114 + $0.33 - $8.60
    assert econ.loc["vllm", "profit_per_gpu_hour"] == pytest.approx(2.2636)
    assert econ.loc["sglang", "profit_per_gpu_hour"] == pytest.approx(2.68372)
    assert econ.loc["sglang", "gpu"] == "B200"  # the catalogue's default
    assert set(econ["sheet"]) == {"zai-glm"}


def test_engine_economics_unknown_names_and_unpriced() -> None:
    with pytest.raises(pricing.PricingError, match="nope"):
        engine_economics(_metrics(), sheet="nope")
    with pytest.raises(pricing.PricingError, match="nope"):
        engine_economics(_metrics(), gpu="nope")
    m = _metrics()
    m.loc[2, "hit_rate"] = math.nan
    m.loc[1, "gpu_type"] = "TPU9"
    notes: list[str] = []
    econ = engine_economics(m, notes=notes).set_index("engine")
    assert math.isnan(econ.loc["sglang", "profit_per_gpu_hour"])
    assert any("sglang: no served requests" in n for n in notes)
    assert any("'TPU9' has no rate" in n for n in notes)


def test_comparison_panel_against_best_other() -> None:
    table = _metrics().merge(engine_economics(_metrics()), on="engine")
    panel = comparison_panel(table).set_index(["engine", "metric"])
    row = panel.loc[("flashstate", "profit_per_gpu_hour")]
    assert row["best_other"] == "sglang"  # the better of the other two, as the demo does
    assert row["better_by"] == pytest.approx(5.29414 / row["best_other_value"])
    cost = panel.loc[("flashstate", "user_cost_per_m_input")]
    assert cost["best_other"] == "vllm"
    assert cost["better_by"] == pytest.approx(0.114 / 0.0456)  # 2.5x lower
