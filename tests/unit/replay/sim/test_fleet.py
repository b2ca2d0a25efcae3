"""The simulator's fleet end to end, small: N replicas of the engine model behind each
router on the bundled sample; records name their replica, the run directory counts every
replica's GPUs, and per-replica caches are separate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replay.fleet import router_names
from replay.rundir import read_manifest, read_requests
from replay.runspec.sweep import manifest_spec
from replay.sim.fleet import FleetConfig, simulate_fleet
from replay.sim.runner import SimConfig, simulate
from replay.sim.sweep import plan, run_sweep
from replay.traces import load_trace, sample_path
from replay.traces.model import Trace
from tests.unit.replay.sim.conftest import cyclic_garbage


@pytest.fixture(scope="module")
def sample() -> Trace:
    return load_trace(sample_path())


def _cfg(router: str, replicas: int = 2, timing: str = "engine") -> FleetConfig:
    return FleetConfig(
        policy="flashstate", sessions=6, timing=timing,  # type: ignore[arg-type]
        duration_s=240.0, window=(60.0, 240.0), token_scale=16.0, warmup_s=30.0,
        replicas=replicas, router=router,
    )  # fmt: skip


@pytest.mark.parametrize("router", router_names())
def test_every_router_runs_and_names_the_replica(sample: Trace, router: str) -> None:
    res = simulate_fleet(sample, _cfg(router))
    recs = [r for r in res.records if r.status == "ok"]
    assert recs and all(r.replica in (0, 1) and r.router == router for r in recs)
    assert all(r.route_branch for r in recs)
    assert res.summary["replicas"] == 2 and res.summary["router"] == router
    assert res.summary["requests"] > 10
    assert "ttft_p50_s" in res.summary


def test_one_replica_fleet_is_the_single_engine(sample: Trace) -> None:
    """A fleet of one replica is the same simulation as the engine alone."""
    f = simulate_fleet(sample, _cfg("round_robin", replicas=1))
    c = _cfg("round_robin", replicas=1)
    base = SimConfig(**{k: getattr(c, k) for k in SimConfig.__dataclass_fields__})
    s = simulate(sample, base)
    assert [r.cached_tokens for r in f.records] == [r.cached_tokens for r in s.records]
    assert [r.first_token_s for r in f.records] == [r.first_token_s for r in s.records]


def test_sticky_routing_beats_round_robin_on_hits(sample: Trace) -> None:
    rr = simulate_fleet(sample, _cfg("round_robin", replicas=4))
    sh = simulate_fleet(sample, _cfg("session_hash", replicas=4))
    assert sh.summary["hit_rate"] > rr.summary["hit_rate"]
    # round robin scatters a conversation's turns: its misses are placement misses
    assert rr.summary["placement_miss_per_request"] > sh.summary["placement_miss_per_request"]


@pytest.mark.parametrize("timing", ["engine", "trace"])
def test_a_finished_fleet_is_freed_without_the_cyclic_collector(sample: Trace, timing: str) -> None:
    # `replay.sim.runner.release` over every replica's cache (test_sim_runner.py says why)
    res, kinds = cyclic_garbage(lambda: simulate_fleet(sample, _cfg("cache_aware", timing=timing)))
    assert len(res.records) > 20
    assert kinds["SimRequest"] < 20 and kinds["ResumeInfo"] < 20
    assert kinds["linked Block"] == 0  # every block released (a policy's heap may hold some)


def test_trace_timing_fleet(sample: Trace) -> None:
    res = simulate_fleet(sample, _cfg("cache_aware", timing="trace"))
    assert {r.replica for r in res.records if r.status == "ok"} <= {0, 1}


def test_sweep_writes_fleet_runs_with_all_gpus(sample: Trace, tmp_path: Path) -> None:
    common: dict[str, Any] = dict(
        model="glm-5.3-flash", timing="engine", duration_s=240.0, window=(60.0, 240.0),
        token_scale=16.0, warmup_s=30.0,
    )  # fmt: skip
    configs = plan(["flashstate"], [6], 1, replicas=[2], routers=["state_aware"], **common)
    assert [c.run_name for c in configs] == ["flashstate-r2-state_aware-s6-seed0"]
    run_sweep(sample, configs, tmp_path, spec_of=manifest_spec)
    run = tmp_path / configs[0].run_name
    eng = read_manifest(run).engines[0]
    assert eng.gpus is not None and eng.gpus % 2 == 0
    assert "replicas=2" in eng.flags and "router=state_aware" in eng.flags
    df = read_requests(run)
    assert set(df["replica"].dropna().astype(int)) == {0, 1}
    assert (tmp_path / "summary.csv").read_text().count("state_aware") >= 1
