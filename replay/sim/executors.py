"""The two timing modes: when a sent request computes, and when it completes.

- `TraceExecutor` (`trace` timing, the source's model): prefill is instantaneous and a
  request holds its blocks for its recorded `api_time`. Says nothing about speed, only about
  hits, recomputation and occupancy.
- `EngineExecutor` (`engine` timing): the engine model the emulators run
  (`replay.sim.engine`: continuous batching, chunked prefill, each engine's admission, the
  profile's step clock) on the virtual clock, so TTFT includes queueing and recomputation
  and throughput follows from the cache's hits.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from replay.profiles import ModelProfile
from replay.sim.cache.hybrid import HybridCache
from replay.sim.driver import EventLoop, SimRequest, api_seconds
from replay.sim.engine.core import EngineCore, EngineStall, Sequence, StepResult

Sampler = Callable[[float], None]


def _overflow(req: SimRequest, cache: HybridCache, now: float) -> None:
    req.status = "overflow"
    req.error = (
        f"needs {-(-(req.n + req.out) // cache.B)} blocks; the cache cannot hold them "
        f"beside the live requests ({cache.capacity} blocks in all)"
    )
    req.done_s = now


class TraceExecutor:
    """Recorded timing: instantaneous prefill, blocks held for the recorded duration.

    A request that does not fit beside the live ones waits (first come, first served) until
    one ends, as it would in an engine's queue; its first token then comes when it starts."""

    def __init__(self, loop: EventLoop, cache: HybridCache, profile: ModelProfile, sample: Sampler):
        self.loop, self.cache, self.profile, self.sample = loop, cache, profile, sample
        self.waiting: deque[tuple[SimRequest, Callable[[], None]]] = deque()
        self.live = 0

    def submit(self, req: SimRequest, done: Callable[[], None]) -> None:
        req.sent_s = self.loop.now
        self.sample(self.loop.now)
        self.waiting.append((req, done))
        if len(self.waiting) == 1:
            self._drain()

    def _drain(self) -> None:
        while self.waiting:
            req, done = self.waiting[0]
            if not self._start(req, done):
                if self.live:
                    return  # wait for a live request to end
                self.waiting.popleft()
                _overflow(req, self.cache, self.loop.now)
                done()
                continue
            self.waiting.popleft()

    def _start(self, req: SimRequest, done: Callable[[], None]) -> bool:
        cache, now = self.cache, self.loop.now
        info = cache.lookup(req.seq, req.n, now, req.ideal_hint)
        h = cache.begin(req.seq, req.n, info, now)
        total = req.n + req.out
        if not cache.reserve(h, total, now):
            cache.abort(h, now)
            return False
        req.info = info
        cache.prefill_done(h, now)
        req.first_token_s = now
        self.live += 1
        p = self.profile
        fallback = p.prefill_seconds(info.resume_pos, req.n) + req.out * p.decode_s_per_step
        dur = api_seconds(req.trajectory, req.index, fallback)

        def finish() -> None:
            cache.finish(h, req.seq, total, self.loop.now)
            req.done_s = self.loop.now
            self.live -= 1
            done()
            self._drain()

        self.loop.at(now + dur, finish)
        return True


@dataclass
class EngineStats:
    """The engine's own figures over the measured window, time-weighted by step: how long
    the queue was, how many ran, how much of the time the prefill budget was spent."""

    window: tuple[float, float]
    seconds: float = 0.0  # stepped seconds inside the window
    waiting_s: float = 0.0  # ∫ waiting requests dt
    running_s: float = 0.0
    full_s: float = 0.0  # seconds of steps whose prefill used the budget (within a block)
    prefill_tokens: int = 0

    def add(self, now: float, res: StepResult, core: EngineCore) -> None:
        lo, hi = self.window
        dt = min(now + res.duration, hi) - max(now, lo)
        if dt <= 0:
            return
        self.seconds += dt
        self.waiting_s += dt * len(core.waiting)
        self.running_s += dt * len(core.running)
        spare = core.clock.budget_tokens - res.decoding - res.prefill_tokens
        if res.prefill_tokens and spare < core.cache.block_tokens:
            self.full_s += dt
        self.prefill_tokens += res.prefill_tokens

    def summary(self) -> dict[str, float]:
        span = self.window[1] - self.window[0]
        t = self.seconds or 1.0
        return {
            "busy_share": self.seconds / span if span > 0 else 0.0,
            "waiting_mean": self.waiting_s / span if span > 0 else 0.0,
            "running_mean": self.running_s / t,
            "budget_full_share": self.full_s / span if span > 0 else 0.0,
            "prefill_tokens_per_s": self.prefill_tokens / span if span > 0 else 0.0,
        }


class EngineExecutor:
    """`engine` timing: the engine model (`replay.sim.engine.EngineCore`, the emulators' own)
    stepped on the simulator's virtual clock."""

    def __init__(
        self,
        loop: EventLoop,
        core: EngineCore,
        sample: Sampler,
        window: tuple[float, float] = (0.0, float("inf")),
    ):
        self.loop, self.core, self.sample = loop, core, sample
        self.stats = EngineStats(window)
        self.jobs: dict[int, tuple[SimRequest, Callable[[], None]]] = {}
        self._ids = itertools.count(1)
        self.busy = False
        self._idle_passes = 0  # consecutive steps that ran nothing

    def submit(self, req: SimRequest, done: Callable[[], None]) -> None:
        now = self.loop.now
        req.sent_s = now
        self.sample(now)
        rid = next(self._ids)
        self.jobs[rid] = (req, done)
        seq = Sequence(
            rid, req.seq, req.out, prompt_len=req.n, full=req.seq, hint=req.ideal_hint, arrival=now
        )
        self.core.add(seq)
        if not self.busy:
            self.busy = True
            self.loop.at(now, self._step)

    def _step(self) -> None:
        now = self.loop.now
        res = self.core.step(now)
        for seq in res.rejected:
            req, done = self.jobs.pop(seq.rid)
            cap = self.core.cache.capacity_blocks
            req.status = "overflow"
            req.error = (
                f"needs {-(-(req.n + req.out) // self.core.cache.block_tokens)} blocks; the cache "
                f"cannot hold them beside the live requests ({cap} blocks in all)"
            )
            req.done_s = now
            done()
        if res.duration == 0.0:
            if not self.core.has_work():
                self.busy = False
                return
            # Nothing ran, yet requests moved (a preemption, a rejection): step again now.
            # The core raises EngineStall on a step that changes nothing, so this repeats
            # only while each pass moves a request; more passes than requests is a bug.
            self._idle_passes += 1
            if self._idle_passes > 2 + len(self.jobs):
                raise EngineStall(
                    f"{self.core.policy}: {self._idle_passes} engine steps at t={now:.6f} s "
                    f"ran nothing ({len(self.core.running)} running, "
                    f"{len(self.core.waiting)} waiting)"
                )
            self.loop.at(now, self._step)
            return
        self._idle_passes = 0
        self.stats.add(now, res, self.core)
        self.loop.at(now + res.duration, lambda: self._end_step(res))

    def _end_step(self, res: StepResult) -> None:
        now = self.loop.now
        for seq in res.started:
            self.jobs[seq.rid][0].info = seq.resume
        for seq, _, finished in res.emitted:
            req = self.jobs[seq.rid][0]
            if seq.generated == 1:
                req.first_token_s = now
            if finished:
                req.done_s = now
                self.jobs.pop(seq.rid)[1]()
        self._step()
