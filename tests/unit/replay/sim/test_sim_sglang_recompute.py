"""SGLang while a request recomputes KV the tree still holds (replay/sim/cache/sglang_policy.py,
`SglangCache.prefill_done`): the hit is capped at n − 1 (or its state is gone), so the
request computes positions whose KV is resident into slots of its own; at the chunk's
insert SGLang keeps the tree's copy, frees the duplicates and points the request at the
tree's indices (`UnifiedRadixCache.cache_unfinished_req`: `insert`, then
`req_to_token_pool.write(... new_indices ...)`). So from then on it holds one copy per
position, not the resident copy and a reservation for it."""

from __future__ import annotations

from replay.sim.cache.keys import TokenPrefix
from replay.sim.cache.policies import make_policy
from tests.profiles import hybrid_profile

B = 16


def _cache():  # type: ignore[no-untyped-def]
    prof = hybrid_profile(80)
    pol = make_policy("sglang", prof, grid=B, chunk=1024, state_slots=20, kv_tokens=40 * B)
    return pol.make_cache(prof)


def test_a_request_recomputing_resident_kv_holds_one_copy_of_it() -> None:
    cache = _cache()
    a_ids = list(range(64))
    a_out = list(range(1000, 1032))
    a = cache.begin(TokenPrefix(a_ids, B), 64, cache.lookup(TokenPrefix(a_ids, B), 64, 0.0), 0.0)
    assert cache.reserve(a, 96, 0.0)
    cache.prefill_done(a, 0.0)
    cache.finish(a, TokenPrefix(a_ids + a_out, B), 96, 1.0)
    # A's states: its prefill state at 64 and its last decode track point at 80; the tree
    # keeps KV [0, 80) (5 blocks), up to its last state.
    assert sorted(s.pos for s in cache.states.values() if s.resident) == [64, 80]
    assert cache.resident_blocks == 5

    # B's prompt is A's first 80 tokens: the state at 80 is past n − 1 = 79, so B resumes
    # from 64 and recomputes [64, 80) while A's block there is resident.
    b_ids = a_ids + a_out[:16]
    b_prompt = TokenPrefix(b_ids, B)
    info = cache.lookup(b_prompt, 80, 2.0)
    assert info.resume_pos == 64 and info.kv_pos >= 79
    b = cache.begin(b_prompt, 80, info, 2.0)
    assert cache.reserve(b, 96, 2.0)  # KV for 95 tokens: 6 blocks, 4 of them on its path
    assert cache.private_blocks == 2
    cache.prefill_done(b, 2.0)
    # After the insert B holds the tree's copy of [64, 80) and one block for its output:
    # 6 blocks of KV for 6 positions (the model before held a private block beside the
    # resident one: 7).
    assert cache.private_blocks == 1
    assert cache.kv_used == 6
    cache.finish(b, TokenPrefix(b_ids + list(range(2000, 2016)), B), 96, 3.0)
    assert cache.private_blocks == 0
