"""The two timing modes: when a sent request computes, and when it completes.

- `TraceExecutor` (`trace` timing, the source's model, here): prefill is instantaneous and a
  request holds its blocks for its recorded `api_time`. Says nothing about speed, only about
  hits, recomputation and occupancy.
- `EngineExecutor` (`engine` timing, `replay.sim.engine_timing`): the engine model the
  emulators run on the virtual clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from replay.profiles import ModelProfile
from replay.sim.cache.cost import PrefillCost
from replay.sim.cache.hybrid import HybridCache
from replay.sim.driver import SimRequest, api_seconds
from replay.sim.events import EventLoop

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
        self.cost = PrefillCost(profile)
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
        fallback = self.cost.seconds(info.resume_pos, req.n) + req.out * p.decode_s_per_step
        dur = api_seconds(req.trajectory, req.index, fallback)

        def finish() -> None:
            cache.finish(h, req.seq, total, self.loop.now)
            req.done_s = self.loop.now
            self.live -= 1
            done()
            self._drain()

        self.loop.at(now + dur, finish)
        return True
