"""Roll-ups, sweeps and pricing per engine, against hand-computed values."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

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
