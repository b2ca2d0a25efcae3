"""`engine` timing: the engine model the emulators run (`replay.sim.engine`: continuous
batching, chunked prefill, each engine's admission, the profile's step clock) stepped on the
simulator's virtual clock, so TTFT includes queueing and recomputation and throughput follows
from the cache's hits (`trace` timing is `replay.sim.executors`).

Compiled with the engine model (`replay.sim.compiled`): it runs once per engine step, millions
of times in a fleet's run. It calls the cache only through the engine model's `SimCache`, so
an experiment that wraps the cache's methods still sees every call.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from replay.sim.driver import SimRequest
from replay.sim.engine.core import EngineCore, EngineStall, Sequence, StepResult
from replay.sim.events import EventLoop
from replay.sim.executors import Sampler


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
        on_first: Callable[[SimRequest], None] | None = None,
    ):
        self.loop, self.core, self.sample = loop, core, sample
        # A fleet's replica tells the fleet when a request's first token comes (before the
        # step's ends are handled, so the router's book has every first token of the step).
        self.on_first = on_first
        core.every_token = False  # `_end_step` reads first tokens and ends only
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
        on_first = self.on_first
        if on_first is not None:
            for seq, _, _ in res.emitted:
                if seq.generated == 1:
                    on_first(self.jobs[seq.rid][0])
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
