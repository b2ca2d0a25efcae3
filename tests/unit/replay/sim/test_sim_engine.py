"""The engine model (replay.sim.engine.core): chunked prefill, continuous batching, the step clock,
token scale, each engine's admission."""

from __future__ import annotations

import numpy as np
import pytest

from replay.emulator.hashing import PrefixKeys, generated_ids, special_free_range
from replay.profiles import ModelProfile
from replay.sim.cache.cost import PrefillCost
from replay.sim.cache.kv_lru import KVLRUCache
from replay.sim.engine.cache import engine_cache
from replay.sim.engine.clock import StepClock
from replay.sim.engine.core import EngineCore, Sequence
from tests.profiles import engine_profile


def _core(
    p: ModelProfile, cache: object, scale: float = 1.0, admission: str = "schedule"
) -> EngineCore:
    return EngineCore(StepClock(p, scale), cache, admission)  # type: ignore[arg-type]


class _Sink:
    def __init__(self) -> None:
        self.events: list[tuple[int, bool]] = []

    def push(self, count: int, finished: bool) -> None:
        self.events.append((count, finished))


def _seq(rid: int, n: int, out: int, seed: int = 0) -> tuple[Sequence, _Sink]:
    ids = np.random.default_rng(seed).integers(1000, 30000, n)
    keys = PrefixKeys(ids, 64)
    sink = _Sink()
    return Sequence(rid, keys, out, generated_ids(keys, out, 32000), sink), sink


def _run(core: EngineCore, limit: int = 10_000, t: float = 0.0) -> float:
    """Step until idle, delivering tokens as the runner would; returns the model time."""
    for _ in range(limit):
        if not core.has_work():
            break
        r = core.step(t)
        assert r.duration > 0
        t += r.duration
        for seq, count, done in r.emitted:
            if seq.sink is not None:
                seq.sink.push(count, done)
    return t


def test_a_lone_request_costs_chunked_prefill_then_one_step_per_token() -> None:
    p = engine_profile()
    core = _core(p, KVLRUCache(64, 100))
    seq, sink = _seq(1, 600, 5)
    core.add(seq)
    t = _run(core)
    # 600 tokens in chunks of 256, 256, 88 (block aligned), then 4 more decode steps.
    prefill = (
        PrefillCost(p).clock_seconds(0, 256)
        + PrefillCost(p).clock_seconds(256, 512)
        + PrefillCost(p).clock_seconds(512, 600)
    )
    expected = prefill + 3 * 0.01 + 4 * (0.01 + 0.001)
    assert t == pytest.approx(expected)
    assert sink.events == [(1, False)] * 4 + [(1, True)]
    assert seq.first_token_t == pytest.approx(prefill + 3 * 0.01)


def test_chunks_end_on_block_boundaries_unless_they_finish_the_prompt() -> None:
    core = _core(engine_profile(prefill_cap_tokens=200), KVLRUCache(64, 100))
    seq, _ = _seq(1, 500, 1)
    core.add(seq)
    ends = []
    t = 0.0
    while core.has_work():
        r = core.step(t)
        t += r.duration
        ends.append(seq.computed)
    assert ends == [192, 384, 500]


def test_a_repeated_prompt_resumes_from_the_cache_and_prefills_only_the_rest() -> None:
    core = _core(engine_profile(), KVLRUCache(64, 100))
    first, _ = _seq(1, 640, 2)
    core.add(first)
    _run(core)
    again, _ = _seq(2, 640, 2)
    core.add(again)
    r = core.step(0.0)
    assert again.resume is not None and again.resume.cached == 639  # the last token is recomputed
    assert r.duration == pytest.approx(0.01 + PrefillCost(engine_profile()).clock_seconds(639, 640))
    assert core.counters.cached_tokens == 639
    assert core.counters.prompt_tokens == 1280


def test_decoding_sequences_share_a_step_and_pay_per_sequence() -> None:
    core = _core(engine_profile(prefill_cap_tokens=1000), KVLRUCache(64, 100))
    a, _ = _seq(1, 100, 3, seed=1)
    b, _ = _seq(2, 100, 3, seed=2)
    core.add(a)
    core.add(b)
    r0 = core.step(0.0)  # both prefilled in one step
    assert {s.rid for s in r0.started} == {1, 2}
    r1 = core.step(r0.duration)
    assert r1.duration == pytest.approx(0.01 + 2 * 0.001)
    assert len(r1.emitted) == 2


def test_max_batch_and_cache_capacity_make_requests_wait() -> None:
    core = _core(engine_profile(max_batch=1), KVLRUCache(64, 100))
    a, _ = _seq(1, 64, 5, seed=1)
    b, _ = _seq(2, 64, 5, seed=2)
    core.add(a)
    core.add(b)
    core.step(0.0)
    assert core.num_running == 1 and core.num_waiting == 1
    # A cache of 3 blocks holds one 64+64-token request (2 blocks) at a time.
    core = _core(engine_profile(prefill_cap_tokens=1000), KVLRUCache(64, 3))
    a, _ = _seq(1, 64, 64, seed=1)
    b, _ = _seq(2, 64, 64, seed=2)
    core.add(a)
    core.add(b)
    core.step(0.0)
    assert core.num_running == 1 and core.num_waiting == 1
    _run(core)
    assert b.done_t is not None and a.done_t is not None and b.done_t > a.done_t


def test_cancel_releases_a_running_request() -> None:
    cache = KVLRUCache(64, 10)
    core = _core(engine_profile(), cache)
    a, _ = _seq(1, 128, 100)
    core.add(a)
    core.step(0.0)
    assert cache.usage() > 0
    core.cancel(a, 1.0)
    assert cache.usage() == 0 and not core.has_work()
    assert core.counters.requests_aborted == 1


def test_the_step_budget_is_shared_and_each_request_is_capped() -> None:
    """vLLM: decode tokens first, then prefill chunks out of what is left of the budget, each
    at most the long-prefill threshold."""
    p = engine_profile(max_batched_tokens=300, prefill_cap_tokens=200, block_tokens=64)
    core = _core(p, KVLRUCache(64, 100))
    a, _ = _seq(1, 1000, 2, seed=1)
    b, _ = _seq(2, 1000, 2, seed=2)
    core.add(a)
    core.add(b)
    core.step(0.0)
    # a gets its cap aligned down to a block (192), b the rest of the budget aligned (64).
    assert (a.computed, b.computed) == (192, 64)


def test_a_scaled_step_stands_for_s_real_steps() -> None:
    """Token scale S: decode costs S real steps per scaled token, prefill costs its real
    positions, budgets keep their real-token values."""
    from replay.sim.engine.scale import scaled_profile

    base = engine_profile(prefill_cost_e=1e-6)
    s = 16.0
    prof = scaled_profile(base, s)
    clock = StepClock(prof, s)
    assert clock.decode_seconds(3) == pytest.approx(s * (0.01 + 3 * 0.001))
    assert clock.prefill_seconds(10, 20) == pytest.approx(PrefillCost(base).clock_seconds(160, 320))
    assert clock.budget_tokens == base.max_batched_tokens
    assert clock.prefill_cap_tokens == base.prefill_cap_tokens
    # A lone request: one scaled step per output token after the prefill.
    core = _core(prof, KVLRUCache(prof.block_tokens, 100), scale=s)
    seq, _ = _seq(1, 40, 3)
    core.add(seq)
    t = _run(core)
    expected = clock.prefill_seconds(0, 40) + s * 0.01 + 2 * s * (0.01 + 0.001)
    assert t == pytest.approx(expected)


def _tp(ids: list[int], out: int) -> Sequence:
    from replay.sim.cache.keys import TokenPrefix

    rid = ids[0] + len(ids) * 100_000
    full = TokenPrefix(ids + [7] * out, 16)
    return Sequence(rid, TokenPrefix(ids, 16), out, full=full)


def test_flashstate_parks_a_waiting_requests_state_and_vllm_does_not() -> None:
    """c will resume a's state and waits behind b, which needs room while r runs: with
    `park` (FlashState) a's state stays pinned and b waits for r; with `schedule` (vLLM,
    SGLang) b evicts it and c finds nothing when it is scheduled."""

    def run(admission: str) -> int:
        p = engine_profile(block_tokens=16, chunk_tokens=32, prefill_cap_tokens=1000, max_batch=8)
        core = _core(p, engine_cache("asc-unit-lru", p, capacity_blocks=18), admission=admission)
        core.add(_tp(list(range(64)), 1))  # a: 4 blocks + states at 32 and 64
        t = _run(core)
        core.add(_tp([5000 + i for i in range(8)], 40))  # r: runs long, holds 4 blocks
        t += core.step(t).duration
        b = _tp([9000 + i for i in range(144)], 1)  # needs 10 blocks: 8 are free
        c = _tp(list(range(80)), 1)
        for x in (b, c):
            x.arrival = t
            core.add(x)
        _run(core, t=t)
        assert b.done_t is not None and c.resume is not None
        return c.resume.cached

    assert run("park") == 64
    assert run("schedule") == 0


def test_a_request_the_cache_can_never_hold_is_rejected() -> None:
    core = _core(engine_profile(), KVLRUCache(64, 2))
    seq, _ = _seq(1, 640, 2)
    core.add(seq)
    r = core.step(0.0)
    assert r.rejected == [seq] and seq.rejected and not core.has_work()


def test_generated_ids_are_deterministic_per_prompt_and_avoid_special_ids() -> None:
    a = PrefixKeys(np.arange(100), 64)
    b = PrefixKeys(np.arange(1, 101), 64)
    ga, gb = generated_ids(a, 500, 32000), generated_ids(b, 500, 32000)
    assert (ga == generated_ids(PrefixKeys(np.arange(100), 64), 500, 32000)).all()
    assert not (ga == gb).all()
    lo, hi = special_free_range(32000)
    assert lo > 0 and hi < 32000
    assert ga.min() >= lo and ga.max() < hi
