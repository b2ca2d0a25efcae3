"""`experiments/policy_table.py`: the source's table beside ours, on a small synthesized corpus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.sim.runner import SimConfig
from tests.scripts import load_experiment


def _script(name: str):
    return load_experiment(name, register=True)


@pytest.fixture(scope="module")
def pt():
    return _script("policy_table")


def test_table_puts_ours_beside_the_source(pt, small_corpus):
    trace = pt.load_corpus(str(small_corpus), "skip")
    assert all(not t.subagents for t in trace.trajectories)
    assert Path(f"{small_corpus}.skip.pickle").exists()  # the next load skips the parse
    configs = [
        SimConfig(p, n, seed=0, capacity_blocks=200, policy_opts=dict(pt.SOURCE_RULES))
        for p in ("vllm-like", "asc-unit-lru")
        for n in (2, 4)
    ]
    rows = pt.run_configs(trace, configs, workers=1)
    assert [r["label"] for r in rows] == [c.run_name for c in configs]
    text = pt.table(rows, ["vllm-like", "asc-unit-lru"], [2, 4], {p: p for p in pt.POLICIES})
    assert "| vllm-like |" in text and "61.1% / 27.5%" in text and "73.1% / 59.9%" in text
    assert "working set ÷ cache" in text and "At 4 sessions" in text
    assert "(48,512)" in text  # the source's median uncached tokens beside ours


def test_durations_scale_and_tool_gaps_stay(pt, small_corpus):
    trace = pt.load_corpus(str(small_corpus), "skip")
    half = pt.scale_durations(trace, 0.5)
    a, b = trace.trajectories[0], half.trajectories[0]
    assert (b.api_time == a.api_time * 0.5).all()
    assert [a.gap_before(i) for i in range(1, 4)] == [b.gap_before(i) for i in range(1, 4)]


def test_a_malformed_opt_names_the_expected_form(pt):
    assert pt.parse_opts(["vllm-like:hold_chunk_state=false", "dense:every=544"]) == {
        "vllm-like": {"hold_chunk_state": False},
        "dense": {"every": 544},
    }
    with pytest.raises(SystemExit, match=r"--opt 'dense': expected POLICY:KEY=VALUE"):
        pt.parse_opts(["dense"])


def test_reshaped_gaps_keep_their_order_and_put_the_share_past_the_cap(pt, small_corpus):
    trace = pt.load_corpus(str(small_corpus), "skip")
    before = [t.gap_before(i) for t in trace.trajectories for i in range(1, t.num_requests)]
    shaped = pt.gaps_reshaped(trace, 10.0, 1.3, 0.25)
    after = [t.gap_before(i) for t in shaped.trajectories for i in range(1, t.num_requests)]
    assert len(after) == len(before) > 20
    past = sum(g >= 300.0 for g in after) / len(after)
    assert 0.25 <= past < 0.26  # the share, plus the lognormal's own rare tail past 300 s
    # rank for rank: a gap longer than another stays at least as long
    order = np.argsort(np.array(before), kind="stable")
    assert (np.diff(np.array(after)[order]) >= 0).all()
    short = sorted(g for g in after if g < 300.0)
    assert 3.0 < short[len(short) // 2] < 30.0  # the lognormal's median, 10 s
    assert [t.api_time.tolist() for t in shaped.trajectories] == [
        t.api_time.tolist() for t in trace.trajectories
    ]


def test_gaps_with_context_lengthen_the_long_contexts_gaps(pt, small_corpus):
    trace = pt.load_corpus(str(small_corpus), "skip")
    scaled = pt.gaps_with_context(trace, 1.0)
    t, u = trace.trajectories[0], scaled.trajectories[0]
    i = int(t.input_tokens[1:].argmax()) + 1
    j = int(t.input_tokens[1:].argmin()) + 1
    ratio_i = u.gap_before(i) / max(t.gap_before(i), 1e-9)
    ratio_j = u.gap_before(j) / max(t.gap_before(j), 1e-9)
    assert t.gap_before(i) == 0 or t.gap_before(j) == 0 or ratio_i > ratio_j


def test_a_malformed_gap_shape_names_the_expected_form(pt):
    assert pt.parse_gap_shape("10,1.3,0.27") == (10.0, 1.3, 0.27)
    with pytest.raises(SystemExit, match=r"--gap-shape '10,1.3': expected MEDIAN,SIGMA"):
        pt.parse_gap_shape("10,1.3")
    with pytest.raises(SystemExit, match=r"0 ≤ LONG_SHARE < 1"):
        pt.parse_gap_shape("10,1.3,1.0")
