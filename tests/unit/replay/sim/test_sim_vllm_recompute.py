"""vLLM's rule 5 while a request runs (replay/sim/cache/vllm_policy.py, `VllmCache.prefill_done`):
a request that recomputes blocks whose cached copies are resident (its state hit stopped
short of its KV hit) holds its own blocks only; the old copies stay evictable in the free
queue, and evicting them leaves the request's path whole."""

from __future__ import annotations

from replay.profiles import ModelProfile
from replay.sim.cache.keys import TokenPrefix
from replay.sim.cache.policies import make_policy
from tests.profiles import hybrid_profile

B = 16


def _profile() -> ModelProfile:
    return hybrid_profile(60)


def test_a_recomputing_request_holds_one_block_per_position_and_old_copies_are_evictable() -> None:
    prof = _profile()
    cache = make_policy("vllm", prof).make_cache(prof)
    a_ids = list(range(64))
    a_full = TokenPrefix(a_ids + list(range(1000, 1016)), B)  # 64 prompt + 16 output
    a = cache.begin(TokenPrefix(a_ids, B), 64, cache.lookup(TokenPrefix(a_ids, B), 64, 0.0), 0.0)
    assert cache.reserve(a, 80, 0.0)
    cache.prefill_done(a, 0.0)
    cache.finish(a, a_full, 80, 1.0)
    for s in [s for blk in list(cache.nodes.values()) for s in blk.states]:
        cache.drop_state(s)  # a dependency miss: A's KV is resident, its states are gone

    b_ids = a_ids + list(range(1000, 1016)) + list(range(2000, 2032))  # 112 tokens
    b_prompt = TokenPrefix(b_ids, B)
    info = cache.lookup(b_prompt, 112, 2.0)
    assert info.resume_pos == 0 and info.kv_pos >= 80  # the KV is there, no state to use
    b = cache.begin(b_prompt, 112, info, 2.0)
    assert cache.reserve(b, 128, 2.0)
    cache.prefill_done(b, 2.0)
    # B holds its own 8 blocks; A's 5 resident blocks are old copies beside them, evictable.
    # (Pinning them as well, the model before, held 13 blocks for 8 positions.)
    free_before = cache.capacity - cache.used_blocks
    assert cache.make_room(free_before + 5, 0, 2.5)
    assert all(blk.resident for blk in b.pinned)  # the path survived the eviction

    cache.finish(b, TokenPrefix(b_ids + list(range(3000, 3016)), B), 128, 3.0)
    c_ids = b_ids + list(range(3000, 3016)) + list(range(4000, 4016))
    c_info = cache.lookup(TokenPrefix(c_ids, B), len(c_ids), 4.0)
    assert c_info.resume_pos == 96  # B's replay boundary state ⌊111/16⌋·16, its KV whole
