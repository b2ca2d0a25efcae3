"""The two timing modes: when a sent request computes, and when it completes.

- `TraceExecutor` (`trace` timing, the source's model): prefill is instantaneous and a
  request holds its blocks for its recorded `api_time`. Says nothing about speed, only about
  hits, recomputation and occupancy.
- `EngineExecutor` (`engine` timing): a continuous-batching engine with chunked prefill.
  Each step spends a token budget of `chunk_tokens` on one token per decoding sequence and
  prefill chunks of waiting requests (first come, first served); it lasts the profile's
  step cost plus a per-sequence decode cost plus the prefill seconds of the profile's engine
  clock (`clock_prefill_seconds`, the emulators' clock too). A request is admitted when its
  memory fits (evicting as the policy allows), so TTFT includes queueing and recomputation,
  and throughput follows from the cache's hits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from replay.profiles import ModelProfile
from replay.sim.cache import Handle, HybridCache
from replay.sim.driver import EventLoop, SimRequest, api_seconds

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


@dataclass(slots=True)
class _Job:
    req: SimRequest
    h: Handle
    done: Callable[[], None]
    pos: int = 0  # prefilled up to here
    left: int = 0  # output tokens still to decode


class EngineExecutor:
    """Continuous batching with chunked prefill on the profile's cost model."""

    def __init__(self, loop: EventLoop, cache: HybridCache, profile: ModelProfile, sample: Sampler):
        self.loop, self.cache, self.profile, self.sample = loop, cache, profile, sample
        self.waiting: deque[_Job] = deque()
        self.running: list[_Job] = []
        self.busy = False
        self.steps = 0

    def submit(self, req: SimRequest, done: Callable[[], None]) -> None:
        now = self.loop.now
        req.sent_s = now
        info = self.cache.lookup(req.seq, req.n, now, req.ideal_hint)
        req.info = info
        self.sample(now)
        # Looked up and pinned on arrival: a waiting request's state is parked.
        h = self.cache.begin(req.seq, req.n, info, now)
        self.waiting.append(_Job(req, h, done))
        if not self.busy:
            self.busy = True
            self.loop.at(now, self._step)

    def _admit(self, now: float) -> None:
        while self.waiting and len(self.running) < self.profile.max_batch:
            j = self.waiting[0]
            if not self.cache.reserve(j.h, j.req.n + j.req.out, now):
                if self.running:
                    return  # wait for memory to free up
                self.waiting.popleft()
                self.cache.abort(j.h, now)
                _overflow(j.req, self.cache, now)
                j.done()
                continue
            self.waiting.popleft()
            # At least the last prompt token is computed: its logits give the first token.
            j.pos = min(j.h.resume_pos, max(j.req.n - 1, 0))
            self.running.append(j)

    def _step(self) -> None:
        now, p = self.loop.now, self.profile
        self._admit(now)
        if not self.running:
            self.busy = False
            return
        self.steps += 1
        decoding = [j for j in self.running if j.pos >= j.req.n]
        budget = p.chunk_tokens - len(decoding)
        dt = p.decode_s_per_step + p.decode_s_per_seq * len(decoding)
        pieces: list[tuple[_Job, int]] = []
        for j in self.running:
            if budget <= 0:
                break
            if j.pos < j.req.n:
                k = min(j.req.n - j.pos, budget)
                dt += p.clock_prefill_seconds(j.pos, j.pos + k)
                pieces.append((j, k))
                budget -= k
        self.loop.at(now + dt, lambda: self._end_step(decoding, pieces))

    def _end_step(self, decoding: list[_Job], pieces: list[tuple[_Job, int]]) -> None:
        now = self.loop.now
        ended: list[_Job] = []
        for j in decoding:
            j.left -= 1
            if j.left <= 0:
                ended.append(j)
        for j, k in pieces:
            j.pos += k
            if j.pos >= j.req.n:
                self.cache.prefill_done(j.h, now)
                j.req.first_token_s = now
                j.left = j.req.out - 1
                if j.left <= 0:
                    ended.append(j)
        for j in ended:
            self.running.remove(j)
            self.cache.finish(j.h, j.req.seq, j.req.n + j.req.out, now)
            j.req.done_s = now
            j.done()
        self._step()
