"""Whole simulated runs on a small synthesized corpus: both timing modes, the records, the
summary row and the run directory."""

from __future__ import annotations

import numpy as np
import pytest

from replay.rundir import read_manifest, read_requests
from replay.runspec.sweep import manifest_spec
from replay.sim.measures import SUMMARY_COLUMNS
from replay.sim.runner import SimConfig, simulate, write_run
from replay.traces import load_trace
from tests.unit.replay.sim.conftest import cyclic_garbage


@pytest.fixture(scope="module")
def trace(small_corpus):
    return load_trace(small_corpus)


SHORT = {"duration_s": 1200.0, "window": (300.0, 1200.0)}


@pytest.mark.parametrize("timing", ["trace", "engine"])
def test_a_run_accounts_for_every_request(trace, timing):
    # 12 sessions: the calibrated corpus's sessions advance about one turn per two minutes
    res = simulate(trace, SimConfig("flashstate", 12, timing=timing, capacity_blocks=400, **SHORT))
    recs = res.records
    assert len(recs) == res.summary["all_requests"] > 50
    ok = [r for r in recs if r.status == "ok"]
    assert ok and all(r.engine == "flashstate" for r in recs)
    for r in ok:
        assert r.cached_tokens == r.resume_pos
        assert r.ideal_cached_tokens >= r.resume_pos
        misses = r.placement_miss + r.dependency_miss + r.capacity_miss
        assert misses == r.ideal_cached_tokens - r.resume_pos
        assert r.sent_s <= r.first_token_s <= r.done_s
    assert {r.session for r in recs} == set(range(12))
    assert any(r.priming for r in recs) and any(r.agent != "main" for r in recs)
    row = res.summary
    assert set(SUMMARY_COLUMNS) <= set(row)
    measured = [
        r
        for r in ok
        if not r.priming and r.first_token_s is not None and 300 <= r.first_token_s < 1200
    ]
    assert row["requests"] == len(measured)
    hit = sum(r.cached_tokens for r in measured) / sum(r.prompt_tokens for r in measured)
    assert row["hit_rate"] == pytest.approx(hit)
    assert 0 < row["hit_rate"] <= row["ideal_hit_rate"] <= 1
    assert row["median_uncached_tokens"] == np.median(
        [r.prompt_tokens - r.cached_tokens for r in measured]
    )
    if timing == "engine":
        assert 0 < row["ttft_p50_s"] <= row["ttft_p90_s"]
        assert row["output_tokens_per_min_per_gpu"] > 0


def test_runs_are_deterministic(trace):
    a = simulate(trace, SimConfig("vllm", 3, seed=2, capacity_blocks=300, **SHORT))
    b = simulate(trace, SimConfig("vllm", 3, seed=2, capacity_blocks=300, **SHORT))
    assert [r.as_dict() for r in a.records] == [r.as_dict() for r in b.records]
    c = simulate(trace, SimConfig("vllm", 3, seed=3, capacity_blocks=300, **SHORT))
    assert [r.trajectory for r in c.records] != [r.trajectory for r in a.records]


def test_ideal_resumes_where_the_prefix_was_computed(trace):
    res = simulate(trace, SimConfig("ideal", 3, **SHORT))
    ok = [r for r in res.records if r.status == "ok"]
    assert sum(r.resume_pos for r in ok) >= 0.95 * sum(r.ideal_cached_tokens for r in ok)
    assert res.summary["evictions"] == 0


def test_a_request_larger_than_the_cache_overflows(trace):
    res = simulate(trace, SimConfig("vllm", 2, capacity_blocks=3, **SHORT))
    over = [r for r in res.records if r.status == "overflow"]
    assert over and all("cannot hold" in (r.error or "") for r in over)
    assert res.summary["overflow_requests"] == len(over)


def test_write_run_follows_the_run_directory_contract(trace, tmp_path):
    res = simulate(trace, SimConfig("sglang", 2, **SHORT))
    spec = manifest_spec(res.config, "small.jsonl")
    run = write_run(res, tmp_path / "r1", trace_source="small.jsonl", spec=spec)
    man = read_manifest(run)
    assert man.status == "completed" and man.engines[0].name == "sglang"
    assert man.engines[0].kind == "sim" and man.seed == 0 and man.executor == "simulator"
    assert man.engines[0].flags == []  # the policy's options as key=value (none here)
    df = read_requests(run)
    assert len(df) == len(res.records)
    assert df["resume_pos"].notna().sum() > 0
    # summary.json is not the executor's: `replay simulate` has analysis.summary write it.
    assert not (run / "summary.json").exists()


@pytest.mark.parametrize("timing", ["trace", "engine"])
def test_a_finished_run_is_freed_without_the_cyclic_collector(trace, timing):
    # `release`: a run unlinks its prefix tree, requests and pending events at its end, so
    # they are freed by reference counting; the collector used to free all of it (0.15-0.25
    # s of a 48-session replay). What it may still find: a policy's own few structures.
    res, kinds = cyclic_garbage(
        lambda: simulate(trace, SimConfig("vllm", 12, timing=timing, **SHORT))
    )
    assert len(res.records) > 50
    assert kinds["SimRequest"] < 20 and kinds["ResumeInfo"] < 20
    assert kinds["linked Block"] == 0  # every block released (a policy's heap may hold some)
