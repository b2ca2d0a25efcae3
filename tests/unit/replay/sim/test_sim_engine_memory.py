"""The engine model's memory rules (replay.sim.engine.rules): allocation per step, the
admission gate, preemption and recompute, sub-block chunks, the stall guard. Each scenario
is small and deterministic and fails under the rule it replaces."""

from __future__ import annotations

import pytest

from replay.profiles import ModelProfile
from replay.sim.cache.keys import TokenPrefix
from replay.sim.engine.cache import engine_cache
from replay.sim.engine.clock import StepClock
from replay.sim.engine.core import EngineCore, EngineStall, Sequence
from replay.sim.engine.rules import (
    SGLANG_RULES,
    UPFRONT_RULES,
    VLLM_RULES,
    EngineRules,
    parse_rules,
    rules_for,
)
from tests.profiles import engine_profile


def _profile(**kw: object) -> ModelProfile:
    base: dict[str, object] = dict(
        block_tokens=16, chunk_tokens=32, prefill_cap_tokens=1000, max_batch=8
    )
    base.update(kw)
    return engine_profile(**base)


def _core(
    blocks: int, rules: EngineRules, policy: str = "vllm", prof: dict[str, object] | None = None
) -> EngineCore:
    p = _profile(**(prof or {}))
    return EngineCore(
        StepClock(p), engine_cache(policy, p, capacity_blocks=blocks), "schedule", rules
    )


class _Count:
    def __init__(self) -> None:
        self.tokens = 0
        self.finished = 0

    def push(self, count: int, finished: bool) -> None:
        self.tokens += count
        self.finished += finished


def _seq(rid: int, n: int, out: int, base: int) -> Sequence:
    ids = [base + i for i in range(n)]
    full = TokenPrefix(ids + [7] * out, 16)
    return Sequence(rid, TokenPrefix(ids, 16), out, full=full, sink=_Count())


def _run(core: EngineCore, t: float = 0.0, limit: int = 5000) -> float:
    for _ in range(limit):
        if not core.has_work():
            return t
        r = core.step(t)
        t += r.duration
        for seq, count, done in r.emitted:
            assert seq.sink is not None
            seq.sink.push(count, done)
    raise AssertionError("the engine did not finish")


def test_engines_get_their_own_rules_and_rule_text_is_checked() -> None:
    assert rules_for("vllm") == VLLM_RULES and rules_for("flashstate-eq7") == VLLM_RULES
    assert rules_for("sglang") == SGLANG_RULES
    assert parse_rules("allocation=upfront, subblock_chunks=true", VLLM_RULES) == EngineRules(
        allocation="upfront", subblock_chunks=True
    )
    with pytest.raises(ValueError, match="'gate=all': gate must be one of prompt, prompt"):
        parse_rules("gate=all", VLLM_RULES)
    with pytest.raises(ValueError, match="'speed=9': expected NAME=VALUE"):
        parse_rules("speed=9", VLLM_RULES)


def test_allocation_per_step_admits_what_fits_now_and_up_front_waits() -> None:
    """a (32 prompt + 96 output tokens = 8 blocks) runs in a 12-block cache; b's prompt (48
    tokens, 3 blocks + a state) fits beside what a holds now (2 blocks + state), so vLLM
    schedules it in the same step; reserving a's whole output up front leaves no room."""

    def started_together(rules: EngineRules) -> bool:
        core = _core(12, rules)
        a, b = _seq(1, 32, 96, 0), _seq(2, 48, 4, 1000)
        core.add(a)
        core.add(b)
        r = core.step(0.0)
        return {s.rid for s in r.started} == {1, 2}

    assert started_together(VLLM_RULES)
    assert not started_together(UPFRONT_RULES)


def test_a_running_request_short_of_blocks_preempts_the_newest_which_recomputes() -> None:
    """Two requests whose outputs outgrow a 12-block cache: the newest is preempted when the
    older one needs a block, goes back to the head of the queue, and later recomputes its
    prompt and output so far; every token is emitted once."""
    core = _core(12, VLLM_RULES)
    a, b = _seq(1, 32, 80, 0), _seq(2, 32, 80, 1000)
    core.add(a)
    core.add(b)
    _run(core)
    assert core.counters.preemptions >= 1 and b.preemptions >= 1 and a.preemptions == 0
    assert a.done_t is not None and b.done_t is not None and a.done_t < b.done_t
    for s in (a, b):
        assert isinstance(s.sink, _Count) and (s.sink.tokens, s.sink.finished) == (80, 1)
    # b's recompute covered its prompt plus what it had generated when preempted
    assert b.target > b.prompt_len


def test_sglang_retracts_the_decoding_request_with_the_fewest_output_tokens() -> None:
    core = _core(100, SGLANG_RULES, policy="sglang")
    a, b, c = _seq(1, 16, 50, 0), _seq(2, 16, 50, 100), _seq(3, 16, 50, 200)
    for s in (a, b, c):
        core.running.append(s)
        s.computed = s.target
    a.generated, b.generated, c.generated = 9, 3, 5
    assert core._victim() is b
    assert EngineCore(core.clock, core.cache, "schedule", VLLM_RULES)._victim() is None
    core.rules = VLLM_RULES
    assert core._victim() is c  # vLLM: the newest running request


def test_the_vllm_gate_counts_the_prompt_and_sglang_adds_the_output() -> None:
    """A 48-token prompt with 160 output tokens in an 8-block cache: vLLM admits it (the
    prompt fits), SGLang's budget (prompt + output) refuses it, and with nothing else
    running the request can never fit."""
    for rules, admitted in ((VLLM_RULES, True), (SGLANG_RULES, False)):
        core = _core(8, rules, policy="vllm")
        s = _seq(1, 48, 160, 0)
        core.add(s)
        r = core.step(0.0)
        assert bool(r.started) == admitted
        assert bool(r.rejected) == (not admitted)


def test_a_request_that_outgrows_the_whole_cache_alone_is_rejected_not_recomputed_forever() -> None:
    core = _core(8, VLLM_RULES)
    s = _seq(1, 48, 160, 0)
    core.add(s)
    for _ in range(1000):
        if not core.has_work():
            break
        core.step(0.0)
    assert s.rejected and not core.has_work() and core.counters.preemptions == 0


def test_a_chunk_short_of_a_block_is_not_run_unless_it_ends_the_prompt() -> None:
    """vLLM's align mode: with 250 tokens of budget and a 200-token cap, a takes 192 (block
    aligned) and the 58 left cannot make a block-aligned chunk for b."""
    kw: dict[str, object] = dict(block_tokens=64, max_batched_tokens=250, prefill_cap_tokens=200)
    for rules, b_computed in ((VLLM_RULES, 0), (VLLM_RULES.with_(subblock_chunks=True), 58)):
        core = _core(100, rules, prof=kw)
        a, b = _seq(1, 1000, 2, 0), _seq(2, 1000, 2, 5000)
        core.add(a)
        core.add(b)
        core.step(0.0)
        assert (a.computed, b.computed) == (192, b_computed)
    # Reserving up front, b is not even admitted (it would hold its room and compute nothing).
    core = _core(100, UPFRONT_RULES.with_(subblock_chunks=False), prof=kw)
    a, b = _seq(1, 1000, 2, 0), _seq(2, 1000, 2, 5000)
    core.add(a)
    core.add(b)
    r = core.step(0.0)
    assert [s.rid for s in r.started] == [1] and core.num_waiting == 1


def test_an_engine_that_can_run_nothing_raises_instead_of_spinning() -> None:
    """Without preemption two running requests that both need a block in a full cache can
    never move: the step says so (policy, request, time) instead of returning nothing."""
    core = _core(12, VLLM_RULES.with_(preemption="none"))
    a, b = _seq(1, 32, 80, 0), _seq(2, 32, 80, 1000)
    core.add(a)
    core.add(b)
    with pytest.raises(EngineStall, match=r"vllm: the engine can run nothing at t=\d+\.\d+ s"):
        _run(core)


def test_the_event_loop_raises_on_work_refiled_at_the_same_time() -> None:
    from replay.sim.events import EventLoop, SimStall

    loop = EventLoop("flashstate", max_per_instant=1000)

    def again() -> None:
        loop.at(loop.now, again)  # never consumes anything

    loop.at(5.0, again)
    with pytest.raises(SimStall, match=r"flashstate: 1,001 events at t=5\.0 s .*again"):
        loop.run(60.0)
    # many events at one instant that end are fine
    ok = EventLoop("vllm", max_per_instant=1000)
    for _ in range(900):
        ok.at(1.0, lambda: None)
    ok.run(2.0)
    assert ok.now == 2.0


def test_the_executor_raises_when_steps_keep_running_nothing() -> None:
    """A core whose steps report a moved request but never run anything (a bug): the
    simulator's executor stops with the policy and the time instead of re-filing forever."""
    from replay.sim.engine.core import StepResult
    from replay.sim.engine_timing import EngineExecutor
    from replay.sim.events import EventLoop

    class Spinning(EngineCore):
        def step(self, now: float) -> StepResult:
            return StepResult(0.0, preempted=list(self.waiting))

    p = _profile()
    core = Spinning(
        StepClock(p), engine_cache("vllm", p, capacity_blocks=12), "schedule", VLLM_RULES
    )
    core.add(_seq(1, 32, 4, 0))
    loop = EventLoop("vllm")
    ex = EngineExecutor(loop, core, lambda t: None)
    loop.at(3.0, ex._step)
    with pytest.raises(EngineStall, match=r"vllm: \d+ engine steps at t=3\.000000 s ran nothing"):
        loop.run(10.0)
