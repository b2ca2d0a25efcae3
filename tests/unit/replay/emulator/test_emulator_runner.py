"""The engine clock on a fake wall clock: tokens are delivered when their modelled step ends,
scaled by the time scale, and coalesced when steps are shorter than the event loop serves."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from replay.emulator.hashing import PrefixKeys, generated_ids
from replay.emulator.runner import MIN_SLEEP_S, EngineRunner
from replay.sim.cache.cost import PrefillCost
from replay.sim.cache.kv_lru import KVLRUCache
from replay.sim.engine.clock import StepClock
from replay.sim.engine.core import EngineCore, Sequence, StepResult
from tests.profiles import engine_profile

# The engine tests' profile with this file's clock and batch: 20 ms steps, no per-sequence
# cost, eight sequences, ModelProfile's own prefill caps (8,704 per request, 16,384 a step).
PROFILE = engine_profile(
    decode_s_per_step=0.02,
    decode_s_per_seq=0.0,
    max_batch=8,
    prefill_cap_tokens=8704,
    max_batched_tokens=16384,
)


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds
        await asyncio.sleep(0)


class Recorder:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.events: list[tuple[float, int, bool]] = []
        self.done = asyncio.Event()

    def push(self, count: int, finished: bool) -> None:
        self.events.append((self.clock(), count, finished))
        if finished:
            self.done.set()


async def _run(time_scale: float, out: int) -> tuple[FakeClock, Recorder]:
    clock = FakeClock()
    runner = EngineRunner(
        EngineCore(StepClock(PROFILE), KVLRUCache(64, 100)),
        time_scale,
        clock=clock,
        sleep=clock.sleep,
    )
    runner.start()
    keys = PrefixKeys(np.arange(200), 64)
    rec = Recorder(clock)
    runner.submit(Sequence(1, keys, out, generated_ids(keys, out, 32000), rec))
    await asyncio.wait_for(rec.done.wait(), 5)
    await runner.stop()
    return clock, rec


async def test_tokens_arrive_at_the_scaled_end_of_their_steps() -> None:
    _clock, rec = await _run(time_scale=2.0, out=4)
    prefill = PrefillCost(PROFILE).clock_seconds(0, 200) + 0.02
    expected = [100.0 + (prefill + k * 0.02) / 2.0 for k in range(4)]
    assert [t for t, _, _ in rec.events] == pytest.approx(expected)
    assert [c for _, c, _ in rec.events] == [1, 1, 1, 1]
    assert [f for _, _, f in rec.events] == [False, False, False, True]


async def test_steps_shorter_than_the_loop_serves_are_delivered_without_sleeping() -> None:
    # At time-scale 100 a 20 ms step is 0.2 ms of wall time, below MIN_SLEEP_S: the runner
    # computes due steps back to back instead of sleeping for each.
    assert MIN_SLEEP_S > 0.02 / 100
    _clock, rec = await _run(time_scale=100.0, out=50)
    assert sum(c for _, c, _ in rec.events) == 50
    model_end = PrefillCost(PROFILE).clock_seconds(0, 200) + 50 * 0.02
    # Never early: the last token is not delivered before its modelled time.
    assert rec.events[-1][0] >= 100.0 + model_end / 100 - MIN_SLEEP_S
    assert len({t for t, _, _ in rec.events}) < 50  # several tokens share a wake-up


async def test_idle_time_advances_the_model_clock() -> None:
    clock = FakeClock()
    runner = EngineRunner(
        EngineCore(StepClock(PROFILE), KVLRUCache(64, 100)), 10.0, clock=clock, sleep=clock.sleep
    )
    runner.start()
    await asyncio.sleep(0)
    clock.t += 3.0  # three idle wall seconds
    keys = PrefixKeys(np.arange(100), 64)
    rec = Recorder(clock)
    seq = Sequence(1, keys, 1, generated_ids(keys, 1, 32000), rec)
    runner.submit(seq)
    await asyncio.wait_for(rec.done.wait(), 5)
    await runner.stop()
    assert seq.arrival == pytest.approx(30.0)  # model seconds = wall seconds × scale


class _SpinningCore(EngineCore):
    """A core whose steps run nothing yet report a moved request, forever: a bug the runner
    must turn into failed requests, not a busy loop."""

    def step(self, now: float) -> StepResult:
        return StepResult(0.0, preempted=list(self.waiting))


async def test_steps_that_never_run_anything_fail_the_requests_instead_of_spinning() -> None:
    clock = FakeClock()
    errors: list[str] = []
    core = _SpinningCore(StepClock(PROFILE), KVLRUCache(64, 100))
    runner = EngineRunner(core, 10.0, clock=clock, sleep=clock.sleep, on_error=errors.append)
    runner.start()
    keys = PrefixKeys(np.arange(100), 64)
    runner.submit(Sequence(1, keys, 1, generated_ids(keys, 1, 32000), Recorder(clock)))
    for _ in range(50):
        await asyncio.sleep(0)
        if errors:
            break
    await runner.stop()
    assert errors and "steps at model time" in errors[0] and "ran nothing" in errors[0]
    assert not core.has_work()
