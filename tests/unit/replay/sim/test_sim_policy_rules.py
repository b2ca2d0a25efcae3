"""The defining rule of each policy of the source's table, and of each modelling-rule switch,
on small hand-built caches (tiny profile: 16-token blocks, two-block chunks, two-block
checkpoints). Our own tests of the behaviours the FlashState release code's unit tests name
(`test_eviction_keeps_the_states_that_save_the_most_prefill_per_block`,
`test_leaf_last_ranks_inner_states_below_every_leaf`), written from the source's description
of them, not from that code."""

from __future__ import annotations

import pytest

from replay.sim.cache.eviction import GreedyDualSize
from replay.sim.cache.hybrid import Handle, HybridCache
from replay.sim.cache.keys import LineagePrefix
from replay.sim.cache.nodes import State
from replay.sim.cache.policies import make_policy
from replay.sim.cache.policy_base import PolicyError


def cache_for(name, profile, capacity=None, **opts):
    return HybridCache(profile, make_policy(name, profile, **opts), capacity_blocks=capacity)


def start(cache: HybridCache, seq_id: int, n: int, out: int, now: float, parent=None, shared=0):
    """Look up, pin, reserve and prefill a request; returns its handle and sequence."""
    seq = LineagePrefix(seq_id, n + out, parent, shared)
    info = cache.lookup(seq, n, now)
    h = cache.begin(seq, n, info, now)
    assert cache.reserve(h, n + out, now), "the request should fit"
    cache.prefill_done(h, now)
    return h, seq


def end(cache: HybridCache, h: Handle, seq: LineagePrefix, now: float) -> None:
    cache.finish(h, seq, seq.length, now)


def state_at(cache: HybridCache, seq: LineagePrefix, pos: int) -> State:
    return cache.states[seq.key_at(pos)]


def evict_one(cache: HybridCache, now: float) -> bool:
    """Make room for one more block than is free: exactly one eviction (or none possible)."""
    before = cache.evictions
    ok = cache.make_room(int(cache.free_blocks()) + 1, 0, now)
    assert not ok or cache.evictions == before + 1
    return ok


# -- FlashState: GreedyDual-Size ----------------------------------------------------------


@pytest.mark.parametrize("name", ["flashstate-eq7", "flashstate"])
def test_eviction_keeps_the_states_that_save_the_most_prefill_per_block(make_profile, turn, name):
    """Three idle conversations, each one leaf: restore cost per block held grows with the
    prefix (the attention term), so under pressure GDS evicts in order of cost density —
    the shortest first, though it was used last — whatever the order of use."""
    prof = make_profile(blocks=40, chunk=1024)  # one checkpoint per prompt, at its end
    cache = cache_for(name, prof)
    _, big = turn(cache, 1, 160, 0, 0.0)  # 10 blocks + 2: the densest
    _, mid = turn(cache, 2, 64, 0, 1.0)  # 4 + 2
    _, small = turn(cache, 3, 16, 0, 2.0)  # 1 + 2: the cheapest per block, the most recent
    ev = cache.eviction
    assert isinstance(ev, GreedyDualSize)
    dens = {
        k: state_at(cache, s, s.length).density for k, s in (("b", big), ("m", mid), ("s", small))
    }
    assert dens["b"] > dens["m"] > dens["s"]
    gone = []
    for _ in range(2):
        assert evict_one(cache, 3.0)
        gone.append(
            [
                k
                for k, s in (("b", big), ("m", mid), ("s", small))
                if not state_at(cache, s, s.length).resident
            ]
        )
    assert gone == [["s"], ["m", "s"]]
    assert cache.lookup(big, 160, 4.0).resume_pos == 160


def test_whole_state_lru_evicts_by_age_not_density(make_profile, turn):
    """The same three conversations under ASC + whole-state LRU: the oldest use goes first."""
    cache = cache_for("asc-unit-lru", make_profile(blocks=40, chunk=1024))
    _, big = turn(cache, 1, 160, 0, 0.0)
    turn(cache, 2, 64, 0, 1.0)
    _, small = turn(cache, 3, 16, 0, 2.0)
    assert evict_one(cache, 3.0)
    assert not state_at(cache, big, 160).resident and state_at(cache, small, 16).resident
    # the whole unit went: its checkpoint and all ten blocks only it needed
    assert cache.lookup(big, 160, 4.0).kv_pos == 0


def test_leaf_last_ranks_inner_states_below_every_leaf(make_profile, turn):
    """A long conversation's superseded state (inner: its next turn's state hangs below it)
    is dense — expensive to restore — and a short conversation's newest state (a leaf) is
    cheap. Eq. 7 evicts the cheap leaf; leaf-last evicts the inner state first, and keeps
    both conversations resumable from their newest state."""
    prof = make_profile(blocks=60, chunk=1024)
    for name, first_gone in (("flashstate-eq7", "leaf"), ("flashstate", "inner")):
        cache = cache_for(name, prof)
        _, t1 = turn(cache, 1, 160, 0, 0.0)  # states at 160 …
        _, t2 = turn(cache, 2, 176, 0, 1.0, t1, 160)  # … and 176: 160 is now inner
        _, other = turn(cache, 3, 16, 0, 2.0)  # a tiny leaf
        inner, leaf = state_at(cache, t1, 160), state_at(cache, other, 16)
        ev = cache.eviction
        assert isinstance(ev, GreedyDualSize)
        assert ev.key(inner, 3.0)[-1] > ev.key(leaf, 3.0)[-1]  # by GDS priority alone
        assert evict_one(cache, 3.0)
        gone = "inner" if not inner.resident else "leaf" if not leaf.resident else None
        assert gone == first_gone, name
        assert cache.lookup(t2, 176, 4.0).resume_pos == 176


# -- the per-allocation policies -----------------------------------------------------------


def test_vllm_like_checkpoints_only_at_chunk_ends_and_evicts_allocations_one_by_one(profile):
    """vLLM-like: states at chunk ends on block boundaries (every two blocks and the
    prompt's last boundary), none at the request's end; per-allocation LRU may take a
    checkpoint and leave its KV (a dependency miss)."""
    cache = cache_for("vllm-like", profile, capacity=40)
    h, seq = start(cache, 1, 90, 10, 0.0)
    end(cache, h, seq, 1.0)
    assert sorted(s.pos for s in cache.live_resident.values()) == [32, 64, 80]
    # the least recently used allocations go first, one at a time; ties deepest first
    while state_at(cache, seq, 80).resident:
        assert evict_one(cache, 2.0)
    info = cache.lookup(LineagePrefix(2, 120, seq, 100), 110, 3.0)
    assert info.ideal_pos == 100 and info.checkpoint_pos == 80
    assert info.resume_pos < 80


def test_dense_writes_a_checkpoint_every_n_tokens_of_prefill(profile):
    cache = cache_for("dense", profile, capacity=200, every=20)
    h, seq = start(cache, 1, 90, 10, 0.0)
    end(cache, h, seq, 1.0)
    assert sorted(s.pos for s in cache.live_resident.values()) == [20, 40, 60, 80]


@pytest.mark.parametrize("name", ["asc-lru", "asc-unit-lru"])
def test_asc_adds_the_prompt_end_and_the_exact_request_end(profile, name):
    cache = cache_for(name, profile, capacity=200)
    h, seq = start(cache, 1, 90, 10, 0.0)
    end(cache, h, seq, 1.0)
    assert sorted(s.pos for s in cache.live_resident.values()) == [32, 64, 80, 90, 100]


def test_asc_lru_can_strand_an_end_checkpoint_whole_state_lru_cannot(profile):
    """Per allocation, a request's blocks and its end checkpoint age apart: with blocks
    stamped at the request's start (the source's model), the KV under the end checkpoint
    goes first and the checkpoint stays, useless (capacity miss, five blocks still held).
    Whole-state LRU frees a checkpoint and its exclusive KV together, never one alone."""
    for name in ("asc-lru", "asc-unit-lru"):
        # prefill states stamped with their request's end, so that y's units are the oldest
        # (under the default, x's superseded chunk states, written at 0, would go first:
        # test_unheld_chunk_states_age_from_their_write_not_their_requests_end)
        cache = cache_for(
            name, profile, capacity=40, block_stamp="start", prefill_state_stamp="end"
        )
        hx, x = start(cache, 1, 90, 10, 0.0)  # long request: starts first, ends last
        hy, y = start(cache, 2, 40, 4, 1.0)
        end(cache, hy, y, 2.0)
        end(cache, hx, x, 10.0)
        # asc-lru: one allocation; whole-state LRU: y's three units (oldest use, 2.0), of
        # which only the last, its leaf, owns KV
        for _ in range(1 if name == "asc-lru" else 3):
            assert evict_one(cache, 11.0)
        ex = state_at(cache, x, 100)
        info = cache.lookup(LineagePrefix(3, 120, x, 100), 110, 12.0)
        if name == "asc-lru":  # x's newest block (stamped 0) went; its end state (10) stayed
            assert ex.resident and info.capacity_miss > 0 and info.resume_pos < 100
        else:  # y went whole, checkpoints and KV; x still resumes exactly
            assert ex.resident and info.resume_pos == 100
            assert not state_at(cache, y, 44).resident and cache.lookup(y, 44, 12.0).kv_pos < 44
        for s in cache.live_resident.values():  # no unit left without its KV
            if name == "asc-unit-lru":
                assert all(b.resident for b in _path(s))


def _path(s: State) -> list:
    out, b = [], s.block
    while b is not None and b.index >= 0:
        out.append(b)
        b = b.parent
    return out


# -- the rule switches ---------------------------------------------------------------------


def test_hold_chunk_state_keeps_the_latest_prefill_checkpoint_while_the_request_runs(profile):
    for hold in (True, False):
        cache = cache_for("vllm-like", profile, capacity=40, hold_chunk_state=hold)
        h, seq = start(cache, 1, 64, 4, 0.0)  # states at 32 and 64; the request runs on
        # both were written at 0; on a tie the deepest goes first, unless it is held
        assert evict_one(cache, 1.0)
        assert state_at(cache, seq, 64).resident is hold
        assert state_at(cache, seq, 32).resident is not hold
        if hold:
            assert not evict_one(cache, 1.0)  # nothing else can go: the held one stays
        end(cache, h, seq, 2.0)
        if hold:  # released with the request: evictable now
            assert evict_one(cache, 3.0) and not state_at(cache, seq, 64).resident


def test_block_stamp_orders_requests_by_start_or_by_end(profile):
    """x starts before y and ends after it: vLLM's free queue (stamp at the end) evicts y's
    blocks first, stamping at the start evicts x's first."""
    for rule, first in (("end", "y"), ("start", "x")):
        cache = cache_for("asc-lru", profile, capacity=60, block_stamp=rule)
        hx, x = start(cache, 1, 48, 0, 0.0)
        hy, y = start(cache, 2, 48, 0, 1.0)
        end(cache, hy, y, 2.0)
        end(cache, hx, x, 10.0)
        while cache.lookup(x, 48, 11.0).kv_pos == 48 and cache.lookup(y, 48, 11.0).kv_pos == 48:
            assert evict_one(cache, 11.0)
        lost = "x" if cache.lookup(x, 48, 11.0).kv_pos < 48 else "y"
        assert lost == first, rule


def test_prefill_and_resume_stamps(profile):
    for prefill_rule, resume_rule in (("end", "end"), ("write", "start")):
        cache = cache_for(
            "asc-lru",
            profile,
            capacity=200,
            prefill_state_stamp=prefill_rule,
            resume_stamp=resume_rule,
        )
        h1, s1 = start(cache, 1, 40, 4, 0.0)
        end(cache, h1, s1, 3.0)
        assert state_at(cache, s1, 40).last_use == (3.0 if prefill_rule == "end" else 0.0)
        assert state_at(cache, s1, 44).last_use == 3.0  # the end capture: written at the end
        h2, s2 = start(cache, 2, 50, 2, 5.0, s1, 44)  # resumes from 44
        assert h2.resume_pos == 44
        end(cache, h2, s2, 9.0)
        assert state_at(cache, s1, 44).last_use == (9.0 if resume_rule == "end" else 5.0)


def test_a_rule_switch_with_a_bad_value_names_the_allowed_ones(profile):
    with pytest.raises(
        PolicyError, match=r"rule block_stamp cannot be 'later' \(allowed: 'end', 'start'\)"
    ):
        make_policy("asc-lru", profile, block_stamp="later")
    with pytest.raises(PolicyError, match=r"also takes the rule switches hold_chunk_state"):
        make_policy("asc-lru", profile, stamp="end")


def test_unheld_chunk_states_age_from_their_write_not_their_requests_end(profile):
    """Issue 22: a checkpoint written during prefill that no request holds is used when it is
    cached (the source: a state's last use is "when it was cached, when a request resumed
    from it, or when the last live request holding it ended"), so a long request's
    superseded chunk states go before a shorter conversation's leaf. Stamped with their
    request's end (rule "end", the old default) they were as fresh as its leaf and pushed
    out other conversations' newest states."""
    for rule, first_lost in (("release", "x"), ("end", "y")):
        cache = cache_for("asc-unit-lru", profile, capacity=40, prefill_state_stamp=rule)
        hx, x = start(cache, 1, 90, 10, 0.0)  # chunk states 32, 64, the prompt end 90
        hy, y = start(cache, 2, 40, 4, 1.0)
        end(cache, hy, y, 2.0)
        end(cache, hx, x, 10.0)
        assert evict_one(cache, 11.0)
        if first_lost == "x":  # x's shallowest chunk state went; y's leaf and x's stay
            assert not state_at(cache, x, 32).resident
            assert state_at(cache, y, 44).resident and state_at(cache, x, 100).resident
        else:  # y's oldest unit went first, x's superseded states all stayed
            assert not state_at(cache, y, 32).resident and state_at(cache, x, 32).resident
        assert cache.lookup(LineagePrefix(3, 120, x, 100), 110, 12.0).resume_pos == 100


def test_release_stamps_a_held_chunk_state_when_its_request_ends(profile):
    cache = cache_for("vllm-like", profile, capacity=200, hold_chunk_state=True)
    assert cache.policy.rules["prefill_state_stamp"] == "release"
    h, seq = start(cache, 1, 64, 4, 0.0)  # states at 32 and 64 (64 held)
    end(cache, h, seq, 5.0)
    assert state_at(cache, seq, 64).last_use == 5.0  # released by the request holding it
    assert state_at(cache, seq, 32).last_use == 0.0  # never held: its use is its write


def test_source_policies_read_the_source_vllm_keeps_its_engine(profile):
    for name in ("vllm-like", "dense"):
        rules = make_policy(name, profile).rules
        assert rules["prefill_state_stamp"] == "release" and rules["hold_chunk_state"] is False
    for name in ("asc-lru", "asc-unit-lru", "flashstate-eq7", "flashstate", "marconi"):
        assert make_policy(name, profile).rules["prefill_state_stamp"] == "release"
    # vLLM's code (vllm_policy rule 4): a prefill state's block is freed right after the
    # prefill, so it keeps the stamp it got when written; the request's KV goes at its end.
    rules = make_policy("vllm", profile).rules
    assert rules["prefill_state_stamp"] == "write" and rules["block_stamp"] == "end"


def test_ancestor_stamp_refreshes_the_states_above_the_one_resumed_from(profile):
    for on in (False, True):
        cache = cache_for("asc-unit-lru", profile, capacity=200, ancestor_stamp=on)
        h1, s1 = start(cache, 1, 40, 4, 0.0)  # states 32, 40 (written 0), 44 (end, 3.0)
        end(cache, h1, s1, 3.0)
        h2, s2 = start(cache, 2, 50, 2, 5.0, s1, 44)
        assert h2.resume_pos == 44
        assert state_at(cache, s1, 32).last_use == (5.0 if on else 0.0)
        assert state_at(cache, s1, 40).last_use == (5.0 if on else 0.0)
        end(cache, h2, s2, 9.0)


def test_pin_resumed_state_decides_whether_the_resumed_state_can_go_meanwhile(profile):
    for pin in (True, False):
        cache = cache_for("asc-lru", profile, capacity=200, pin_resumed_state=pin)
        h1, s1 = start(cache, 1, 40, 4, 0.0)
        end(cache, h1, s1, 3.0)
        h2, s2 = start(cache, 2, 50, 2, 5.0, s1, 44)
        st = state_at(cache, s1, 44)
        assert h2.resume_pos == 44 and st.live == (1 if pin else 0)
        assert st.last_use == (3.0 if pin else 5.0)  # held: its use is its release
        end(cache, h2, s2, 9.0)
        assert st.live == 0 and st.last_use == (9.0 if pin else 5.0)


def test_live_state_buffer_is_a_checkpoint_held_by_each_running_request(profile):
    for buf in (True, False):
        cache = cache_for("asc-lru", profile, capacity=200, live_state_buffer=buf)
        h, seq = start(cache, 1, 40, 4, 0.0)
        assert cache.private_states == (1 if buf else 0)
        end(cache, h, seq, 1.0)
        assert cache.private_states == 0


def test_free_stranded_states_frees_the_checkpoints_whose_kv_went(profile):
    for on in (False, True):
        cache = cache_for("vllm-like", profile, capacity=200, free_stranded_states=on)
        h, seq = start(cache, 1, 100, 10, 0.0)  # chunk-end states at 32, 64, 96
        end(cache, h, seq, 1.0)
        first = min((b for b in cache.nodes.values() if b.resident), key=lambda b: b.end)
        cache.drop_block(first)  # every state's path runs through it
        assert cache.resident_states == (0 if on else 3)


def test_free_orphan_kv_frees_the_tail_no_checkpoint_needs(profile):
    for on in (False, True):
        cache = cache_for("vllm-like", profile, capacity=200, free_orphan_kv=on)
        h, seq = start(cache, 1, 100, 30, 0.0)  # last state at 96: [96, 128) is orphan KV
        end(cache, h, seq, 1.0)
        ends = sorted(b.end for b in cache.nodes.values() if b.resident)
        assert ends[-1] == (96 if on else 128)


def test_dense_refuses_a_spacing_that_is_not_positive(profile):
    with pytest.raises(PolicyError, match=r"policy 'dense': option every must be a positive"):
        make_policy("dense", profile, every=0)


class _LeakyCache(HybridCache):
    """Its units are "evicted" without freeing anything: the pattern the guard must catch
    (an interpreted subclass, so the test runs on the compiled build too)."""

    def drop_unit(self, s: State) -> int:
        return self.C


def test_an_eviction_that_frees_nothing_raises_instead_of_spinning(profile):
    cache = _LeakyCache(profile, make_policy("flashstate-eq7", profile), capacity_blocks=40)
    h, seq = start(cache, 1, 64, 4, 0.0)
    end(cache, h, seq, 1.0)
    with pytest.raises(RuntimeError, match=r"flashstate-eq7: eviction in the 'any' pool at t=2.0"):
        cache.make_room(int(cache.free_blocks()) + 1, 0, 2.0)


def test_an_unstable_priority_raises_instead_of_spinning(profile):
    """A NaN prefill cost makes a GDS priority unequal to itself: re-filed at every pop."""
    nan = profile.model_copy(update={"prefill_cost_d": float("nan")})
    cache = cache_for("flashstate-eq7", nan, capacity=200)
    h, seq = start(cache, 1, 64, 4, 0.0)
    end(cache, h, seq, 1.0)
    with pytest.raises(
        RuntimeError, match=r"flashstate-eq7: the state at position \d+ .* re-filed"
    ):
        cache.make_room(int(cache.free_blocks()) + 1, 0, 2.0)
