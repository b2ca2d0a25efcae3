"""A simulated run that measured no request (a 3-second run: only its priming requests, none
with its first token inside the window): its summary row has None, not 0.0, for every figure
over the measured requests (`replay.sim.measures.MEASURED_ONLY`), summary.csv leaves those
cells empty, and the seed band (`replay.sim.band`) gives such a seed no point."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from replay.runspec.sweep import manifest_spec
from replay.sim.band import simulate_band
from replay.sim.runner import SimConfig, simulate
from replay.sim.sweep import run_sweep
from replay.traces import load_trace, sample_path
from replay.traces.model import Trace

# The bundled sample (token scale 16) for 3 s: nothing but the priming requests.
BLIND = SimConfig(
    policy="flashstate", sessions=2, duration_s=3.0, window=(1.0, 3.0), warmup_s=0.0,
    token_scale=16.0,
)  # fmt: skip
# The same point for 6 minutes, measured over minutes 2-6: requests measured.
SEEN = replace(BLIND, duration_s=360.0, window=(120.0, 360.0), warmup_s=10.0)


@pytest.fixture(scope="module")
def sample() -> Trace:
    return load_trace(sample_path())


@pytest.mark.parametrize(
    "cfg",
    [
        BLIND,
        replace(BLIND, policy="sglang", timing="engine", host_memory_gb=64.0),
        replace(
            BLIND, policy="sglang", timing="engine", host_memory_gb=64.0, external_memory_gb=256.0
        ),
    ],
    ids=["trace-timing", "engine-timing-host-tier", "external-store"],
)
def test_a_run_that_measured_nothing_has_none_for_the_figures_over_measured_requests(
    sample: Trace, cfg: SimConfig
) -> None:
    row = simulate(sample, cfg).summary
    assert row["requests"] == 0 and row["all_requests"] > 0
    unknown = {"hit_rate", "ideal_hit_rate", "median_uncached_tokens",
               "redundant_prefill_per_request", "placement_miss_per_request",
               "dependency_miss_per_request", "capacity_miss_per_request"}  # fmt: skip
    if cfg.timing == "engine":
        unknown |= {"ttft_p50_s", "ttft_p90_s", "latency_p50_s", "latency_mean_s"}
        unknown |= {"host_hit_rate", "host_hit_share"}
        # A token rate over the window is a measurement even at zero: it stays a number.
        assert isinstance(row["output_tokens_per_min"], float)
    if cfg.external_memory_gb:
        unknown |= {"external_hit_rate", "external_hit_share"}
    assert {k: row[k] for k in unknown} == dict.fromkeys(unknown)  # None, not 0.0
    # Counts, and the working set (a time average over the window), are not per request.
    assert row["overflow_requests"] == 0 and isinstance(row["working_set_ratio"], float)
    if cfg.timing == "engine":
        assert row["host_hit_requests"] == 0


def test_summary_csv_leaves_the_cells_empty_where_nothing_was_measured(
    sample: Trace, tmp_path: Path
) -> None:
    configs = [BLIND, replace(SEEN, policy="vllm")]
    rows = run_sweep(sample, configs, tmp_path, trace_source=str(sample_path()),
                     spec_of=lambda c: manifest_spec(c, str(sample_path())))  # fmt: skip
    with (tmp_path / "summary.csv").open() as fh:
        blind, seen = list(csv.DictReader(fh))
    assert blind["requests"] == "0" and seen["requests"] == str(rows[1]["requests"]) != "0"
    for key in ("hit_rate", "ideal_hit_rate", "median_uncached_tokens",
                "redundant_prefill_per_request", "capacity_miss_per_request"):  # fmt: skip
        assert blind[key] == "", key  # empty, not 0.0
        assert float(seen[key]) == pytest.approx(rows[1][key])  # a measured run: its number


def test_a_seed_that_measured_nothing_has_no_band_point(sample: Trace) -> None:
    from replay.sim.band import seed_point

    blind = simulate(sample, replace(BLIND, timing="engine")).summary
    assert seed_point(7, blind) is None
    seen = simulate(sample, replace(SEEN, timing="engine")).summary
    p = seed_point(7, seen)
    assert p is not None and p.seed == 7 and p.hit_rate == seen["hit_rate"] > 0


def test_the_band_leaves_out_a_seed_any_engine_measured_nothing_on(sample: Trace) -> None:
    # Seed 3 measured for six minutes, seed 4 for three seconds (nothing).
    point = [replace(SEEN, seed=3, timing="engine"), replace(BLIND, seed=4, timing="engine")]
    points = {e: [replace(c, policy=e) for c in point] for e in ("flashstate", "vllm")}
    band = simulate_band(sample, points, workers=1)
    assert band is not None and band.seeds == [3]
    for e in band.engines:
        assert [p.seed for p in e.points] == [3] and e.points[0].hit_rate > 0
    assert len(band.offered_vs_demo) == 1  # seed 3's offered load alone
    # No seed measured anything: no band at all, rather than one whose seeds all "fell".
    none = {e: [replace(BLIND, seed=s, timing="engine", policy=e) for s in (3, 4)]
            for e in ("flashstate", "vllm")}  # fmt: skip
    assert simulate_band(sample, none, workers=1) is None
