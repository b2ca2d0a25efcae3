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
   KV. So here: no state is held until the request ends, and a state the request resumed
   from counts as released when it was taken.
5. Duplicate blocks. After a state miss the KV between the state hit and the KV hit is
   recomputed into new blocks (`allocate_slots` allocates from `num_computed_tokens`, the
   state-limited hit): the request holds them beside the cached copies while it runs.

   The state a request resumed from is therefore not held while the request runs: its
   block goes to the free queue, stamped, when the request takes it (rule
   `pin_resumed_state` off).

Where this model still simplifies (bound in the cross-check tests and
docs/native-policies.md): a recomputed duplicate block is dropped when the request ends, where
vLLM keeps it as a second cached copy of the same hash until it is evicted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from replay.profiles import ModelProfile
from replay.sim.eviction import AllocationLRU, Eviction
from replay.sim.nodes import State
from replay.sim.policy_base import Placement, Policy

if TYPE_CHECKING:
    from replay.sim.cache import HybridCache, ResumeInfo


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
    released when the request took it (rule 4)."""

    def __init__(self, cache: HybridCache):
        super().__init__(cache)
        self._taken: dict[int, float] = {}

    def on_resume(self, s: State, now: float) -> None:
        self._taken[s.uid] = now

    def on_state_released(self, s: State, now: float, used: bool = True) -> None:
        taken = self._taken.pop(s.uid, None)
        if taken is not None:
            s.last_use = min(s.last_use, taken)
        super().on_state_released(s, now, used)


class VllmPolicy(Policy):
    name = "vllm"
    description = "vLLM 0.32: replay-boundary and junction states (retention 0), block LRU"
    # Rule 4: the state a request resumed from is not held while it runs (vLLM frees its
    # block into the free queue once the running state moves past it, at the first step).
    rule_defaults: ClassVar[dict[str, Any]] = {"pin_resumed_state": False}

    def make_placement(self, profile: ModelProfile) -> Placement:
        return ReplayBoundary()

    def make_eviction(self, cache: HybridCache) -> Eviction:
        return VllmLRU(cache)

    def prefill_positions(self, info: ResumeInfo, n: int, block: int) -> list[int]:
        assert isinstance(self.placement, ReplayBoundary)
        return self.placement.positions_for(info, n, block)

    def adjust(self, info: ResumeInfo) -> None:
        n, B = info.prompt_len, self.profile.block_tokens
        cap = max(n - 1, 0)
        if info.resume_pos > cap:  # rule 2: the deepest usable state at or below n − 1
            info.resume_pos, info.state = 0, None
            for b in reversed(info.chain):
                if b.end > info.kv_pos:
                    continue
                best = max(
                    (s for s in b.rstates if s.pos <= cap), key=lambda s: s.pos, default=None
                )
                if best is not None:
                    info.resume_pos, info.state = best.pos, best
                    break
        info.resident_pos = max(info.resume_pos, min(info.resident_pos, cap))
        info.checkpoint_pos = max(info.resident_pos, min(info.checkpoint_pos, cap))
        # rule 5: only the blocks up to the state hit are reused; the rest are recomputed
        # into blocks of the request's own.
        info.chain = info.chain[: info.resume_pos // B]
