"""`sglang-native`: the simulator's cache API over SGLang 0.5.22's own hybrid radix cache.

SGLang's `UnifiedRadixCache` (FULL + MAMBA tree components over `HybridLinearKVPool`, page
size 1, on the CPU) in a worker process (`replay/sim/native/sglang_worker.py`, which cites
the lines it follows), driven per request as SGLang's scheduler drives it: `match_prefix`
at scheduling, a state tracked on the `_mamba_cache_chunk_size` grid in each prefill chunk,
`checkpoint_kv_cache` at each chunk's end, decode states every lcm(grid, 256) tokens,
`release_kv_cache(checkpoint=True)` at the end, evictions with the KV and state shortfall
the allocators report.

The pools, from the engine's memory as SGLang sizes them (`mem_cache/kv_cache_configurator.py`
L2978-3083): the profile's cache is `capacity` blocks of `block_tokens` tokens and a state
takes `checkpoint_blocks` blocks. With `max_mamba_cache_size` unset, the states get
r/(1+r) of it (r = `mamba_full_memory_ratio`, SGLang's fallback 0.9: arg_groups/fields/
schedule.py L214-219) and `max_mamba_cache_size = ⌊(budget − state)/state⌋` slots; the KV pool
is what is left after `max_mamba_cache_size + 1` states (the pool's padding slot). GLM-5.3-Flash:
2,531 blocks → 238 state slots and 1,336 blocks (5,814,272 tokens) of KV.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replay.profiles import ModelProfile
from replay.sim.native.online import NativeCache
from replay.sim.native.worker import NativeError

if TYPE_CHECKING:
    from replay.sim.cache.policy_base import Policy

# SGLang 0.5.22's defaults for what the cache reads (paths under sglang/srt/).
RATIO_FALLBACK = 0.9  # mamba_full_memory_ratio: arg_groups/fields/schedule.py L214-219
TRACK_INTERVAL = 256  # --mamba-track-interval: arg_groups/fields/exec_.py L468-471
# --chunked-prefill-size on a GPU of 160 GiB or more (B200: 180 GiB): arg_groups/memory_hook.py
CHUNKED_PREFILL = 16384


def pool_sizes(
    capacity_blocks: int,
    block_tokens: int,
    state_blocks: int,
    ratio: float | None = None,
    max_states: int | None = None,
) -> tuple[int, int]:
    """(KV tokens, state slots) of an engine with `capacity_blocks` blocks of memory."""
    if max_states is not None:
        if max_states < 1:
            raise NativeError(f"max_mamba_cache_size must be at least 1, not {max_states}")
        slots = int(max_states)
    else:
        r = RATIO_FALLBACK if ratio is None else float(ratio)
        if r <= 0:
            raise NativeError(f"mamba_full_memory_ratio must be positive, not {r}")
        budget = capacity_blocks * r / (1 + r)  # in blocks
        slots = max(int((budget - state_blocks) // state_blocks), 0)
    kv_blocks = capacity_blocks - (slots + 1) * state_blocks
    if slots < 1 or kv_blocks < 1:
        raise NativeError(
            f"a cache of {capacity_blocks} blocks with {state_blocks}-block states leaves "
            f"{slots} state slots and {kv_blocks} KV blocks: SGLang refuses to start "
            "(kv_cache_configurator.py: not enough memory for the hybrid state cache)"
        )
    return kv_blocks * block_tokens, slots


# State slots per running request in SGLang's cap on running requests: 3, plus 2 tracking
# slots with the extra buffer under overlap scheduling (kv_cache_configurator.py L222,
# L2743-2770, L2812-2831).
MAMBA_RATIO = 5


def max_running(slots: int, requested: int | None = None) -> int:
    """SGLang's max_running_requests: `requested` (or unbounded) capped by slots // 5."""
    cap = slots // MAMBA_RATIO
    if cap <= 0:
        raise NativeError(
            f"{slots} state slots serve no request (SGLang needs {MAMBA_RATIO} per running "
            "request: kv_cache_configurator.py, 'state cache is too small')"
        )
    return cap if requested is None else max(1, min(int(requested), cap))


def engine_config(profile: ModelProfile, opts: dict[str, Any], capacity: int) -> dict[str, Any]:
    """The worker's `init` config from the profile and the policy's options."""
    kv_tokens, slots = pool_sizes(
        capacity,
        profile.block_tokens,
        profile.checkpoint_blocks,
        opts.get("mamba_full_memory_ratio"),
        opts.get("max_mamba_cache_size"),
    )
    grid = int(opts.get("grid") or 256)
    chunk = opts.get("chunk")
    chunk = CHUNKED_PREFILL if chunk is None else int(chunk)
    if grid <= 0 or chunk <= 0:
        raise NativeError(f"grid ({grid}) and chunk ({chunk}) must be positive")
    decode = str(opts.get("decode_steps", "merged"))
    if decode not in ("merged", "token"):
        raise NativeError(f"decode_steps is 'merged' or 'token', not {decode!r}")
    core = opts.get("tree_core")
    if core not in (None, "rust", "python"):
        raise NativeError(f"tree_core is 'rust' or 'python', not {core!r}")
    return {
        "grid": grid,
        "track_interval": int(opts.get("track_interval") or TRACK_INTERVAL),
        "kv_tokens": kv_tokens,
        "state_slots": slots,
        "max_model_len": profile.context_tokens,
        "chunk": chunk,
        "max_running": max_running(slots, opts.get("max_running")),
        "decode_steps": decode,
        "tree_core": core,
    }


class NativeSglangCache(NativeCache):
    """`HybridCache`'s online API backed by SGLang's radix cache in a worker process."""

    engine = "sglang"
    free_states = 0  # free state slots, as the worker's latest answer said

    def worker_config(self, profile: ModelProfile, policy: Policy) -> dict[str, Any]:
        assert self.capacity is not None
        return engine_config(profile, policy.opts, self.capacity)

    def _answer(self, ans: dict[str, Any]) -> None:
        super()._answer(ans)  # free: KV tokens
        if "free_states" in ans:
            self.free_states = int(ans["free_states"])

    @property
    def used_blocks(self) -> int:
        """KV tokens and state slots handed out (to requests or the tree), in blocks."""
        c = self.config
        kv = -(-(int(c["kv_tokens"]) - self.free) // self.B)
        return kv + self.C * (int(c["state_slots"]) - self.free_states)
