"""Adapter: the simulator's online cache core (`replay.sim.cache.HybridCache`) as the
emulator's `EngineCache`, so an emulated engine and `replay simulate` share one model of
each policy (placement, eviction, admission) and cannot drift apart.

The cache places checkpoints itself from its policy's own chunk model when a request
begins, and materialises blocks and checkpoints when it finishes; the engine's per-chunk
`prefill` calls therefore carry no information it needs. A request's KV covers its prompt
plus all generated ids but the last (whose KV is never computed), and that is the length
passed at `finish` — the exact-end checkpoint of ASC sits where a real engine's live state is.
"""

from __future__ import annotations

from replay.engines.emulator.cache import Resume
from replay.engines.emulator.caches import CacheSettings
from replay.engines.emulator.hashing import PrefixKeys
from replay.sim.cache import Handle, HybridCache, ResumeInfo
from replay.sim.policies import make_policy


class SimCache:
    """One `HybridCache` with the named policy, driven request by request."""

    def __init__(self, settings: CacheSettings) -> None:
        policy = make_policy(settings.policy, settings.profile, **settings.options)
        self.cache = HybridCache(settings.profile, policy, settings.capacity_blocks)
        self.policy = settings.policy
        self._infos: dict[int, ResumeInfo] = {}
        self._handles: dict[int, Handle] = {}
        self._resume: dict[int, int] = {}  # request -> resume position (what it keeps)

    @property
    def block_tokens(self) -> int:
        return self.cache.B

    @property
    def capacity_blocks(self) -> int | None:
        return self.cache.capacity

    def lookup(self, rid: int, seq: PrefixKeys, now: float) -> Resume:
        info = self.cache.lookup(seq, len(seq), now)
        self._infos[rid] = info
        return Resume(
            cached=info.resume_pos,
            ideal=info.ideal_pos,
            checkpoint_pos=info.checkpoint_pos,
            resident_pos=info.resident_pos,
            placement_miss=info.placement_miss,
            dependency_miss=info.dependency_miss,
            capacity_miss=info.capacity_miss,
        )

    def admit(
        self, rid: int, seq: PrefixKeys, resume: Resume, reserve_tokens: int, now: float
    ) -> bool:
        info = self._infos.pop(rid, None)
        if info is None:  # admit without a lookup just before: look up now
            self.lookup(rid, seq, now)
            info = self._infos.pop(rid)
        # The cache keeps the prompt (blocks cached at prefill end refer to it): hand it the
        # retained form, which holds only the tokens the cache can still ask about.
        keep = seq.retained(self._keep_from(info.resume_pos), self.cache.B)
        h = self.cache.begin(keep, len(seq), info, now)
        if not self.cache.reserve(h, reserve_tokens, now):
            self.cache.abort(h, now)
            return False
        self._handles[rid] = h
        self._resume[rid] = info.resume_pos
        return True

    def _keep_from(self, resume_pos: int) -> int:
        """The cache builds a request's new blocks from the block holding its resume
        position on; keep tokens from one block before that (a margin), not all of them."""
        B = self.cache.B
        return (max(resume_pos - 1, 0) // B - 1) * B

    def prefill(self, rid: int, start: int, end: int, now: float) -> None:
        """Placement was decided at `begin` from the policy's chunk model; when the prompt
        is fully computed its blocks and prefill checkpoints join the cache."""
        h = self._handles.get(rid)
        if h is not None and end >= h.prompt_len:
            self.cache.prefill_done(h, now)

    def finish(self, rid: int, seq: PrefixKeys, now: float) -> None:
        h = self._handles.pop(rid)
        keep = seq.retained(self._keep_from(self._resume.pop(rid, 0)), self.cache.B)
        self.cache.finish(h, keep, len(keep), now)

    def abort(self, rid: int, now: float) -> None:
        self._infos.pop(rid, None)
        h = self._handles.pop(rid, None)
        self._resume.pop(rid, None)
        if h is not None:
            self.cache.abort(h, now)

    def usage(self) -> float:
        cap = self.cache.capacity
        return min(1.0, self.cache.used_blocks / cap) if cap else 0.0
