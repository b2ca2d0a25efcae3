"""Simulated runs: subagent modes, trajectory reuse, the working set measured the source's
way, and scaled traces replayed as their full-size originals."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from replay.rundir import read_manifest
from replay.runspec.sweep import manifest_spec
from replay.sim.measures import WorkingSet
from replay.sim.runner import SimConfig, simulate, write_run
from replay.traces import load_trace
from replay.traces.model import Trace
from replay.traces.synth import SynthConfig, write_synth

SHORT: dict[str, Any] = {"duration_s": 1200.0, "window": (300.0, 1200.0)}


@pytest.fixture(scope="module")
def trace(small_corpus: Path) -> Trace:
    return load_trace(small_corpus)


def test_working_set_is_a_time_average_over_the_window() -> None:
    ws = WorkingSet((10.0, 20.0), block_tokens=100, checkpoint_blocks=5)
    ws.update(0.0, 1, 250)  # 3 blocks + 5 from before the window: 8 blocks
    ws.update(15.0, 2, 100)  # + 1 + 5 from t = 15
    ws.update(18.0, 1, None)  # conversation 1 ends at t = 18
    ws.update(30.0, 2, 1000)  # after the window: ignored
    # 8 blocks for 5 s, 14 for 3 s, 6 for 2 s, over 10 s
    assert ws.mean_blocks(30.0) == pytest.approx((8 * 5 + 14 * 3 + 6 * 2) / 10)
    short = WorkingSet((10.0, 20.0), 100, 5)
    short.update(12.0, 1, 100)
    assert short.mean_blocks(16.0) == pytest.approx(6 * 4 / 6)  # the run ended at 16 s


def test_subagent_modes(trace: Trace) -> None:
    runs = {
        mode: simulate(trace, SimConfig("vllm", 10, capacity_blocks=400, subagents=mode))
        for mode in ("concurrent", "inline", "skip")
    }
    assert all(r.agent == "main" for r in runs["skip"].records)
    for mode in ("concurrent", "inline"):
        assert any(r.agent != "main" for r in runs[mode].records), mode
    assert {r.summary["subagents"] for r in runs.values()} == {"concurrent", "inline", "skip"}
    # Inline: a parent never has a request in flight while its subagent runs in its slot.
    recs = runs["inline"].records
    for slot in {r.session for r in recs}:
        mine = sorted(
            (r for r in recs if r.session == slot and r.done_s is not None),
            key=lambda r: r.sent_s or 0.0,
        )
        for a, b in itertools.pairwise(mine):
            assert (b.sent_s or 0.0) >= (a.done_s or 0.0) - 1e-9
    # Left out, subagents take no cache: the working set is smaller than replayed beside.
    ws = {m: r.summary["working_set_ratio"] for m, r in runs.items()}
    assert ws["skip"] < ws["concurrent"]


def test_reused_trajectories_are_counted_and_start_cold(trace: Trace) -> None:
    """More sessions than trajectories: the run says how many replays repeat one, and a
    repeated trajectory's first request finds nothing another copy left."""
    n = len(trace.trajectories)
    res = simulate(trace, SimConfig("flashstate", n + 4, capacity_blocks=4000, **SHORT))
    s = res.summary
    assert s["reused_assignments"] >= 4 and s["assignments"] >= n + 4
    assert s["trajectories_replayed"] == n
    firsts: dict[tuple[int, str], int] = {}
    for r in res.records:
        if r.agent == "main":
            key = (r.session, r.trajectory)
            if key not in firsts:
                firsts[key] = r.cached_tokens or 0
    assert firsts and all(c == 0 for c in firsts.values())


def test_manifest_records_the_effective_cache_and_scale(trace: Trace, tmp_path: Path) -> None:
    res = simulate(trace, SimConfig("vllm", 2, token_scale=16, subagents="skip", **SHORT))
    m = read_manifest(write_run(res, tmp_path / "run", spec=manifest_spec(res.config)))
    cfg = m.config
    assert cfg.capacity_blocks == res.summary["capacity_blocks"] > 0
    assert cfg.block_tokens == 272 and cfg.full_size_block_tokens == 4352
    assert cfg.token_scale == 16 and m.trace.token_scale == 16
    assert m.workload.subagents == "skip" and m.workload.reused_assignments == 0
    assert m.workload.working_set_ratio == res.summary["working_set_ratio"] > 0


def test_a_scaled_trace_has_the_working_set_of_its_full_size_original(tmp_path: Path) -> None:
    """The same corpus synthesized at 1/16 and at full size (full size with 1,024-token hash
    blocks to keep the file small: the working set depends on lengths and times only)."""
    small, full = tmp_path / "small.jsonl", tmp_path / "full.jsonl"
    write_synth(small, SynthConfig(n_trajectories=10, seed=4, scale=16))
    write_synth(full, SynthConfig(n_trajectories=10, seed=4, block_size=1024))
    a, b = load_trace(small), load_trace(full)
    common: dict[str, Any] = {"capacity_blocks": 400, "subagents": "skip", **SHORT}
    ws_small = simulate(a, SimConfig("vllm", 6, token_scale=16, **common)).summary
    ws_full = simulate(b, SimConfig("vllm", 6, **common)).summary
    assert ws_full["working_set_ratio"] > 0.1
    assert ws_small["working_set_ratio"] == pytest.approx(ws_full["working_set_ratio"], rel=0.03)
    # Unscaled, the 1/16 trace would look 16× lighter (the bug the scale fixes).
    naive = simulate(a, SimConfig("vllm", 6, **common)).summary
    assert naive["working_set_ratio"] < ws_full["working_set_ratio"] / 3
