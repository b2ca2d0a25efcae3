"""The seed band (`replay.band`): the held-or-fell rule, the verdict in words, band.json's
round trip, the configs of a run's point, and a real band simulated on the bundled sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.band import (
    BAND_FILE,
    HELD_SHARE,
    Band,
    EngineBand,
    SeedPoint,
    read_band,
    write_band,
)
from replay.client.config import EngineSpec
from replay.runspec.model import EngineRun, RunSpec, WorkloadSpec
from replay.runspec.sweep import band_configs
from replay.sim.band import simulate_band
from replay.traces import load_trace, sample_path


def _point(seed: int, hit: float, ideal: float = 0.98) -> SeedPoint:
    return SeedPoint(seed, hit, ideal, ttft_p50_s=1.0, output_tokens_per_min=1e4)


def _band(hits: dict[str, list[float]]) -> Band:
    n = len(next(iter(hits.values())))
    return Band(
        sessions=37,
        seeds=list(range(n)),
        timing="engine",
        executor="sim-engine",
        engines=[
            EngineBand(name, name, [_point(k, h) for k, h in enumerate(v)])
            for name, v in hits.items()
        ],
        offered_vs_demo=[0.9, 1.1][:n],
    )


def test_a_seed_holds_at_half_its_ideal_hit_rate_and_falls_below() -> None:
    assert _point(0, HELD_SHARE * 0.98).held
    assert not _point(0, HELD_SHARE * 0.98 - 0.001).held


def test_the_verdict_names_the_engines_on_the_cliff_with_their_count() -> None:
    band = _band({"flashstate": [0.8, 0.33, 0.75], "vllm": [0.1, 0.05, 0.2]})
    assert band.engine("flashstate").on_cliff  # type: ignore[union-attr]
    assert not band.engine("vllm").on_cliff  # type: ignore[union-attr]
    assert band.verdict() == "on the cliff: flashstate held in 2 of 3 seeds"
    calm = _band({"flashstate": [0.9, 0.9], "vllm": [0.1, 0.1]})
    assert calm.verdict() == (
        "off the cliff over 2 seeds: flashstate held in every seed, vllm fell in every seed"
    )


def test_band_json_round_trips_and_a_missing_or_broken_one_reads_as_none(tmp_path: Path) -> None:
    band = _band({"flashstate": [0.8, 0.33]})
    write_band(tmp_path, band)
    back = read_band(tmp_path)
    assert back is not None and back.to_json() == band.to_json()
    assert back.load == pytest.approx(1.0)
    assert read_band(tmp_path / "nowhere") is None
    (tmp_path / BAND_FILE).write_text("{not json")
    assert read_band(tmp_path) is None


def _spec(executor: str = "emulated", replicas: int = 1) -> RunSpec:
    engines = [
        EngineRun(engine=EngineSpec(name=n, url="http://x"), executor=executor, replicas=replicas)  # type: ignore[arg-type]
        for n in ("flashstate", "vllm")
    ]
    wl = WorkloadSpec(
        sessions=2, duration_min=6, window=(2.0, 6.0), seed=3, token_scale=16.0, warmup_s=10
    )
    return RunSpec(workload=wl, engines=engines)


def test_the_band_replays_the_runs_point_from_its_seed_with_engine_timing() -> None:
    points = band_configs(_spec(), seeds=2)
    assert list(points) == ["flashstate", "vllm"]  # by engine name
    configs = [c for engine in points.values() for c in engine]
    assert [(c.policy, c.seed) for c in configs] == [
        ("flashstate", 3), ("flashstate", 4), ("vllm", 3), ("vllm", 4)
    ]  # fmt: skip
    c = configs[0]
    assert (c.timing, c.sessions, c.duration_s, c.token_scale) == ("engine", 2, 360, 16.0)
    assert c.window == (120.0, 360.0)  # the run's window, in seconds
    # a warm-up longer than a short run is clamped into it, as the run's own plan does
    short = _spec().model_copy(update={"workload": WorkloadSpec(sessions=2, duration_min=0.5)})
    assert band_configs(short, 1)["flashstate"][0].warmup_s < 30


def test_no_band_for_real_engines_fleets_or_zero_seeds() -> None:
    assert band_configs(_spec("live"), 3) == {}
    assert band_configs(_spec(replicas=2), 3) == {}
    assert band_configs(_spec(), 0) == {}
    assert simulate_band(load_trace(sample_path()), {}) is None


def test_a_real_band_on_the_sample() -> None:
    band = simulate_band(load_trace(sample_path()), band_configs(_spec(), seeds=2), workers=1)
    assert band is not None and band.seeds == [3, 4]
    for e in band.engines:
        assert [p.seed for p in e.points] == [3, 4]
        assert all(0 < p.hit_rate <= p.ideal_hit_rate + 1e-9 for p in e.points)
    assert len(band.offered_vs_demo) == 2 and all(x > 0 for x in band.offered_vs_demo)
    # Two light sessions: far below the demo's load, every seed holds.
    assert band.load is not None and band.load < 0.2
    assert "off the cliff" in band.verdict()
