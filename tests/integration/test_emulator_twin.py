"""Twin check: `replay simulate` (engine timing) predicts what an emulated live run measures.

Both executors share the workload rules, the engine model and the cache policies; they differ
in how prefix identity is known (the simulator from trace hash ids and lineage, the emulator
from the token ids the live client actually sends) and in wall-clock noise. On a small run in
the healthy regime the hit rates must agree within TOLERANCE (absolute), per engine.
"""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

import pytest

from replay.client.config import EngineSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.engines.emulator.caches import cache_settings
from replay.engines.emulator.defaults import DefaultRun, scaled_profile
from replay.engines.emulator.launch import start_emulator_group
from replay.profiles import load_profile
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.synth import Knobs, SynthConfig, synth_lines
from replay.workload import WorkloadConfig

TOLERANCE = 0.05  # absolute difference in window hit rate
SESSIONS = 3
DURATION_S = 600.0
WINDOW = (200.0, 600.0)
TIME_SCALE = 60.0
TOKEN_SCALE = 32.0
ENGINES = ["flashstate", "vllm", "sglang"]


def _twin(tmp_path: Path, p_side: float) -> tuple[dict[str, float], dict[str, float]]:
    """(measured by an emulated live run, predicted by the simulator) window hit rates."""
    trace_path = tmp_path / "twin.jsonl.gz"
    with gzip.open(trace_path, "wb") as fh:
        synth = SynthConfig(n_trajectories=12, seed=3, scale=TOKEN_SCALE)
        for line in synth_lines(synth, Knobs(p_side=p_side)):
            fh.write(line + b"\n")
    trace = load_trace(trace_path)
    d = DefaultRun(
        engines=ENGINES,
        sessions=SESSIONS,
        duration_min=DURATION_S / 60,
        window=(WINDOW[0] / 60, WINDOW[1] / 60),
        time_scale=TIME_SCALE,
        token_scale=TOKEN_SCALE,
        blocks=600,
    )
    wc = WorkloadConfig(sessions=SESSIONS, duration_s=DURATION_S, window=WINDOW, seed=0)
    with start_emulator_group(d.emulator_configs(), timeout_s=60) as group:
        specs = [
            EngineSpec(name=e, kind=e, url=u, gpus=2, gpu_type="B200", vocab_size=151_552)
            for e, u in group.urls.items()
        ]
        plan = RunPlan(
            engines=specs,
            trace=trace,
            workload=wc,
            out_dir=tmp_path / "live",
            time_scale=TIME_SCALE,
            clock_scale=TIME_SCALE,
        )
        outcome = asyncio.run(run_live(plan))
    assert outcome.status == "completed"
    measured = {e: outcome.summary["engines"][e]["hit_rate"] for e in ENGINES}  # type: ignore[index]

    profile = scaled_profile(load_profile(d.model), TOKEN_SCALE)
    predicted = {}
    for e in ENGINES:
        st = cache_settings(e, profile, TOKEN_SCALE, d.blocks)
        cfg = SimConfig(
            policy=e,
            sessions=SESSIONS,
            seed=0,
            timing="engine",
            duration_s=DURATION_S,
            window=WINDOW,
            policy_opts=st.options,
            capacity_blocks=st.capacity_blocks,
        )
        predicted[e] = simulate(trace, cfg, profile=st.profile).summary["hit_rate"]
    print(
        "twin (measured, predicted):",
        {e: (round(measured[e], 3), round(predicted[e], 3)) for e in ENGINES},
    )
    return measured, predicted


@pytest.mark.slow
def test_simulator_predicts_the_emulated_hit_rate(tmp_path: Path) -> None:
    """Agents that only extend their context (and edit it): both executors must agree."""
    measured, predicted = _twin(tmp_path, p_side=0.0)
    for e in ENGINES:
        assert abs(measured[e] - predicted[e]) <= TOLERANCE, (e, measured[e], predicted[e])


@pytest.mark.slow
def test_simulator_predicts_the_emulated_hit_rate_with_side_requests(tmp_path: Path) -> None:
    """Side calls too: both resume the main turn after one from the main turn before it."""
    measured, predicted = _twin(tmp_path, p_side=Knobs().p_side)
    for e in ENGINES:
        assert abs(measured[e] - predicted[e]) <= TOLERANCE, (e, measured[e], predicted[e])
