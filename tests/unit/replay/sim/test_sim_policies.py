"""Each policy's defining behaviour, on hand-built conversations with a tiny profile
(16-token blocks, chunks of two blocks, two-block checkpoints)."""

from __future__ import annotations

import pytest

from replay.sim.cache.eviction import GreedyDualSize, branches
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policies import POLICY_NAMES, PolicyError, make_policy
from replay.sim.cache.policy_base import ArbitraryState, ChunkBoundaries, EveryN, Grid


def cache_for(name, profile, capacity=None, **opts):
    return HybridCache(profile, make_policy(name, profile, **opts), capacity_blocks=capacity)


def test_every_listed_policy_is_registered(profile):
    for name in POLICY_NAMES:
        assert make_policy(name, profile).name == name


def test_unknown_policy_and_option_name_what_is_known(profile):
    with pytest.raises(PolicyError, match=r"unknown policy 'lru'.*known: vllm, vllm-like, sglang"):
        make_policy("lru", profile)
    with pytest.raises(PolicyError, match=r"policy 'dense' has no option grid \(options: every\)"):
        make_policy("dense", profile, grid=3)


def test_vllm_placement_every_two_blocks_and_the_last_boundary():
    p = ChunkBoundaries(chunk=32)
    assert p.prefill_positions(0, 100, 16) == [32, 64, 96]
    assert p.prefill_positions(0, 90, 16) == [32, 64, 80]
    assert p.prefill_positions(48, 90, 16) == [80]
    assert p.end_positions(90, 120, 16) == []


def test_other_placements():
    assert ArbitraryState(32).prefill_positions(0, 90, 16) == [32, 64, 80, 90]
    assert ArbitraryState(32).end_positions(90, 120, 16) == [120]
    assert EveryN(20).prefill_positions(10, 65, 16) == [20, 40, 60]
    g = Grid(chunk=64, grid=8)
    assert g.prefill_positions(0, 150, 16) == [64, 128, 144]
    assert g.end_positions(150, 171, 16) == [168]


def test_vllm_recomputes_the_previous_output(profile, turn):
    cache = cache_for("vllm", profile)
    _, s1 = turn(cache, 1, 90, 20, 0.0)
    info, _ = turn(cache, 2, 130, 10, 5.0, s1, 110)
    assert info.ideal_pos == 110  # previous prompt + output
    assert info.resume_pos == 80  # the prompt's last block boundary
    assert info.placement_miss == 30 and info.dependency_miss == info.capacity_miss == 0


@pytest.mark.parametrize("name", ["asc-lru", "asc-unit-lru", "flashstate-eq7", "flashstate"])
def test_asc_resumes_at_the_exact_end(profile, turn, name):
    cache = cache_for(name, profile)
    _, s1 = turn(cache, 1, 90, 21, 0.0)
    info, s2 = turn(cache, 2, 130, 10, 5.0, s1, 111)
    assert info.resume_pos == info.ideal_pos == 111
    assert info.redundant == 0
    # and a turn that repeats the whole previous prompt resumes at its exact end
    info3, _ = turn(cache, 3, 140, 5, 9.0, s2, 140)
    assert info3.resume_pos == 140


def test_gds_keeps_the_states_that_save_the_most_prefill_per_block(make_profile, turn):
    """Two idle conversations with one checkpoint each: a long one (6 blocks, expensive to
    restore per block) used first, a short one (1 block) used last. A third request needs
    room: LRU evicts the long one, GDS the short one."""
    prof = make_profile(blocks=16, chunk=1024)  # one checkpoint per prompt, at its end
    kept = {}
    for name in ("asc-unit-lru", "flashstate-eq7"):
        cache = cache_for(name, prof)
        _, long_seq = turn(cache, 1, 96, 0, 0.0)  # 6 blocks + a 2-block checkpoint
        _, short_seq = turn(cache, 2, 16, 0, 1.0)  # 1 block + a checkpoint
        assert cache.used_blocks == 11
        turn(cache, 3, 64, 0, 10.0)  # needs 4 blocks + its state buffer: one must go
        kept[name] = (
            cache.lookup(long_seq, 96, 20.0).resume_pos,
            cache.lookup(short_seq, 16, 20.0).resume_pos,
        )
    assert kept["asc-unit-lru"] == (0, 16)
    assert kept["flashstate-eq7"] == (96, 0)


def test_gds_admission_refuses_a_newcomer_it_would_evict_next(make_profile, turn):
    prof = make_profile(blocks=13, chunk=1024)
    cache = cache_for("flashstate-eq7", prof)
    _, long_seq = turn(cache, 1, 96, 0, 0.0)  # 8 of 13 blocks
    _, small = turn(cache, 2, 16, 0, 1.0)  # fits exactly; its state is cheap to restore
    assert cache.evictions == 0 and cache.admission_refusals == 1
    assert cache.lookup(small, 16, 2.0).resume_pos == 0  # not kept
    assert cache.lookup(long_seq, 96, 2.0).resume_pos == 96
    assert cache.used_blocks == 8  # its KV went with it


def test_gds_watermark_rises_to_each_evicted_priority(make_profile, turn):
    prof = make_profile(blocks=24)
    cache = cache_for("flashstate-eq7", prof)
    assert cache.L == 0.0
    for i in range(6):
        turn(cache, i + 1, 60 + 10 * i, 2, float(i))
    assert cache.evictions > 0
    assert cache.L > 0.0
    ev = cache.eviction
    assert isinstance(ev, GreedyDualSize)
    for s in cache.live_resident.values():
        assert ev.key(s, 10.0)[-1] >= s.stamp


def test_leaf_last_ranks_every_inner_state_below_every_leaf(make_profile, turn):
    prof = make_profile(blocks=200)
    cache = cache_for("flashstate", prof)
    _, a1 = turn(cache, 1, 150, 5, 0.0)  # a long conversation: many inner states
    turn(cache, 2, 170, 5, 1.0, a1, 155)
    turn(cache, 3, 8, 1, 2.0)  # a tiny leaf: the lowest GDS priority of all
    ev = cache.eviction
    assert isinstance(ev, GreedyDualSize)
    now = 3.0
    states = [s for s in cache.live_resident.values() if s.live == 0]
    inner = [s for s in states if ev.is_inner(s, now)]
    leaves = [s for s in states if not ev.is_inner(s, now)]
    assert inner and len(leaves) == 2
    assert max(ev.key(s, now) for s in inner) < min(ev.key(s, now) for s in leaves)
    # plain GDS would take the tiny leaf first; leaf-last takes an inner state
    eq7 = GreedyDualSize(cache)
    assert min(states, key=lambda s: eq7.key(s, now)).pos == 9
    cache.make_room(int(cache.free_blocks()) + 1, 0, now)
    assert cache.lookup(_prefix_of(cache, 9), 9, now).resume_pos == 9


def test_leaf_idle_for_60_s_is_demoted(make_profile, turn):
    cache = cache_for("flashstate", make_profile(blocks=200))
    turn(cache, 1, 8, 1, 0.0)
    ev = cache.eviction
    assert isinstance(ev, GreedyDualSize)
    (s,) = [s for s in cache.live_resident.values() if s.pos == 9]
    assert branches(cache, s) == 0
    assert not ev.is_inner(s, 30.0)
    assert ev.is_inner(s, 61.5)


def test_sglang_evicts_states_whose_kv_stays(make_profile, turn):
    """A small state pool beside a roomy KV pool: an inner state evicted while the leaf
    below it keeps its KV (SGLang's Mamba LRU tombstones an inner node's state alone) gives
    dependency misses, not capacity misses."""
    prof = make_profile(blocks=400)
    cache = cache_for("sglang", prof, state_slots=10, kv_tokens=16 * 300, grid=8, chunk=32)
    seqs = []
    for i in range(8):
        _, s = turn(cache, i + 1, 60, 4, float(i))  # states at 32 and 56 each
        seqs.append(s)
    assert cache.states_used <= 10
    infos = [cache.lookup(s, 40, 20.0) for s in seqs]  # needs the state at 32
    hit = [i for i in infos if i.dependency_miss > 0 and i.capacity_miss == 0]
    assert hit, [(i.resume_pos, i.resident_pos, i.kv_pos) for i in infos]
    assert all(i.kv_pos >= i.resident_pos > i.resume_pos for i in hit)


def test_tail_replay_pays_a_share_of_the_prefix(profile, turn):
    cache = cache_for("tail-replay", profile, replay_frac=0.25)
    _, s1 = turn(cache, 1, 90, 10, 0.0)
    info, _ = turn(cache, 2, 120, 5, 2.0, s1, 100)
    assert cache.resident_states == 0
    assert info.kv_pos == 100 and info.resume_pos == 75
    assert info.dependency_miss == 25 and info.placement_miss == info.capacity_miss == 0


def test_dense_floods_the_cache(make_profile, turn):
    prof = make_profile(blocks=40)
    dense = cache_for("dense", prof, every=8)
    vllm = cache_for("vllm", prof)
    for c in (dense, vllm):
        turn(c, 1, 150, 5, 0.0)
    assert dense.evictions > 0 and vllm.evictions == 0


def test_ideal_never_evicts(profile, turn):
    cache = cache_for("ideal", profile)
    assert cache.capacity is None
    prev = None
    for i in range(30):
        n = 40 + 40 * i
        info, prev = turn(cache, i + 1, n, 3, float(i), prev, n - 37 if prev else 0)
        assert info.resume_pos == info.ideal_pos
    assert cache.evictions == 0 and cache.used_blocks > profile.blocks_per_engine


def _prefix_of(cache, pos):
    """The sequence that holds the resident checkpoint at `pos`."""
    (s,) = [s for s in cache.live_resident.values() if s.pos == pos]
    return s.block.src


@pytest.mark.parametrize(("alpha", "kept"), [(0.0, (0, 16)), (20.0, (96, 0))])
def test_marconi_trades_recency_against_prefill_saved_per_block(make_profile, turn, alpha, kept):
    """α = 0 is LRU over units; a large α keeps what saves the most prefill per block."""
    prof = make_profile(blocks=16, chunk=1024)
    cache = cache_for("marconi", prof, alpha=alpha)
    _, long_seq = turn(cache, 1, 96, 0, 0.0)
    _, short_seq = turn(cache, 2, 16, 0, 1.0)
    turn(cache, 3, 64, 0, 10.0)
    got = (
        cache.lookup(long_seq, 96, 20.0).resume_pos,
        cache.lookup(short_seq, 16, 20.0).resume_pos,
    )
    assert got == kept


def test_a_capacity_override_leaves_ideal_unbounded(profile):
    assert cache_for("ideal", profile, capacity=10).capacity is None
    assert cache_for("vllm", profile, capacity=10).capacity == 10
