"""Window metrics against hand-computed values on small run directories."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.metrics import window_metrics
from analysis.runs import load_run
from analysis.summary import build_summary, write_summary

Builder = Callable[[], Any]


def _scenario(builder: Builder, name: str = "run", **config: Any) -> Path:
    b = builder()
    # engine a, window [100, 200)
    b.req("a", 100.0, first=101.0, done=102.0, prompt=5000, priming=True)  # excluded
    b.req("a", 110.0, first=112.0, done=122.0, prompt=1000, cached=600, ideal=900, output=100)
    b.req("a", 190.0, first=195.0, done=215.0, prompt=2000, cached=1000, ideal=1800, output=200)
    b.req("a", 80.0, first=90.0, done=110.0, prompt=3000, cached=0, output=100)  # before
    b.req("a", 150.0, first=None, done=None, status="error", prompt=500)
    b.req("a", 160.0, first=None, done=None, status="overflow", prompt=900000)
    b.req("a", 170.0, first=None, done=None, status="cancelled")
    # engine b (2 GPUs): a simulated request with a known miss split
    b.req(
        "b",
        120.0,
        first=121.0,
        done=131.0,
        prompt=4000,
        cached=3000,
        ideal=4000,
        output=60,
        resume_pos=3000,
        placement_miss=600,
        dependency_miss=300,
        capacity_miss=100,
    )
    # null first/done must be None for the records
    for r in b.rows:
        if r.status in ("error", "overflow", "cancelled"):
            r.first_token_s = None
            r.done_s = None
    return b.write(name, config={"window": [100, 200], "sessions": 1, **config})


def test_window_metrics_hand_computed(builder: Builder) -> None:
    run = load_run(_scenario(builder))
    m = window_metrics(run).set_index("engine")
    a, b = m.loc["a"], m.loc["b"]
    minutes = 100 / 60
    assert a["requests"] == 2
    assert a["prefill_tokens_per_min_per_gpu"] == pytest.approx(3000 / minutes)
    # r2 all 100, r3 5 of 20 s -> 50, the early request 10 of 20 s -> 50
    assert a["output_tokens_per_min_per_gpu"] == pytest.approx(200 / minutes)
    assert a["hit_rate"] == pytest.approx(1600 / 3000)
    assert a["ideal_hit_rate"] == pytest.approx(2700 / 3000)
    assert a["ttft_p50"] == pytest.approx(3.5)
    assert a["ttft_p90"] == pytest.approx(4.7)
    assert a["ttft_p99"] == pytest.approx(4.97)
    assert a["e2e_p50"] == pytest.approx(18.5)
    assert a["e2e_mean"] == pytest.approx(18.5)
    assert a["error_rate"] == pytest.approx(0.25)  # 1 of 4 (cancelled left out)
    assert a["overflow_rate"] == pytest.approx(0.25)
    assert a["uncached_tokens_per_request"] == pytest.approx(700)
    assert a["redundant_prefill_per_request"] == pytest.approx(550)
    assert a["miss_source"] == "ideal − reported"
    assert math.isnan(a["placement_miss_per_request"])
    assert math.isnan(a["counter_hit_rate"])
    assert b["gpus"] == 2
    assert b["prefill_tokens_per_min_per_gpu"] == pytest.approx(4000 / minutes / 2)
    assert b["output_tokens_per_min_per_gpu"] == pytest.approx(60 / minutes / 2)
    assert b["redundant_prefill_per_request"] == pytest.approx(1000)
    assert b["miss_source"] == "simulated"
    assert (b["placement_miss_per_request"], b["dependency_miss_per_request"]) == (600, 300)
    assert b["capacity_miss_per_request"] == 100
    assert m.loc["a", "window_s"] == 100


def test_explicit_window_overrides_manifest(builder: Builder) -> None:
    run = load_run(_scenario(builder))
    m = window_metrics(run, (0, 100)).set_index("engine")
    assert m.loc["a", "requests"] == 1  # only the request whose first token is at 90
    assert m.loc["b", "requests"] == 0
    assert math.isnan(m.loc["b", "hit_rate"])


def test_trajectories_finished_when_session_moves_on(builder: Builder) -> None:
    b = builder()
    b.req("a", 10.0, session=0, trajectory="x", turn=0, done=20.0)
    b.req("a", 30.0, session=0, trajectory="x", turn=1, done=40.0)  # x ends at 40
    b.req("a", 50.0, session=0, trajectory="y", turn=0, done=60.0)  # y still running
    b.req("a", 10.0, session=1, trajectory="z", turn=0, done=150.0)  # z ends outside
    b.req("a", 160.0, session=1, trajectory="w", turn=0, done=170.0)
    b.req("a", 10.0, session=2, trajectory="v", turn=0, status="error", done=11.0)  # abandoned
    b.req("a", 20.0, session=2, trajectory="u", turn=0)
    b.req("a", 35.0, session=0, trajectory="x", turn=0, agent="sub-1", done=45.0)  # subagent
    run = load_run(b.write(config={"window": [0, 100]}))
    m = window_metrics(run).set_index("engine")
    assert m.loc["a", "trajectories_finished"] == 1


def test_gpus_default_to_one_with_a_note(builder: Builder) -> None:
    b = builder()
    b.req("c", 1.0)
    run = load_run(b.write(engines=[{"name": "c"}]))
    assert run.engine_info("c").gpus == 1
    assert any("assumed 1" in n for n in run.notes)
    # no window in the manifest: the whole run
    assert run.default_window().source.startswith("whole run")


def test_counter_hit_rate_from_server_metrics(builder: Builder) -> None:
    b = builder()
    b.req("a", 150.0)
    run_dir = b.write(config={"window": [100, 200]})
    samples = {
        "engine": ["a"] * 6,
        "t_s": [50.0, 100.0, 200.0, 50.0, 100.0, 200.0],
        "metric": ["vllm:prefix_cache_hits_total"] * 3 + ["vllm:prefix_cache_queries_total"] * 3,
        "value": [10.0, 100.0, 400.0, 20.0, 200.0, 600.0],
    }
    pq.write_table(pa.table(samples), run_dir / "server_metrics.parquet")
    m = window_metrics(load_run(run_dir)).set_index("engine")
    assert m.loc["a", "counter_hit_rate"] == pytest.approx(300 / 400)


@pytest.mark.rundir_unchecked  # an older summary.json with a top-level key of its own
def test_summary_keeps_executor_keys_and_writes_json(builder: Builder) -> None:
    run_dir = _scenario(builder)
    (run_dir / "summary.json").write_text(
        '{"engines": {"b": {"working_set_ratio": 1.34, "resident_checkpoints": 17, "hit_rate": 9}},'
        ' "simulator": {"policy": "b"}, "window": [0, 1]}'
    )
    run = load_run(run_dir)
    summary = build_summary(run)
    eng = summary.engines["b"]
    assert eng["resident_checkpoints"] == 17
    assert eng["working_set_ratio"] == 1.34
    assert eng["hit_rate"] == pytest.approx(0.75)  # recomputed, not the stale 9
    assert summary.window == (100.0, 200.0)  # recomputed
    # A top-level key this version does not know is dropped on read (the read rule).
    assert "simulator" not in summary.model_dump()
    assert summary.engines["a"]["placement_miss_per_request"] is None  # NaN -> null
    assert summary.engines["a"]["overflow_flagged"] is True
    path = write_summary(run)
    assert load_run(run_dir).summary == summary
    assert path.name == "summary.json"


def test_prefill_counts_every_first_token_but_hit_rate_only_ok(builder: Builder) -> None:
    b = builder()
    b.req("a", 10.0, first=11.0, done=20.0, prompt=1000, cached=800, ideal=1000)
    # timed out after its first token: prefilled (counts in prefill), not measured
    b.req("a", 30.0, first=31.0, done=None, prompt=3000, cached=0, ideal=3000, status="timeout")
    b.rows[-1].done_s = None
    run = load_run(b.write(config={"window": [0, 60]}))
    m = window_metrics(run).set_index("engine")
    assert m.loc["a", "prefill_tokens_per_min_per_gpu"] == pytest.approx(4000.0)
    assert m.loc["a", "requests"] == 1
    assert m.loc["a", "hit_rate"] == pytest.approx(0.8)
    assert m.loc["a", "ttft_p99"] == pytest.approx(1.0)
    assert m.loc["a", "error_rate"] == pytest.approx(0.5)


def test_token_scale_reads_throughput_at_full_size(builder: Builder) -> None:
    """A run of a trace scaled down by S (config.token_scale) reports token throughputs and
    per-request token counts × S (every shown token figure at full size, never mixed);
    rates, latencies and the raw token totals are unchanged."""
    plain = window_metrics(load_run(_scenario(builder))).set_index("engine")
    scaled = window_metrics(load_run(_scenario(builder, "scaled", token_scale=16)))
    scaled = scaled.set_index("engine")
    for col in (
        "prefill_tokens_per_min_per_gpu",
        "output_tokens_per_min_per_gpu",
        "uncached_tokens_per_request",
        "redundant_prefill_per_request",
    ):
        assert scaled.loc["a", col] == pytest.approx(16 * plain.loc["a", col])
    for col in ("hit_rate", "ttft_p50", "prompt_tokens"):
        assert scaled.loc["a", col] == pytest.approx(plain.loc["a", col])
    assert (plain.loc["a", "token_scale"], scaled.loc["a", "token_scale"]) == (1.0, 16.0)
