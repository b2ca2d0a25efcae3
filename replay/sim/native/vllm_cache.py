"""`vllm-native`: the simulator's cache API over vLLM's own `KVCacheManager`.

The same online calls as `HybridCache` (`lookup / begin / reserve / prefill_done / finish /
abort`), so the simulator's executors (and the emulator) drive it unchanged; each turns into
what vLLM's scheduler does for one request (`replay/sim/native/vllm_worker.py`):

- `lookup`: `get_computed_blocks` on a request built from the prompt's token ids (pure);
- `reserve`: admission and every prefill chunk, one scheduler step each, chunk ends from
  `Scheduler._mamba_block_aligned_split`; False when vLLM could not allocate (the request
  waits, as in vLLM's queue); the hit reported is the one at admission. When the prefix
  already holds the output ids (the simulator's), the output is decoded here too, one token
  a step, so the request holds its whole sequence from its start as `HybridCache` reserves;
- `finish`: the output decoded (if not yet: the emulator learns it only now), then `free`
  (KV freed tail first);
- `abort`: `free`.

The hybrid cache config comes from the model profile: one full-attention group and
`checkpoint_blocks` Mamba groups ("align" mode) over one pool of `capacity + 1` blocks of
`block_tokens` (vLLM's pool loses one to its null block), the prefix-cache retention
interval a server resolves (0), `hash_block_size` = `--prefix-match-unit` or the block, the
long-prefill threshold = the profile's `chunk_tokens` and the token budget 16,384 (the
paper's serve command; both are options).

Requests are run one command at a time: a request's prefill steps run back to back at
`reserve`, its decode steps at `finish`. vLLM interleaves other requests' steps between
them; the manager's state between two requests' calls is the same either way except for the
order in which blocks are taken from and returned to the free queue within one step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replay.profiles import ModelProfile
from replay.sim.native.online import NativeCache, NativeHandle, NativeInfo
from replay.sim.native.worker import NativeError

if TYPE_CHECKING:
    from replay.sim.cache.policy_base import Policy


def engine_config(profile: ModelProfile, opts: dict[str, Any], capacity: int) -> dict[str, Any]:
    """The worker's `init` config from the profile and the policy's options."""
    B = profile.block_tokens
    unit = opts.get("prefix_match_unit")
    if opts.get("decode_steps", "block") not in ("block", "token"):
        raise NativeError(f"decode_steps is 'block' or 'token', not {opts['decode_steps']!r}")
    if unit is not None and (int(unit) <= 0 or B % int(unit)):
        raise NativeError(
            f"prefix_match_unit {unit} must divide the block size {B} (vLLM requires every "
            "group's block size to be a multiple of it)"
        )
    # The paper's serve command (configs/engines/vllm-glm53-b200.yaml):
    # --long-prefill-token-threshold 8704 (the profile's chunk_tokens) and
    # --max-num-batched-tokens 16384. vLLM's own defaults are 0 (no threshold) and 2048.
    lpt = opts.get("long_prefill_threshold")
    chunk = profile.chunk_tokens if lpt is None else int(lpt)
    budget = opts.get("token_budget")
    return {
        "block": B,
        "hash_block": int(unit) if unit else B,
        "num_blocks": capacity + 1,  # the pool's null block is never handed out
        "state_blocks": profile.checkpoint_blocks,
        "retention": opts.get("retention", 0),
        "max_model_len": profile.context_tokens,
        "long_prefill_threshold": chunk,
        "token_budget": 16384 if budget is None else int(budget),
        "shared_prefix_checkpoint": bool(opts.get("shared_prefix_checkpoint", False)),
        "decode_steps": str(opts.get("decode_steps", "block")),
    }


class NativeVllmCache(NativeCache):
    """`HybridCache`'s online API backed by vLLM's KV cache manager in a worker process."""

    engine = "vllm"

    def worker_config(self, profile: ModelProfile, policy: Policy) -> dict[str, Any]:
        """`engine_config`, and the FlashState fork's flags the options set (the vLLM found
        must know them)."""
        assert self.capacity is not None
        opts = policy.opts
        fork = [k for k in FORK_OPTIONS if opts.get(k) not in (None, False, "lru")]
        missing = [k for k in fork if FORK_OPTIONS[k] not in self.worker.fork_flags]
        if missing:
            raise NativeError(
                f"option {', '.join(missing)} needs the FlashState fork of vLLM (a 0.33 fork: "
                f"`bash scripts/fetch_flashstate.sh`, GPU build); the vLLM found "
                f"({self.worker.found.python}, {self.worker.found.how}) is {self.worker.version}"
            )
        config = engine_config(profile, opts, self.capacity)
        config["fork"] = {FORK_OPTIONS[k]: opts[k] for k in fork}
        return config

    # occupancy: what vLLM's pool has handed out (referenced blocks) ---------------------------
    @property
    def used_blocks(self) -> int:
        assert self.capacity is not None
        return self.capacity - self.free


# The FlashState fork's flags as policy options (CacheConfig fields the fork adds).
FORK_OPTIONS: dict[str, str] = {
    "frontier_checkpoint": "mamba_frontier_checkpoint",
    "prefill_export": "mamba_prefill_export",
    "eviction": "prefix_cache_eviction",
    "leaf_last": "prefix_cache_leaf_last",
    "leaf_idle_s": "prefix_cache_leaf_idle_seconds",
}

__all__ = ["NativeHandle", "NativeInfo", "NativeVllmCache", "engine_config"]
