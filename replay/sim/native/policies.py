"""The native policies: names in the policy registry whose cache is the engine's own code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from replay.profiles import ModelProfile
from replay.sim.cache.eviction import NoEviction
from replay.sim.cache.policy_base import NoPlacement, Placement, Policy

if TYPE_CHECKING:
    from replay.sim.cache.hybrid import HybridCache
    from replay.sim.native.online import NativeCache


class NativePolicy(Policy):
    """A policy whose cache is the engine's own code in a worker process: the engine's
    scheduler and cache decide what is kept and what is evicted, so the simulator's placement
    and eviction are empty. A subclass names its cache (`native_cache`, imported only when a
    cache is made, so the registry imports nothing heavy)."""

    eviction_class = NoEviction

    def make_placement(self, profile: ModelProfile) -> Placement:
        return NoPlacement()

    def native_cache(self) -> type[NativeCache]:
        raise NotImplementedError

    def make_cache(
        self, profile: ModelProfile, capacity_blocks: int | None = None, worker: Any = None
    ) -> HybridCache:
        """The native cache; `worker`: a running `replay.sim.native.worker.Worker` to reuse
        (it is re-initialised; the caller closes it)."""
        return self.native_cache()(profile, self, capacity_blocks, worker=worker)


class VllmNativePolicy(NativePolicy):
    """vLLM's own KV cache manager (0.32, or the FlashState fork with its flags).

    Options: `python` (the interpreter with vLLM; default: see `replay.sim.native.worker`),
    `retention` (prefix_cache_retention_interval; 0 as a server resolves it, None keeps every
    state), `prefix_match_unit` (hash block size; default the block), `long_prefill_threshold`
    (default the profile's chunk_tokens; 0: none) and `token_budget` (default 16,384: the
    paper's serve command), `shared_prefix_checkpoint`
    (--enable-mamba-shared-prefix-checkpoint) and the FlashState fork's flags
    (`frontier_checkpoint`, `prefill_export`, `eviction`, `leaf_last`, `leaf_idle_s`);
    `decode_steps`: "token" (one manager step per output token, as the scheduler) or "block"
    (the steps between block boundaries merged; the same manager states, checked by a test)."""

    name = "vllm-native"
    description = "vLLM's own KVCacheManager (worker process in the vLLM environment)"
    options: ClassVar[dict[str, Any]] = {
        "python": None,
        "retention": 0,
        "prefix_match_unit": None,
        "long_prefill_threshold": None,
        "token_budget": None,
        "shared_prefix_checkpoint": False,
        "frontier_checkpoint": False,
        "prefill_export": False,
        "eviction": "lru",
        "leaf_last": False,
        "leaf_idle_s": None,
        "decode_steps": "block",
    }

    def native_cache(self) -> type[NativeCache]:
        from replay.sim.native.vllm_cache import NativeVllmCache

        return NativeVllmCache


class SglangNativePolicy(NativePolicy):
    """SGLang 0.5.22's own hybrid radix cache (`replay.sim.native.sglang_cache`).

    Options: `python` (the interpreter with SGLang; default: see `replay.sim.native.worker`),
    `grid` (`_mamba_cache_chunk_size`, 256: the source's grid for GLM-5.3-Flash),
    `track_interval` (--mamba-track-interval, 256), `chunk` (--chunked-prefill-size; default
    16,384, SGLang's on a GPU of 160 GiB or more), `mamba_full_memory_ratio` (0.9) or
    `max_mamba_cache_size` (state slots; the KV gets the rest), `max_running`
    (--max-running-requests; SGLang caps it at state slots // 5), `tree_core` ("rust", SGLang's default where its extension loads, or "python"),
    `decode_steps` ("merged": one allocation per stretch between track boundaries, or
    "token": one per token; the same cache states, checked by a test)."""

    name = "sglang-native"
    description = "SGLang's own radix cache (worker process in the vLLM environment)"
    options: ClassVar[dict[str, Any]] = {
        "python": None,
        "grid": 256,
        "track_interval": 256,
        "chunk": 16384,
        "mamba_full_memory_ratio": None,
        "max_mamba_cache_size": None,
        "max_running": None,
        "tree_core": None,
        "decode_steps": "merged",
    }

    def native_cache(self) -> type[NativeCache]:
        from replay.sim.native.sglang_cache import NativeSglangCache

        return NativeSglangCache
