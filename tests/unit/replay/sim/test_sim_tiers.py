"""The host-memory tier (replay/sim/cache/tiers.py, issue 34): what the GPU drops is found in
host memory and loaded back, a hit needs its state in a tier as well as its KV, and the
engines resolve a hit across tiers by their own rules (vLLM's connector loads everything
past the GPU hit, SGLang's tree reuses what the device still holds)."""

from __future__ import annotations

from dataclasses import replace

from replay.profiles import ModelProfile
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import TokenPrefix
from replay.sim.cache.policies import make_policy
from replay.sim.cache.tiers import attach_host_tier
from replay.sim.engine.cache import SimCache, cache_settings
from replay.sim.engine.clock import StepClock
from replay.sim.engine.core import EngineCore, Sequence
from tests.profiles import engine_profile

B = 16
A_IDS = list(range(64))  # a 64-token prompt: vLLM keeps its state at ⌊63/16⌋·16 = 48
A_OUT = list(range(1000, 1016))
B_IDS = A_IDS + A_OUT + list(range(2000, 2032))  # the next turn: 112 tokens


def _profile(blocks: int = 60) -> ModelProfile:
    """16-token blocks of 1 GiB each (so host GiB are blocks), a two-block state."""
    return ModelProfile(
        name="tiny",
        model="tiny hybrid",
        gpus=1,
        block_tokens=B,
        blocks_per_engine=blocks,
        checkpoint_blocks=2,
        cache_gib_per_gpu=float(blocks),
        prefill_cost_d=1.862e-5,
        prefill_cost_e=3.33e-6,
        cost_unit_tokens=100,
        chunk_tokens=32,
        context_tokens=4096,
    )


def _first_turn(cache: HybridCache) -> None:
    p = TokenPrefix(A_IDS, B)
    h = cache.begin(p, 64, cache.lookup(p, 64, 0.0), 0.0)
    assert cache.reserve(h, 80, 0.0)
    cache.prefill_done(h, 0.0)
    cache.finish(h, TokenPrefix(A_IDS + A_OUT, B), 80, 1.0)


def _evict_all(cache: HybridCache, now: float) -> None:
    assert cache.capacity is not None
    assert cache.make_room(cache.capacity, 0, now)  # everything unpinned leaves the GPU
    assert cache.used_blocks == 0


def _cache(policy: str = "vllm", host_gb: float = 40.0) -> HybridCache:
    prof = _profile()
    cache = make_policy(policy, prof).make_cache(prof)
    if host_gb:
        attach_host_tier(cache, policy, prof, host_gb)
    return cache


def test_the_host_tier_turns_a_miss_into_a_hit_and_loads_it_back() -> None:
    plain, tiered = _cache(host_gb=0), _cache()
    for cache in (plain, tiered):
        _first_turn(cache)
        _evict_all(cache, 2.0)
    prompt = TokenPrefix(B_IDS, B)
    assert plain.lookup(prompt, 112, 3.0).resume_pos == 0  # one tier: a capacity miss
    info = tiered.lookup(prompt, 112, 3.0)
    assert info.resume_pos == 48  # the state at 48 and the KV before it, from host memory
    assert info.host_tokens == 48
    assert info.load_blocks == 3 + 2  # three KV blocks and the two-block state
    res = info.resume()
    assert (res.cached, res.cached_host, res.cached_external) == (48, 48, 0)
    assert res.columns()["cached_tokens"] == 48
    host = tiered.host
    assert host is not None and len(host.blocks) >= 3 and host.states
    h = tiered.begin(prompt, 112, info, 3.0)
    assert tiered.reserve(h, 128, 3.0)
    tiered.prefill_done(h, 3.0)
    # loaded back: GPU-resident again, no longer host-only
    assert all(b.resident for b in h.pinned[:3])
    assert not any(b in host.blocks for b in h.pinned[:3])
    assert not any(s.pos == 48 for s in host.states)
    assert any(s.pos == 48 and s.resident for b in h.pinned[:3] for s in b.states)


def test_a_lookup_stays_pure_and_an_untiered_resume_has_no_tier_columns() -> None:
    tiered = _cache()
    _first_turn(tiered)
    _evict_all(tiered, 2.0)
    prompt = TokenPrefix(B_IDS, B)
    before = (dict(tiered.host.blocks), dict(tiered.host.states))
    tiered.lookup(prompt, 112, 3.0)
    assert (dict(tiered.host.blocks), dict(tiered.host.states)) == before
    plain = _cache(host_gb=0)
    _first_turn(plain)
    res = plain.lookup(prompt, 112, 3.0).resume()
    assert res.cached_host is None and res.cached_external is None
    assert res.capped(10).cached_host is None


def test_a_kv_host_hit_without_a_state_is_no_hit() -> None:
    prof = _profile()
    cache = make_policy("vllm", prof).make_cache(prof)
    _first_turn(cache)
    for s in [s for b in list(cache.nodes.values()) for s in b.rstates]:
        cache.drop_state(s)  # gone before any host tier held it: never written there
    attach_host_tier(cache, "vllm", prof, 40.0)
    _evict_all(cache, 2.0)
    host = cache.host
    assert host is not None and len(host.blocks) >= 4 and not host.states
    info = cache.lookup(TokenPrefix(B_IDS, B), 112, 3.0)
    assert info.resume_pos == 0 and info.host_tokens == 0 and info.load_blocks == 0
    assert info.resume().cached_host == 0  # a tiered run says so: nothing from the host


def test_the_engines_resolve_a_hit_across_tiers_by_their_own_rules() -> None:
    """The KV of one block is host-only, the rest and the state still on the GPU: SGLang's
    tree reuses the device's part and loads the one block; vLLM's connector loads the whole
    prefix past its GPU hit (here 0: the state needs the missing block) and the state."""
    got = {}
    for rule in ("connector", "tree"):
        cache = _cache()
        assert cache.host is not None
        cache.host.rule = rule
        _first_turn(cache)
        b1 = cache.nodes[TokenPrefix(B_IDS, B).key_at(32)]
        cache.drop_block(b1)  # positions 16-32 leave the GPU (a per-block LRU can do this)
        info = cache.lookup(TokenPrefix(B_IDS, B), 112, 3.0)
        got[rule] = (info.resume_pos, info.host_tokens, info.load_blocks, info.state is None)
    assert got["connector"] == (48, 48, 3 + 2, True)
    # SGLang loads block 1 only, and counts all 48 tokens as the host's (the next test)
    assert got["tree"] == (48, 48, 1, False)


def test_sglang_counts_every_backed_up_token_past_the_device_match_as_the_host() -> None:
    """The KV is on the GPU, the state at 48 only in host memory (the oracle's `edits` seed 1
    request 5): SGLang loads the state alone, and its host hit is every token past the
    deepest device match, 0 here (`components/full.py:120-143`), GPU copies of KV included."""
    got = {}
    for rule in ("connector", "tree"):
        cache = _cache()
        assert cache.host is not None
        cache.host.rule = rule
        _first_turn(cache)
        (s48,) = [s for b in cache.nodes.values() for s in b.rstates if s.pos == 48]
        cache.drop_state(s48)
        info = cache.lookup(TokenPrefix(B_IDS, B), 112, 3.0)
        got[rule] = (info.resume_pos, info.host_tokens, info.load_blocks, info.state is None)
        assert info.resume().cached == 48
    assert got["connector"] == (48, 48, 3 + 2, True)
    assert got["tree"] == (48, 48, 2, True)  # the two-block state only


def test_host_memory_holds_at_most_its_room_least_recent_out() -> None:
    cache = _cache(host_gb=4.0)  # 4 blocks of host memory, one pool
    _first_turn(cache)
    _evict_all(cache, 2.0)
    host = cache.host
    assert host is not None
    assert len(host.blocks) + 2 * len(host.states) <= 4
    assert host.evictions > 0


def test_sglang_splits_host_memory_as_its_device_pools() -> None:
    cache = _cache("sglang", host_gb=40.0)
    host = cache.host
    assert host is not None and host.state_cap is not None and cache.state_slots is not None
    assert cache.capacity is not None
    kv_dev = cache.capacity - cache.C * cache.state_slots
    # the host's KV share is the device's (hybrid_pool_assembler.py:183-200)
    assert abs(host.kv_cap / 40.0 - kv_dev / cache.capacity) < 0.05
    assert host.rule == "tree"


def test_the_engine_clock_charges_a_host_load() -> None:
    """Engine timing: a request that loads from host memory waits for the load (vLLM, async)
    or its step lasts as long as the load (SGLang, in-step); a bigger load, a later token."""
    prof = engine_profile(cache_gib_per_gpu=100.0)  # 1 GiB blocks
    for policy in ("vllm", "sglang"):
        _charges(prof, policy)


def _charges(prof: ModelProfile, policy: str) -> None:
    ttft = {}
    for bw in (1.0, 100.0):
        settings = cache_settings(policy, prof)
        sim = SimCache(replace(settings, host_memory_gb=50.0, host_bandwidth_gbs=bw))
        core = EngineCore(StepClock(prof), sim)
        ids = list(range(640))
        out = list(range(5000, 5004))
        full = TokenPrefix(ids + out, 64)
        seq = Sequence(1, TokenPrefix(ids, 64), 4, prompt_len=640, full=full)
        core.add(seq)
        t = 0.0
        while core.has_work():
            t += core.step(t).duration
        cache = sim.cache
        assert cache.capacity is not None
        if cache.state_slots is None:
            assert cache.make_room(cache.capacity, 0, t)
        else:  # SGLang: empty both pools
            kv = cache.capacity - cache.C * cache.state_slots
            assert cache.make_room(kv, cache.state_slots, t)
        ids2 = ids + out + list(range(9000, 9200))
        full2 = TokenPrefix(ids2 + list(range(7000, 7004)), 64)
        seq2 = Sequence(2, TokenPrefix(ids2, 64), 4, prompt_len=len(ids2), full=full2, arrival=t)
        core.add(seq2)
        start = t
        while core.has_work():
            t += core.step(t).duration
        assert seq2.resume is not None and seq2.resume.cached_host
        assert seq2.first_token_t is not None
        ttft[bw] = seq2.first_token_t - start
    # 1 GB/s against 100 GB/s for the same blocks of 1 GiB: seconds against hundredths
    assert ttft[1.0] > ttft[100.0] + 1.0, policy
