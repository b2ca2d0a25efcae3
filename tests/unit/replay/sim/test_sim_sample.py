"""The bundled sample replays with the cache pressure of the full-size corpus it was made
from: same working set (±10%) at the source's 48 sessions and 2,531 blocks, and the
embedded default's 48 sessions need no trajectory twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replay.sim.runner import SimConfig, Timing, simulate
from replay.traces import load_trace, sample_path
from replay.traces.scale import resolve_token_scale
from replay.traces.synth import SynthConfig, write_synth

# replay/data/README.md: how the sample was made.
SAMPLE = SynthConfig(n_trajectories=240, seed=7, scale=16)


@pytest.mark.slow
def test_sample_has_the_working_set_of_its_full_size_original(tmp_path: Path) -> None:
    sample = load_trace(sample_path())
    scale = resolve_token_scale(sample, None)
    assert scale == SAMPLE.scale and len(sample.trajectories) == SAMPLE.n_trajectories
    # The full-size original, with 1,024-token hash blocks (what one 64-token block of the
    # 1/16 sample stands for): same lengths and times, a sixteenth of the ids.
    full_path = tmp_path / "full.jsonl"
    write_synth(
        full_path,
        SynthConfig(
            n_trajectories=SAMPLE.n_trajectories, seed=SAMPLE.seed, scale=1, block_size=1024
        ),
    )
    full = load_trace(full_path)
    assert resolve_token_scale(full, None) == 1.0
    common: dict[str, Any] = {"capacity_blocks": 2531, "subagents": "skip"}
    got = simulate(sample, SimConfig("vllm", 48, token_scale=scale, **common)).summary
    want = simulate(full, SimConfig("vllm", 48, **common)).summary
    assert 1.0 < want["working_set_ratio"] < 1.6
    assert got["working_set_ratio"] == pytest.approx(want["working_set_ratio"], rel=0.10)
    assert got["capacity_blocks"] == 2531 and got["block_tokens"] == 272


@pytest.mark.slow
@pytest.mark.parametrize("timing", ["trace", "engine"])
def test_the_embedded_default_replays_no_trajectory_twice(timing: Timing) -> None:
    sample = load_trace(sample_path())
    cfg = SimConfig("flashstate", 48, token_scale=16, capacity_blocks=2531, timing=timing)
    s = simulate(sample, cfg).summary
    assert s["assignments"] >= 48 and s["reused_assignments"] == 0
