"""The source's shape on a synthesized corpus, small and bounded: as load rises past the
cache, the vLLM-like hit rate collapses while FlashState holds far higher; dense
checkpointing collapses further; ASC placement with per-allocation LRU stays far below
FlashState (placement alone is not what holds). The full 16–48-session table is a script
run: `scripts/bench_sim.py --full-table`.

The corpus is scaled down 4× in tokens, so the profile's blocks, chunk and cost unit are
scaled by the same factor: the same geometry at a quarter of the work."""

from __future__ import annotations

import pytest

from replay.profiles import load_profile
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.synth import SynthConfig, write_synth


@pytest.mark.slow
def test_vllm_collapses_under_load_while_flashstate_holds(tmp_path):
    path = tmp_path / "mid.jsonl"
    write_synth(path, SynthConfig(n_trajectories=80, seed=3, scale=4))
    trace = load_trace(path)
    glm = load_profile("glm-5.3-flash")
    prof = glm.model_copy(
        update={
            "block_tokens": glm.block_tokens // 4,
            "chunk_tokens": glm.chunk_tokens // 4,
            "cost_unit_tokens": glm.cost_unit_tokens // 4,
        }
    )

    def hit(policy: str, sessions: int) -> float:
        cfg = SimConfig(
            policy, sessions, duration_s=1800.0, window=(600.0, 1800.0), capacity_blocks=3300
        )
        return float(simulate(trace, cfg, prof).summary["hit_rate"])

    vllm_low, vllm_high = hit("vllm-like", 8), hit("vllm-like", 40)
    fs_high = hit("flashstate", 40)
    assert vllm_low > 0.8
    assert vllm_low - vllm_high > 0.25  # the collapse
    assert fs_high > vllm_high + 0.12  # FlashState holds
    assert hit("dense", 40) < vllm_high - 0.05  # dense floods the cache
    assert hit("asc-lru", 40) < fs_high - 0.1  # placement alone does not hold
