"""Cross-check against the simulator: on a real simulated run directory, the analysis layer's
window metrics equal the simulator's own summary (two independent implementations of the
paper's definitions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.metrics import window_metrics
from analysis.runs import load_run
from replay.runspec.sweep import manifest_spec
from replay.sim import runner as sim_runner
from replay.traces import loader, synth


def test_metrics_match_the_simulators_summary(tmp_path: Path) -> None:
    trace_path = tmp_path / "t.jsonl"
    synth.write_synth(trace_path, synth.SynthConfig(n_trajectories=12, seed=3))
    trace = loader.load_trace(trace_path)
    cfg = sim_runner.SimConfig(
        policy="vllm", sessions=4, seed=0, duration_s=1200.0, window=(300.0, 1200.0)
    )
    result = sim_runner.simulate(trace, cfg)
    spec = manifest_spec(cfg, str(trace_path))
    run = load_run(sim_runner.write_run(result, tmp_path / "run", spec=spec))
    own = result.summary  # the simulator's own row (replay.sim.measures)
    m = window_metrics(run).set_index("engine").loc["vllm"]
    assert m["window_start_s"] == 300.0 and m["gpus"] == 2
    assert m["requests"] == own["requests"] > 0
    for key in (
        "hit_rate",
        "ideal_hit_rate",
        "redundant_prefill_per_request",
        "placement_miss_per_request",
        "dependency_miss_per_request",
        "capacity_miss_per_request",
    ):
        assert m[key] == pytest.approx(own[key]), key
    assert m["uncached_tokens_p50"] == pytest.approx(own["median_uncached_tokens"])
    assert m["working_set_ratio"] == pytest.approx(own["working_set_ratio"])
