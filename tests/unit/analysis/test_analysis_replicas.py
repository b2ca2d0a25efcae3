"""analysis.replicas: per-replica load and hit rate, the router's branches and its predicted
overlap against the engine's reported cached tokens (issue 26), on hand-made records."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.manifest import Window
from analysis.replicas import fleet_metrics, replica_figures


def _rows() -> pd.DataFrame:
    base = dict(engine="vllm", status="ok", priming=False, scheduled_s=0.0, router="cache_aware")
    rows = [
        # replica 0: 3 requests, 300 of 600 prompt tokens cached
        {**base, "replica": 0, "first_token_s": 1.0, "prompt_tokens": 200, "cached_tokens": 100,
         "route_branch": "cache_hit", "route_overlap": 100},
        {**base, "replica": 0, "first_token_s": 2.0, "prompt_tokens": 200, "cached_tokens": 100,
         "route_branch": "cache_hit", "route_overlap": 150},
        {**base, "replica": 0, "first_token_s": 3.0, "prompt_tokens": 200, "cached_tokens": 100,
         "route_branch": "imbalanced", "route_overlap": 50},
        # replica 1: 1 request, nothing cached
        {**base, "replica": 1, "first_token_s": 4.0, "prompt_tokens": 100, "cached_tokens": 0,
         "route_branch": "cache_miss", "route_overlap": 0},
        # out of the window, failed, priming: not measured
        {**base, "replica": 1, "first_token_s": 50.0, "prompt_tokens": 100, "cached_tokens": 0},
        {**base, "replica": 1, "first_token_s": 5.0, "prompt_tokens": 100, "status": "error"},
        {**base, "replica": 1, "first_token_s": 5.0, "prompt_tokens": 100, "priming": True},
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_per_replica_figures_and_the_fleet_line() -> None:
    got = replica_figures(_rows(), Window(0.0, 10.0))
    assert got is not None and got["replicas"] == 2
    fleet = got["fleet"]
    r0, r1 = fleet["per_replica"]
    assert (r0["requests"], r1["requests"]) == (3, 1)
    assert r0["hit_rate"] == pytest.approx(0.5) and r1["hit_rate"] == 0.0
    assert r0["share"] == pytest.approx(0.75)
    assert fleet["imbalance"] == pytest.approx(3 / 2)  # busiest 3 ÷ mean 2
    assert fleet["branches"] == {"cache_hit": 2, "cache_miss": 1, "imbalanced": 1}
    assert fleet["routers"] == ["cache_aware"]
    # predicted 300 tokens where the engine reported 300 cached
    assert fleet["predicted_over_cached"] == pytest.approx(1.0)
    assert r0["predicted_overlap_tokens"] == 300
    # A load-only router predicts nothing (0 throughout): no ratio.
    flat = replica_figures(_rows().assign(route_overlap=0), Window(0.0, 10.0))
    assert flat is not None and flat["fleet"]["predicted_over_cached"] is None


def test_an_engine_without_replicas_gets_nothing() -> None:
    df = _rows().assign(replica=None)
    assert replica_figures(df, Window(0.0, 10.0)) is None
    both = pd.concat([_rows(), _rows().assign(engine="sglang", replica=None)])
    assert list(fleet_metrics(both, Window(0.0, 10.0))) == ["vllm"]
    assert fleet_metrics(_rows().drop(columns=["replica"]), Window(0.0, 10.0)) == {}
