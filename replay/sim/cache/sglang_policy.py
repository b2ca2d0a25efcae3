"""`sglang`: SGLang 0.5.22's hybrid radix cache (attention + Mamba, extra-buffer strategy), as
its code does it.

Checked request by request against SGLang's own `UnifiedRadixCache` (`sglang-native`,
tests/unit/replay/sim/test_sim_native_sglang.py; `scripts/native_agreement.py` prints the
table, `experiments/sglang_native_pressure.py` the same under the demo's pressure). The rules,
with the SGLang 0.5.22 source they come from (paths under `sglang/srt/`; the worker
`replay/sim/native/sglang_worker.py` drives that code):

1. Where states are taken. Prefill runs in chunks of `chunk` tokens (--chunked-prefill-size)
   from the resume point; each chunk of at least G tokens (G = `_mamba_cache_chunk_size`)
   tracks one state, at its start + ⌊extend/G⌋·G, or at the branching point ⌊kv hit/G⌋·G
   when that lies inside the chunk (managers/schedule_batch.py L3040-3108; the branching
   point from `MambaComponent.finalize_match_result_in_tree_core`). Decode tracks a state
   each time the computed length reaches a multiple of lcm(G, --mamba-track-interval), and
   the finished request keeps the last one (batch_result_processor.py L1607-1626,
   components/mamba.py `_select_finished_checkpoint`).
2. What KV is kept. Each insert covers the sequence up to its state and no further
   (`checkpoint_into_tree`: `effective_cache_len` is the Mamba component's track length), so
   the tree's KV always ends at a state: the KV a request computed past its last state is
   freed when it ends. Here: KV is owned by the states that need it (`unit_owned`).
3. n − 1. A hit is capped at n − 1 tokens (`Req._compute_max_prefix_len`).
4. What eviction takes. KV pressure evicts the least recently used unlocked leaf whole: its
   KV back to the nearest branch or state and its state with it (unified_tree_core's device
   leaves; a FULL leaf eviction cascades to the MAMBA component). State pressure takes the
   least recently used unlocked state: an inner one alone (its KV stays, the nodes below
   need it), a leaf whole (components/mamba.py `_evict_device_next_node`).
5. Recency. One counter orders every use (`get_and_increase_time_counter`): a state is used
   when inserted and when a request resumes from it (the Mamba LRU touches only the matched
   state: components/mamba.py `refresh_lru`).
6. Pools and rows. From memory (replay.sim.native.sglang_cache.pool_sizes: kv_cache_configurator.py
   L2978-3083), the profile's blocks_per_engine or a block override alike
   (`replay.sim.cache.capacity.resolve_capacity`): GLM-5.3-Flash's 2,531 blocks give 238 state
   slots and 1,336 blocks of KV. A running request holds three state slots (its own and the
   two ping-pong track slots: HybridReqToTokenPool.alloc with the extra buffer), and its
   latest prefill state stays
   locked until it ends (the tree lock moves onto the inserted node); the state it resumed
   from is locked only until its first insert. At most slots // 5 requests run at once
   (kv_cache_configurator.py L2812-2831 caps max_running_requests so); the next one waits.
7. Order of allocation: the request's state slots first (the copy-on-write slot at
   `match_prefix`, the ping-pong slots in `alloc_req_slots`), then its KV: n + out − 1
   tokens, the last one sampled is never computed (`alloc_for_decode_default`).
8. Recomputed KV the tree holds. A request that recomputes positions whose KV is resident
   (its hit capped at n − 1, or the state there gone) holds the tree's copy once its prompt
   is in, and gives back the block reserved for it: SGLang's insert keeps the tree's KV and
   frees the duplicates (`UnifiedRadixCache.cache_unfinished_req`). Before issue 22's
   pressure check the model held both until the request ended.

What stays apart from SGLang's code: KV is counted in blocks (SGLang's pages are tokens), so
a state inside a block keeps the whole block; and a KV-only node left after its states went
(SGLang keeps it until evicted; it still lengthens the branching point) is freed at once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from replay.profiles import ModelProfile
from replay.sim.cache.eviction import Eviction, Pool
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import Prefix
from replay.sim.cache.nodes import State
from replay.sim.cache.policy_base import Placement, Policy, PolicyError
from replay.sim.cache.requests import CacheError, Handle

if TYPE_CHECKING:
    from replay.sim.cache.requests import ResumeInfo

RUNNING_STATES = 3  # a running request's slot + 2 ping-pong track slots (overlap scheduling)


class SglangTrack(Placement):
    """Rule 1: one state per prefill chunk of at least G tokens, the branching point inside
    its chunk, and the last decode track point."""

    captures_end = True

    def __init__(self, chunk: int, grid: int, track: int):
        self.chunk, self.grid, self.track = chunk, grid, math.lcm(grid, track)

    @property
    def holds_last_state(self) -> bool:
        return True  # rule 6: the latest prefill state is locked until the request ends

    def prefill_positions(self, r: int, n: int, block: int) -> list[int]:
        return self.positions(r, n, None)

    def positions(self, r: int, n: int, branch: int | None) -> list[int]:
        G, out, start = self.grid, [], r
        while start < n:
            end = min(start + self.chunk, n)
            ext = end - start
            if ext >= G:
                p = start + ext // G * G
                if branch is not None and start < branch < end and (branch - start) % G == 0:
                    p = branch
                out.append(p)
            start = end
        return out

    def end_positions(self, n: int, e: int, block: int) -> list[int]:
        p = (e - 1) // self.track * self.track  # the last decode step computes e − 1
        return [p] if p > n else []


class SglangLRU(Eviction):
    """Rules 4 and 5: one use counter; KV pressure takes the oldest leaf unit, state pressure
    the oldest state (a leaf with its exclusive KV, an inner one alone)."""

    unit_owned = True

    def __init__(self, cache: HybridCache):
        super().__init__(cache)
        # The states by last use on one counter, oldest first: a use moves a state to the
        # end, so the scan for a victim walks them in that order without a heap's pops and
        # pushes of the states it passes over.
        self.order: dict[int, State] = {}

    def _touch(self, s: State) -> None:
        uid = s.uid
        order = self.order
        if uid in order:
            del order[uid]
        order[uid] = s

    def on_states_added(self, states: list[State], now: float) -> None:
        for s in states:
            self._touch(s)

    def on_resume(self, s: State, now: float) -> None:
        self._touch(s)

    def refresh(self, states: list[State], now: float) -> None:
        pass  # moved to another block: same use

    def _leaf(self, s: State) -> bool:
        b = s.block
        return b.deps == sum(1 for o in b.rstates if o.pos <= s.pos) and not b.live

    def evict_one(self, pool: Pool, now: float) -> bool:
        """One victim; under KV pressure, leaves until a block is freed (a leaf inside a
        block another state needs frees SGLang tokens but no whole block here)."""
        blocks = self.cache.resident_blocks
        dropped = False
        while self._evict(pool):
            dropped = True
            if pool != "kv" or self.cache.resident_blocks < blocks:
                return True
        return dropped and pool != "kv"

    def _evict(self, pool: Pool) -> bool:
        """The least recently used state that may go (not live; under KV pressure a leaf)
        is dropped. States no longer resident are forgotten as the scan passes them."""
        order = self.order
        gone: list[int] = []
        victim: State | None = None
        leaf = False
        for uid, s in order.items():
            if not s.resident:
                gone.append(uid)
                continue
            if s.live:
                continue
            leaf = self._leaf(s)
            if pool == "kv" and not leaf:
                continue  # only leaves free KV
            victim = s
            break
        for uid in gone:
            del order[uid]
        if victim is None:
            return False
        del order[victim.uid]
        if leaf:
            self.cache.drop_unit(victim)
        else:
            self.cache.drop_state(victim)
        self.victim = victim  # (read by the cache's progress check, where it has one)
        return True


class SglangCache(HybridCache):
    """Rules 6 and 7 on the reservation: three state slots per running request, taken
    before its KV; the resumed-from state unlocked once the prompt's first state is in."""

    def __init__(self, profile: ModelProfile, policy: Policy, capacity_blocks: int | None = None):
        super().__init__(profile, policy, capacity_blocks)
        from replay.sim.native.sglang_cache import max_running

        assert self.state_slots is not None
        try:
            self.max_running = max_running(self.state_slots)
        except RuntimeError as e:
            raise PolicyError(f"policy 'sglang': {e}") from e
        self.running = 0

    def reserve(self, h: Handle, total_len: int, now: float) -> bool:
        if h.reserved:
            raise CacheError("reserve() called twice for one request")
        if self.running >= self.max_running:  # rule 6: every request row in use
            return False
        # KV for the tokens it computes: the last one sampled is never computed.
        need_blocks = max(-(-(total_len - 1) // self.B) - len(h.pinned), 0)
        if not self.make_room(0, RUNNING_STATES, now) or not self.make_room(need_blocks, 0, now):
            return False
        h.reserved_blocks, h.reserved_states, h.total_len = need_blocks, RUNNING_STATES, total_len
        self.private_blocks += need_blocks
        self.private_states += RUNNING_STATES
        h.reserved = True
        self.running += 1
        return True

    def abort(self, h: Handle, now: float) -> None:
        if h.reserved and h.total_len >= 0:
            self.running -= 1
            h.total_len = -1  # counted out
        super().abort(h, now)

    def finish(self, h: Handle, full: Prefix, total_len: int, now: float) -> None:
        if h.reserved and h.total_len >= 0:
            self.running -= 1
        super().finish(h, full, total_len, now)

    def prefill_done(self, h: Handle, now: float) -> None:
        """Rule 8: a prompt block the request recomputed while the tree still held its KV
        (the hit capped at n − 1, or its state gone) becomes the tree's copy, and the block
        reserved for it is given back: SGLang's insert keeps the tree's KV, frees the
        duplicates and points the request at the tree's indices
        (`UnifiedRadixCache.cache_unfinished_req`: `insert`, then
        `req_to_token_pool.write(..., new_indices)`)."""
        dup = 0
        if not h.prefilled and h.reserved:
            B, known, nodes = self.B, h.known, self.nodes
            for j in range(h.resume_pos // B, h.prompt_len // B):
                b = known[j] if j < len(known) else nodes.get(h.prefix.key_at((j + 1) * B))
                dup += b is not None and b.resident
        super().prefill_done(h, now)
        if dup:
            freed = min(dup, h.reserved_blocks)
            h.reserved_blocks -= freed
            self.private_blocks -= freed
        st = h.state
        if st is not None and h.early_states:  # the lock moved to the inserted node
            st.live -= 1
            h.state = None
            if st.live == 0:
                self.eviction.on_state_released(st, now, used=False)


class SglangPolicy(Policy):
    name = "sglang"
    description = "SGLang 0.5.22: grid states per chunk, radix leaves evicted whole, two pools"
    # grid: the source's 256-token grid (`_mamba_cache_chunk_size` for GLM-5.3-Flash);
    # track_interval: --mamba-track-interval (None: the grid, 256 as SGLang's default);
    # chunk: --chunked-prefill-size on a 180 GiB B200 (arg_groups/memory_hook.py);
    # state_slots / kv_tokens: the pools (by default from the profile's memory, rule 6; the
    # numbers here are GLM-5.3-Flash's, which scaled runs scale); mamba_full_memory_ratio /
    # max_mamba_cache_size: how SGLang splits the memory.
    options: ClassVar[dict[str, Any]] = {
        "grid": 256,
        "track_interval": None,
        "chunk": 16384,
        "state_slots": 238,
        "kv_tokens": 1336 * 4352,
        "mamba_full_memory_ratio": 0.9,
        "max_mamba_cache_size": None,
    }
    rule_defaults: ClassVar[dict[str, Any]] = {"prefill_state_stamp": "write"}
    keep_terminal_block = True  # a state inside a block keeps the block
    eviction_class = SglangLRU

    def __init__(self, profile: ModelProfile, **opts: Any):
        given = {k for k in ("state_slots", "kv_tokens") if k in opts}
        super().__init__(profile, **opts)
        if given != {"state_slots", "kv_tokens"}:  # rule 6: the rest from the memory
            # (the profile's; a block override is resolved to both pools before the policy
            # is built: replay.sim.cache.capacity.resolve_capacity, by this same pool_sizes)
            from replay.sim.native.sglang_cache import pool_sizes

            try:
                kv, slots = pool_sizes(
                    profile.blocks_per_engine,
                    profile.block_tokens,
                    profile.checkpoint_blocks,
                    self.opts["mamba_full_memory_ratio"],
                    self.opts["max_mamba_cache_size"],
                )
            except RuntimeError as e:
                raise PolicyError(f"policy 'sglang': {e}") from e
            if "state_slots" not in given:
                self.opts["state_slots"] = slots
            if "kv_tokens" not in given:
                self.opts["kv_tokens"] = kv
        for k in ("grid", "chunk", "state_slots", "kv_tokens"):
            if int(self.opts[k]) <= 0:
                raise PolicyError(
                    f"policy 'sglang': option {k} must be positive, not {self.opts[k]}"
                )

    def make_placement(self, profile: ModelProfile) -> Placement:
        grid = int(self.opts["grid"])
        track = self.opts["track_interval"]
        return SglangTrack(int(self.opts["chunk"]), grid, int(track) if track else grid)

    def state_slots(self, profile: ModelProfile) -> int | None:
        return int(self.opts["state_slots"])

    def capacity_blocks(self, profile: ModelProfile) -> int | None:
        kv_blocks = -(-int(self.opts["kv_tokens"]) // profile.block_tokens)
        return kv_blocks + profile.checkpoint_blocks * int(self.opts["state_slots"])

    def make_cache(self, profile: ModelProfile, capacity_blocks: int | None = None) -> HybridCache:
        return SglangCache(profile, self, capacity_blocks)

    def prefill_positions(self, info: ResumeInfo, n: int, block: int) -> list[int]:
        assert isinstance(self.placement, SglangTrack)
        G = self.placement.grid
        kv = min(info.kv_pos, n - 1) // G * G
        return self.placement.positions(info.resume_pos, n, kv if kv > info.resume_pos else None)

    def adjust(self, info: ResumeInfo) -> None:
        """Rule 3: the deepest usable state at or below n − 1; the KV past it is recomputed
        into the request's own slots (SGLang frees the duplicates at its insert)."""
        info.cap_before_last_token(self.profile.block_tokens)
