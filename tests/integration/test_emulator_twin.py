"""Twin check at scale: `replay simulate --timing engine` predicts what an emulated live run
measures, per engine, at the paper's 48 sessions.

Both run the one engine model (`replay.sim.engine.core`: scheduler, step clock, the policy's
cache) on the same trace, seed and settings; they differ in how prefix identity is known (the
simulator from trace hash ids and lineage, the emulator from the token ids the live client
sends) and in wall-clock noise (the emulator steps on the wall clock behind HTTP). Window hit
rates must agree within HIT_TOLERANCE (absolute) and TTFT p50 within TTFT_TOLERANCE
(relative).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from analysis.summary import summary_of_dir
from replay.client.config import EngineSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.emulator.defaults import load_default_run, sample_token_scale
from replay.emulator.launch import start_emulator_group
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace, sample_path
from replay.workload import WorkloadConfig

HIT_TOLERANCE = 0.03
TTFT_TOLERANCE = 0.15
# The live run's TTFT also carries each request's wall time in the client, HTTP and hashing,
# times TIME_SCALE; measured on the 2-core dev machine under load from other jobs: 70-190 ms
# (0.27-0.77 modelled s at 4×). A TTFT that short is compared within this many modelled
# seconds instead (250 ms of wall time per request).
TTFT_ALLOWANCE_S = 1.0
# SGLang, when it runs as a saturated queue: its TTFT is the queue's, and every request ahead
# adds its own wall overhead in the live run. Measured gaps: 11-16% over four runs; allowed 25%.
QUEUE_TTFT_TOLERANCE = 0.25
SESSIONS = 48
DURATION_S = 600.0
WINDOW = (200.0, 600.0)
# Slow enough that per-request wall overheads (client, HTTP, hashing) stay small in modelled
# seconds: at 30× a 20 ms overhead would add 0.6 s to every TTFT of the live run alone.
TIME_SCALE = 4.0
WARMUP_S = 120.0
# Cache blocks per engine: the default's 2,531 holds too little of the bundled sample's long
# contexts and every engine collapses into a queue (docs/embedded-default.md); the twin check
# runs where FlashState's and vLLM's caches hold (the same setting on both sides). At 4,500
# blocks vLLM sits on its cliff, where the live run's wall-clock jitter moved its hit rate by
# 0.055 (0.892 live, 0.837 simulated) in one run.
BLOCKS = 5062
ENGINES = ["flashstate", "vllm", "sglang"]


def _twin(tmp_path: Path) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
    """Per engine: (measured by an emulated live run, predicted by the simulator)."""
    trace = load_trace(sample_path())
    scale = sample_token_scale()
    d = load_default_run().model_copy(
        update={
            "engines": ENGINES,
            "time_scale": TIME_SCALE,
            "token_scale": scale,
            "blocks": BLOCKS,
        }
    )
    wc = WorkloadConfig(
        sessions=SESSIONS, duration_s=DURATION_S, window=WINDOW, seed=0, warmup_s=WARMUP_S
    )
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
            summarize=summary_of_dir,
        )
        outcome = asyncio.run(run_live(plan))
    assert outcome.status == "completed"
    manifest = json.loads((tmp_path / "live" / "manifest.json").read_text())
    for entry in manifest["engines"]:  # the manifest records each engine model's parameters
        model = entry["engine_model"]
        assert model["token_scale"] == scale and model["capacity_blocks"] > 0, entry
        assert model["admission"] == ("park" if entry["name"] == "flashstate" else "schedule")
    engines = outcome.summary["engines"]  # type: ignore[index]
    out = {}
    for e in ENGINES:
        cfg = SimConfig(
            policy=e,
            sessions=SESSIONS,
            seed=0,
            timing="engine",
            duration_s=DURATION_S,
            window=WINDOW,
            token_scale=scale,
            warmup_s=WARMUP_S,
            capacity_blocks=BLOCKS,
        )
        s = simulate(trace, cfg).summary
        m = engines[e]
        out[e] = (
            {"hit": m["hit_rate"], "ttft": m["ttft_p50"]},
            {"hit": s["hit_rate"], "ttft": s["ttft_p50_s"]},
        )
    print("twin (measured, predicted):", out)
    return out


@pytest.mark.slow
def test_simulator_predicts_the_emulated_run_at_48_sessions(tmp_path: Path) -> None:
    for e, (measured, predicted) in _twin(tmp_path).items():
        ttft_gap = abs(measured["ttft"] - predicted["ttft"])
        rel = QUEUE_TTFT_TOLERANCE if e == "sglang" else TTFT_TOLERANCE
        allowed = max(rel * predicted["ttft"], TTFT_ALLOWANCE_S)
        assert ttft_gap <= allowed, (e, measured, predicted)
        # Every engine, SGLang too: with the sample at the real corpus's pace (issue 22) and
        # SGLang's pools sized from memory, its 48 sessions no longer saturate the engine
        # (measured 0.876 against 0.899 predicted), so its hit rate is compared like the rest.
        assert abs(measured["hit"] - predicted["hit"]) <= HIT_TOLERANCE, (e, measured, predicted)
