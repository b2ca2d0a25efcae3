"""The named cache policies and their registry: `make_policy(name, profile, **opts)`.

| name | placement | eviction / admission |
| --- | --- | --- |
| vllm | vLLM 0.32's code (`replay.sim.cache.vllm_policy`): replay boundary ⌊(n−1)/B⌋·B + junctions | LRU by release, states before their KV |
| vllm-like | the source simulation's "vLLM-like": chunk ends on block boundaries | LRU per allocation |
| sglang | SGLang 0.5.22's code (`replay.sim.cache.sglang_policy`): a grid state per chunk + branch + decode track | radix leaves whole, states by one LRU; two pools from memory |
| dense | every `every` tokens of prefill | LRU per allocation |
| asc-lru | ASC (vLLM's + exact prompt end + exact request end) | LRU per allocation |
| asc-unit-lru | ASC | recovery units, LRU |
| flashstate-eq7 | ASC | GreedyDual-Size over units + admission (the paper's Eq. 7) |
| flashstate | ASC | GDS inside leaf-last tiers, 60 s idle demotion (the release code) |
| marconi | ASC | units by recency + α · prefill saved per block |
| tail-replay | none (KV only) | LRU per allocation; a hit replays the last `replay_frac` of it |
| ideal | ASC | unbounded memory |
| vllm-native | vLLM's own KVCacheManager (`replay.sim.native`) | vLLM's block pool |
| sglang-native | SGLang's own UnifiedRadixCache (`replay.sim.native`) | SGLang's radix tree |
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from replay.profiles import ModelProfile
from replay.sim.cache.eviction import (
    AllocationLRU,
    Eviction,
    GreedyDualSize,
    Marconi,
    NoEviction,
    UnitLRU,
)
from replay.sim.cache.policy_base import (
    ArbitraryState,
    ChunkBoundaries,
    EveryN,
    NoPlacement,
    Placement,
    Policy,
    PolicyError,
)

if TYPE_CHECKING:
    from replay.sim.cache.hybrid import ResumeInfo
    from replay.sim.cache.store import CacheStore

# The rule switches (`replay.sim.cache.policy_base.RULES`) as the source's words read for the
# policies of its simulation (seed 000, "My simulation"; issue 22, docs/policy-table.md):
# the only things it says a running request holds are its KV blocks ("a request holds its
# blocks for its recorded duration") and the state it resumed from ("eviction takes the
# lowest among states no live request holds"), and a state's last use is "when it was
# cached, when a request resumed from it, or when the last live request holding it ended".
# So a checkpoint written during prefill is stamped when it is cached (not again when the
# request that wrote it ends: it never held it), and vLLM-like's and dense's latest
# chunk-end state is not held by its running request ("every block and checkpoint evicted
# on its own"). The engine readings (vLLM's running request owns the state pages it wrote)
# stay options: prefill_state_stamp="end", hold_chunk_state=True. `vllm` and `sglang`
# follow their engines' code and keep the base defaults.
SOURCE_READING: dict[str, Any] = {"prefill_state_stamp": "release"}
SOURCE_READING_UNHELD: dict[str, Any] = {**SOURCE_READING, "hold_chunk_state": False}


class VllmLikePolicy(Policy):
    """The source simulation's "vLLM-like" baseline (seed 000, "My simulation"): block-boundary
    checkpoints at chunk ends (every two blocks at --long-prefill-token-threshold 8704, plus the
    prompt's last boundary), every block and checkpoint evicted on its own by LRU. Kept as a
    named ablation so the source's table can be rebuilt while `vllm` follows vLLM's own code."""

    name = "vllm-like"
    description = "the source's vLLM-like model: chunk-end block-boundary checkpoints, LRU"
    rule_defaults: ClassVar[dict[str, Any]] = SOURCE_READING_UNHELD
    eviction_class = AllocationLRU


class DensePolicy(Policy):
    name = "dense"
    description = "a checkpoint every N tokens of prefill, per-allocation LRU"
    options: ClassVar[dict[str, Any]] = {"every": 1088}
    rule_defaults: ClassVar[dict[str, Any]] = SOURCE_READING_UNHELD
    keep_terminal_block = True
    eviction_class = AllocationLRU

    def make_placement(self, profile: ModelProfile) -> Placement:
        every = int(self.opts["every"])
        if every <= 0:  # EveryN would divide by zero
            raise PolicyError(
                f"policy 'dense': option every must be a positive token count, not {every}"
            )
        return EveryN(every)


class _AscPolicy(Policy):
    keep_terminal_block = True
    rule_defaults: ClassVar[dict[str, Any]] = SOURCE_READING

    def make_placement(self, profile: ModelProfile) -> Placement:
        return ArbitraryState(profile.chunk_tokens)


class AscLruPolicy(_AscPolicy):
    name = "asc-lru"
    description = "ASC placement, per-allocation LRU (the paper's first ablation stage)"
    eviction_class = AllocationLRU


class AscUnitLruPolicy(_AscPolicy):
    name = "asc-unit-lru"
    description = "ASC placement, whole recovery units by LRU"
    eviction_class = UnitLRU


class FlashStateEq7Policy(_AscPolicy):
    name = "flashstate-eq7"
    description = "ASC + GreedyDual-Size over recovery units with admission (paper Eq. 7)"
    eviction_class = GreedyDualSize


class FlashStatePolicy(_AscPolicy):
    name = "flashstate"
    description = "ASC + GDS inside leaf-last tiers with idle demotion (release code)"
    options: ClassVar[dict[str, Any]] = {"leaf_idle_s": 60.0}

    def make_eviction(self, cache: CacheStore) -> Eviction:
        return GreedyDualSize(cache, tiers=True, idle_s=float(self.opts["leaf_idle_s"]))


class MarconiPolicy(_AscPolicy):
    name = "marconi"
    description = "ASC + units by recency + α·prefill saved per block (Marconi)"
    options: ClassVar[dict[str, Any]] = {"alpha": 1.0}

    def make_eviction(self, cache: CacheStore) -> Eviction:
        return Marconi(cache, alpha=float(self.opts["alpha"]))


class TailReplayPolicy(Policy):
    name = "tail-replay"
    description = "KV only, no checkpoints; a hit replays the last r of the prefix"
    options: ClassVar[dict[str, Any]] = {"replay_frac": 0.1}
    keep_terminal_block = True
    eviction_class = AllocationLRU

    def make_placement(self, profile: ModelProfile) -> Placement:
        return NoPlacement()

    def adjust(self, info: ResumeInfo) -> None:
        # Any resident KV prefix is resumable after replaying its tail: what is missing
        # beyond the KV is capacity, the replayed tail is the price of having no state.
        kv = min(info.kv_pos, info.ideal_pos)
        info.checkpoint_pos = info.ideal_pos
        info.resident_pos = kv
        info.resume_pos = kv - int(-(-kv * float(self.opts["replay_frac"]) // 1))
        info.state = None


class IdealPolicy(_AscPolicy):
    name = "ideal"
    description = "ASC placement with unbounded memory"
    eviction_class = NoEviction

    def capacity_blocks(self, profile: ModelProfile) -> int | None:
        return None


POLICY_NAMES: tuple[str, ...] = (
    "vllm",
    "vllm-like",
    "sglang",
    "dense",
    "asc-lru",
    "asc-unit-lru",
    "flashstate-eq7",
    "flashstate",
    "marconi",
    "tail-replay",
    "ideal",
    "vllm-native",
    "sglang-native",
)


# Registered here so every name above resolves (the native module imports nothing heavy).
from replay.sim.cache.sglang_policy import SglangPolicy  # noqa: E402, F401
from replay.sim.cache.vllm_policy import VllmPolicy  # noqa: E402, F401
from replay.sim.native.policies import SglangNativePolicy, VllmNativePolicy  # noqa: E402, F401


def make_policy(name: str, profile: ModelProfile, **opts: Any) -> Policy:
    """The policy called `name` for `profile`; options per policy (see each class)."""
    cls = Policy.registry.get(name)
    if cls is None:
        raise PolicyError(f"unknown policy '{name}' (known: {', '.join(POLICY_NAMES)})")
    return cls(profile, **opts)


__all__ = ["POLICY_NAMES", "ChunkBoundaries", "Policy", "PolicyError", "make_policy"]
