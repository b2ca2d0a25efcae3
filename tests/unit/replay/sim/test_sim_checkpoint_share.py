"""`experiments/checkpoint_share.py`: what the resident checkpoints are, on hand-built caches and a
small synthesized corpus."""

from __future__ import annotations

import pytest

from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policies import make_policy
from replay.sim.cache.policy_base import Policy
from tests.scripts import load_experiment


@pytest.fixture(scope="module")
def cs():
    return load_experiment("checkpoint_share", register=True)


def test_chunk_end_states_below_the_latest_count_as_superseded(cs, profile, turn):
    cache = HybridCache(profile, make_policy("vllm-like", profile))
    turn(cache, 1, 100, 10, 0.0)  # chunk ends at 32, 64 and the last boundary 96
    m = cs.measure(cache)
    assert (m["states"], m["superseded"], m["usable"], m["leaves"]) == (3, 2, 3, 1)
    turn(cache, 2, 40, 5, 2.0)  # a second conversation: one state at 32
    m = cs.measure(cache)
    assert (m["states"], m["superseded"], m["leaves"]) == (4, 2, 2)
    assert m["held"] == 0 and m["live_blocks"] == 0  # nothing is running


def test_a_state_whose_kv_went_is_not_usable(cs, profile, turn):
    cache = HybridCache(profile, make_policy("vllm-like", profile))
    turn(cache, 1, 100, 10, 0.0)
    first = min(cache.nodes.values(), key=lambda b: b.end)
    cache.drop_block(first)
    m = cs.measure(cache)
    assert m["states"] == 3 and m["usable"] == 0


def test_a_probed_run_leaves_the_cache_code_as_it_was(cs, small_corpus):
    trace = cs.load_corpus(str(small_corpus), "skip")
    lookup, placed = HybridCache.lookup, Policy.prefill_positions
    every = cs.run(trace, "vllm-like", 4, 0, 200, "source", None)
    last = cs.run(trace, "vllm-like", 4, 0, 200, "source", None, latest_only=True)
    assert HybridCache.lookup is lookup and Policy.prefill_positions is placed
    assert every["written"] > last["written"] and last["written"] <= 1.0
    assert every["arrivals"] > 0 and every["time_avg"] > 0.0
    assert 0.0 <= every["superseded"] <= 1.0 and every["per_leaf"] >= 1.0
