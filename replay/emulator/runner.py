"""The wall clock of an emulated engine: runs `replay.sim.engine.core.EngineCore` steps, scaled.

Model time advances by each step's modelled duration; wall time = model time / time_scale.
A step's tokens are handed to their streams when the step's end is due on the wall clock.
When scaled steps are shorter than the event loop can serve (a 18 ms decode step at
time-scale 30 is 0.6 ms), the runner computes every step that is already due back to back
and the streams send what accumulated as one chunk: output is coalesced, timing is not
shifted. While idle the model clock follows the wall clock, so gaps between requests cost
model time as they would on a GPU. If the host is too slow to keep up, model time lags the
wall clock and the emulated engine is simply slower, never wrong about what it computed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from replay.sim.engine.core import EngineCore, Sequence, StepResult

log = logging.getLogger(__name__)

# Do not sleep for less than this (wall seconds): below it, coalesce instead.
MIN_SLEEP_S = 0.002
# Yield to the event loop at least this often while catching up (wall seconds).
MAX_BUSY_S = 0.01


class StuckRequest(RuntimeError):
    """A request the cache can never hold, even with nothing else running."""


class EngineRunner:
    """Drives one `EngineCore` in an asyncio task; `submit` queues a sequence."""

    def __init__(
        self,
        core: EngineCore,
        time_scale: float,
        clock: Callable[[], float] = time.monotonic,
        on_stuck: Callable[[Sequence], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.core = core
        self.sleep = sleep  # injectable with `clock`, so tests run the clock without waiting
        self.time_scale = time_scale
        self.clock = clock
        self.on_stuck = on_stuck
        self.on_error = on_error
        self.wall0 = clock()
        self.model_now = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def model_time(self, wall: float | None = None) -> float:
        """The model time that corresponds to a wall-clock reading (default: now)."""
        w = self.clock() if wall is None else wall
        return (w - self.wall0) * self.time_scale

    def wall_time(self, model: float) -> float:
        return self.wall0 + model / self.time_scale

    def submit(self, seq: Sequence) -> None:
        seq.arrival = max(self.model_now, self.model_time())
        self.core.add(seq)
        self._wake.set()

    def cancel(self, seq: Sequence) -> None:
        self.core.cancel(seq, self.model_now)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="engine-clock")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        busy_since = self.clock()
        idle = 0  # consecutive steps that ran nothing
        while True:
            if not self.core.has_work():
                self._wake.clear()
                await self._wake.wait()
                busy_since = self.clock()
                self.model_now = max(self.model_now, self.model_time())
                continue
            try:
                result = self.core.step(self.model_now)
            except Exception as e:  # a model bug must fail requests, not hang the server
                self._fail_all(f"emulator engine error: {type(e).__name__}: {e}")
                log.exception("engine step failed; running and waiting requests were failed")
                continue
            self._reject(result)
            if result.duration == 0.0:
                # Nothing ran but requests moved (a preemption, a rejection); the core
                # raises EngineStall on a step that changes nothing, so this repeats only
                # while requests move: more passes than requests is a bug, not a wait.
                idle += 1
                if idle > 2 + self.core.num_running + self.core.num_waiting:
                    msg = (
                        f"emulator engine error: {idle} steps at model time "
                        f"{self.model_now:.6f} s ran nothing ({self.core.policy})"
                    )
                    self._fail_all(msg)
                    log.error(msg)
                    idle = 0
                await asyncio.sleep(0)
                continue
            idle = 0
            self.model_now += result.duration
            lead = self.wall_time(self.model_now) - self.clock()
            if lead > MIN_SLEEP_S:
                await self.sleep(lead)
                busy_since = self.clock()
            self._deliver(result)
            if self.clock() - busy_since > MAX_BUSY_S:
                await asyncio.sleep(0)  # let streams write what accumulated
                busy_since = self.clock()

    def _fail_all(self, message: str) -> None:
        """After an internal error: drop every request from the engine and tell the server
        (which fails every unfinished stream, including one whose step was interrupted)."""
        for seq in [*self.core.running, *self.core.waiting]:
            self.core.cancel(seq, self.model_now)
        if self.on_error is not None:
            self.on_error(message)

    def _reject(self, result: StepResult) -> None:
        """Requests the engine found it can never hold (nothing else ran, still no room)."""
        if self.on_stuck is not None:
            for seq in result.rejected:
                self.on_stuck(seq)

    @staticmethod
    def _deliver(result: StepResult) -> None:
        for seq, count, done in result.emitted:
            if seq.sink is not None:
                seq.sink.push(count, done)
