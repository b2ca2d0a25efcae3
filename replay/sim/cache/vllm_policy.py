"""`vllm`: vLLM 0.32's hybrid prefix cache (attention + Mamba "align"), as its code does it.

Checked request by request against vLLM's own `KVCacheManager` (`vllm-native`,
tests/unit/replay/sim/test_sim_native_vllm.py). The rules, with the vLLM 0.32 source they
come from (paths under `vllm/`):

1. Which states are kept. A server resolves `prefix_cache_retention_interval` to 0
   (`config/cache.py`, CacheConfig: "0 retains only semantic checkpoints, including the
   latest replay boundary and shared-prefix junctions"), so a prompt of n tokens leaves a
   Mamba state only at its replay boundary ⌊(n−1)/B⌋·B (`v1/core/kv_cache_coordinator.py`
   `replay_boundaries`: `(num_prompt_tokens - 1,)` floored to the block by
   `MambaManager.reachable_block_mask`) and at a shared-prefix junction (rule 3). States at
   other chunk ends are computed and not kept. Nothing is kept during decode.
2. n − 1. A hit is capped at n − 1 tokens: the last prompt token is recomputed for its
   logits (`v1/core/kv_cache_manager.py` `get_computed_blocks`: `max_cache_hit_length =
   request.num_tokens - 1`).
3. Junctions. When the attention KV hit runs past the state hit, `get_computed_blocks`
   returns `shared_prefix_boundary` = the longest single-group hit; the scheduler ends a
   chunk there (`v1/core/sched/scheduler.py` `_mamba_block_aligned_split`, `junction_stop`,
   block-floored) and the manager keeps the state there, so a later sibling hits it.
4. Eviction order. vLLM's free queue is LRU by the time a block is freed, ties tail first
   (`v1/core/block_pool.py` `free_blocks`; `kv_cache_manager.free` frees a request's blocks
   in reverse order). A Mamba state block is freed once the running state moves past it,
   right after the prefill (`single_type_kv_cache_manager.py` MambaManager
   `remove_skipped_blocks`), the request's KV only when it ends: states go before their own
   KV. So here: no state is held until the request ends, a prefill state keeps the stamp
   it got when it was written (rule `prefill_state_stamp="write"`), and a state the
   request resumed from is not held: it counts as released when it was taken (vLLM frees
   it after the request's first chunk, MambaManager's `last_state_block_idx`; rule
   `pin_resumed_state=False`).
5. Duplicate blocks. After a state miss the KV between the state hit and the KV hit is
   recomputed into new blocks (`allocate_slots` allocates from `num_computed_tokens`, the
   state-limited hit; `find_longest_cache_hit` truncates the attention hit to it, so the
   cached copies are never referenced). The request holds its own blocks only; the old
   copies stay in the free queue where they were, evictable (`VllmCache.prefill_done`).

Checked against vLLM's own code under pressure two ways (docs/native-policies.md "Under the
demo's pressure", experiments/vllm_native_pressure.py: its `KVCacheManager` request by request
on a full-size corpus at the demo's working set; docs/engine-model.md "vLLM's own scheduler
as the oracle", experiments/vllm_scheduler_oracle.py: its v1 `Scheduler` on our step clock).
The one simplification left is a switch: vLLM keeps a recomputed block beside its old copy
under one hash when the request ends (`BlockPool.cache_full_blocks`, `BlockHashToBlockMap`);
here the old copy goes (option `cached_copies`, off). Off is the closer reading against
vLLM's Scheduler at every load from 16 to 64 sessions, and request by request against its
manager at the demo's working set (169 against 180 of 4,991 requests differ), though the
cached-token total there is closer with it on (0.97× against 1.10×).
"""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING, Any, ClassVar

from replay.profiles import ModelProfile
from replay.sim.cache.eviction import AllocationLRU, Pool
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import Prefix
from replay.sim.cache.nodes import Block, State
from replay.sim.cache.policy_base import Placement, Policy
from replay.sim.cache.requests import CacheError, Handle

if TYPE_CHECKING:
    from replay.sim.cache.requests import ResumeInfo


class ReplayBoundary(Placement):
    """Retention 0: a state at the prompt's replay boundary ⌊(n−1)/B⌋·B and, when the
    request's KV hit runs past its state hit, at that junction (block-floored, capped at
    n − 1). `prefill_positions` alone (no lookup at hand) gives the replay boundary."""

    @property
    def holds_last_state(self) -> bool:
        return False  # rule 4: released when the running state moves past it

    def prefill_positions(self, r: int, n: int, block: int) -> list[int]:
        last = (n - 1) // block * block if n > 0 else 0
        return [last] if last > r else []

    def positions_for(self, info: ResumeInfo, n: int, block: int) -> list[int]:
        r = info.resume_pos
        out = self.prefill_positions(r, n, block)
        kv = min(info.kv_pos, n - 1) // block * block
        last = out[-1] if out else r
        if r < kv < last:
            out.insert(0, kv)
        return out


class VllmLRU(AllocationLRU):
    """vLLM's free queue: LRU by release time, tail first; a resumed-from state counts as
    released when the request took it (rule 4); a block may have extra cached copies (rule
    5), each its own entry in the queue."""

    def __init__(self, cache: HybridCache):
        super().__init__(cache)
        self._taken: dict[int, float] = {}
        self.copies: dict[Block, dict[int, float]] = {}  # block -> {copy token: its stamp}
        self._tokens = itertools.count(1)

    def on_resume(self, s: State, now: float) -> None:
        self._taken[s.uid] = now

    def on_state_released(self, s: State, now: float, used: bool = True) -> None:
        taken = self._taken.pop(s.uid, None)
        if taken is not None:
            s.last_use = min(s.last_use, taken)
        super().on_state_released(s, now, used)

    def add_copy(self, b: Block, now: float) -> int:
        """A second cached copy of `b`, released (last used) at `now`: a duplicate its
        request recomputed. Returns the copy's token (for `drop_copy`)."""
        t = next(self._tokens)
        self.copies.setdefault(b, {})[t] = now
        self.cache.resident_blocks += 1
        # a negative version marks a copy's entry (never equal to a block's own version)
        self._file(self._block_pool, (now, -b.end, next(self._seq), -t, b))
        return t

    def drop_copy(self, b: Block, t: int) -> None:
        """Free copy `t` of `b` if it is still cached (its queue entry is skipped later)."""
        extra = self.copies.get(b)
        if extra and extra.pop(t, None) is not None:
            self.cache.resident_blocks -= 1
            if not extra:
                del self.copies[b]

    def evict_one(self, pool: Pool, now: float) -> bool:
        heap = self.heaps[pool]
        while heap:
            _, _, _, ver, obj = heapq.heappop(heap)
            if isinstance(obj, Block) and (ver < 0 or obj in self.copies):
                if self._evict_copy(obj, ver):
                    return True
            elif self._evict_entry(ver, obj):
                return True
        return False

    def _evict_copy(self, b: Block, ver: int) -> bool:
        """Pop one cached copy of `b`: a copy's own entry, or the block's entry while a copy
        is left (the copy left keeps its own release stamp)."""
        extra = self.copies.get(b)
        if not extra:
            self.copies.pop(b, None)
            return ver >= 0 and self._evict_entry(ver, b)
        if ver < 0:
            if -ver not in extra:
                return False
            del extra[-ver]
        else:
            if b.ver != ver or not b.resident or b.live:
                return False
            t, stamp = min(extra.items(), key=lambda kv: kv[1])
            del extra[t]  # the block's own entry now stands for the copy left
            b.last_use = stamp
            self._push_block(b)
        if not extra:
            del self.copies[b]
        self.cache.resident_blocks -= 1
        self.victim = b
        return True


class VllmCache(HybridCache):
    """Rule 5 at a request's end: the blocks it recomputed while a cached copy of them was
    resident stay as second cached copies (vLLM caches a full block under its hash even when
    that hash is cached already: `BlockPool.cache_full_blocks`, `BlockHashToBlockMap`)."""

    def __init__(self, profile: ModelProfile, policy: Policy, capacity_blocks: int | None = None):
        super().__init__(profile, policy, capacity_blocks)
        self._dups: dict[int, list[Block]] = {}
        # Per running request: the cached copies its prompt found resident beside the blocks
        # it recomputed (block, copy token), evictable while it runs (`prefill_done`).
        self._old: dict[int, list[tuple[Block, int]]] = {}

    def begin(self, prefix: Prefix, prompt_len: int, info: ResumeInfo, now: float) -> Handle:
        h = super().begin(prefix, prompt_len, info, now)
        B = self.B
        lo, hi = info.resume_pos // B, min(info.kv_pos, prompt_len) // B
        dups = [b for b in info.path[lo:hi] if b.resident]
        if dups:
            self._dups[id(h)] = dups
        return h

    def prefill_done(self, h: Handle, now: float) -> None:
        """Rule 5 while the request runs. The request computed its own blocks from its state
        hit on (`allocate_slots` allocates from `num_computed_tokens`); a prompt block whose
        cached copy is resident becomes the request's block, and the old copy stays in the
        free queue where it was, unreferenced and evictable (`get_computed_blocks` never
        touched it; `BlockPool.cache_full_blocks` files the new block under the same hash
        beside it). So the request holds one block per position, not two, and evicting
        the old copy frees a block without breaking the request's path."""
        if h.prefilled or not h.reserved:
            super().prefill_done(h, now)
            return
        B, n_full, lo = self.B, h.prompt_len // self.B, h.resume_pos // self.B
        before: dict[int, float] = {}
        for j in range(lo, n_full):
            b = h.known[j] if j < len(h.known) else self.nodes.get(h.prefix.key_at((j + 1) * B))
            if b is not None and b.resident:
                before[id(b)] = b.last_use
        super().prefill_done(h, now)
        if not before:
            return
        ev = self.eviction
        assert isinstance(ev, VllmLRU)
        old: list[tuple[Block, int]] = []
        for b in h.pinned[lo:n_full]:
            if h.reserved_blocks <= 0:
                break
            stamp = before.get(id(b))
            if stamp is None or not b.resident:
                continue
            h.reserved_blocks -= 1  # the request's own block is now the node's
            self.private_blocks -= 1
            old.append((b, ev.add_copy(b, stamp)))  # the old copy, where it was
        if old:
            self._old[id(h)] = old

    def _drop_old(self, h: Handle) -> list[Block]:
        """The request ends: the old copies still cached are dropped (option `cached_copies`
        off: one copy of each block, as below) or kept; returns the blocks whose old copy
        was kept."""
        ev = self.eviction
        assert isinstance(ev, VllmLRU)
        kept: list[Block] = []
        for b, t in self._old.pop(id(h), ()):
            if self.policy.opts["cached_copies"]:
                kept.append(b)
            else:
                ev.drop_copy(b, t)
        return kept

    def abort(self, h: Handle, now: float) -> None:
        self._dups.pop(id(h), None)
        self._drop_old(h)
        super().abort(h, now)

    def finish(self, h: Handle, full: Prefix, total_len: int, now: float) -> None:
        kept = {id(b) for b in self._drop_old(h)}
        dups = [b for b in self._dups.pop(id(h), ()) if b.resident and id(b) not in kept]
        if not self.policy.opts["cached_copies"]:
            dups = []
        super().finish(h, full, total_len, now)
        ev = self.eviction
        assert isinstance(ev, VllmLRU)
        for b in reversed(dups):  # freed tail first, as the request's other blocks
            if b.resident:
                ev.add_copy(b, now)
        if dups and not self.make_room(0, 0, now):
            raise CacheError("vllm: a request's cached copies exceed its reservation")


class VllmPolicy(Policy):
    name = "vllm"
    description = "vLLM 0.32: replay-boundary and junction states (retention 0), block LRU"
    # Rule 4: a prefill state keeps the stamp it got when it was written, because vLLM frees
    # its block right after the prefill (`remove_skipped_blocks`) and the free queue is LRU
    # by free time; it is not restamped with the request's KV at the end. A state a request
    # resumed from is freed after its first chunk (`last_state_block_idx`, "when a new
    # request hits the prefix cache"), not held for the request's life.
    rule_defaults: ClassVar[dict[str, Any]] = {
        "prefill_state_stamp": "write",
        "pin_resumed_state": False,
    }
    # Rule 5's one simplification, a switch: `cached_copies` off drops the old copy of a
    # recomputed block when its request ends, where vLLM keeps both under one hash.
    # Measured against vLLM's own Scheduler and manager (docs/native-policies.md, "Under
    # the demo's pressure"; docs/engine-model.md, "vLLM's own scheduler as the oracle"), off
    # is the closer one.
    options: ClassVar[dict[str, Any]] = {"cached_copies": False}
    eviction_class = VllmLRU

    def make_placement(self, profile: ModelProfile) -> Placement:
        return ReplayBoundary()

    def make_cache(self, profile: ModelProfile, capacity_blocks: int | None = None) -> HybridCache:
        return VllmCache(profile, self, capacity_blocks)

    def prefill_positions(self, info: ResumeInfo, n: int, block: int) -> list[int]:
        assert isinstance(self.placement, ReplayBoundary)
        return self.placement.positions_for(info, n, block)

    def adjust(self, info: ResumeInfo) -> None:
        """Rule 2: the deepest usable state at or below n − 1; rule 5: only the blocks up to
        the state hit are reused, the rest are recomputed into blocks of the request's own."""
        info.cap_before_last_token(self.profile.block_tokens)
