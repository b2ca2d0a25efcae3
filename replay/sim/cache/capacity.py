"""An engine cache's capacity, resolved once: the blocks it holds, how they split into pools,
and where each number came from.

Every builder of a cache asks `resolve_capacity` (through `replay.sim.engine.cache.
cache_settings`: the simulator's runner, the emulator, `replay serve-sim`), and the cache
core checks a block count handed to it directly with the same rule (`bounded`, which is
`replay.sim.cache.requests.bounded_capacity`: the core may not import the policies). The rules:

1. Memory: the override (`replay simulate --capacity-blocks`, the emulator's `--blocks`) or
   the profile's `blocks_per_engine` (per engine: under tensor parallelism each block is
   split across the GPUs, so GLM-5.3-Flash on 2×B200 has the source's "entire 2,531-block
   cache" per engine).
2. An unbounded policy (`ideal`) holds everything: no block count, whatever the override;
   an override then only sizes the working-set ratio (`reported_blocks`).
3. `kv-lru` and every one-pool policy hold the memory's blocks, checkpoints included
   (`sglang-native` too: SGLang's own code splits those blocks into its pools).
4. `sglang` keeps states in a pool of their own beside its KV pool, both sized from the
   memory as SGLang sizes them (`replay.sim.native.sglang_cache.pool_sizes`, after
   mem_cache/kv_cache_configurator.py L2978-3083: the states get r/(1+r) of it, the KV the
   rest after one padding slot), so a changed block count changes both pools by SGLang's
   rule, not in proportion. The options `state_slots` / `kv_tokens` (unscaled tokens) set a
   pool outright; both together with an override is refused (nothing would be left for the
   override to size). The cache then holds its KV blocks plus its state slots' blocks (the
   padding slot is not cache). Before this module an override was split in proportion to
   the profile's pools; SGLang's own split differs by its rounding (1,500 blocks: 790 KV
   blocks and 141 slots, not 794 and 141), which a saturated run feels.

`Capacity` is a small frozen value made once per cache, never on a hot path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from replay.profiles import ModelProfile

Source = Literal["profile", "override", "options", "unbounded"]
# Options that size a policy's own pools (a policy with both keeps states in a pool of its own).
POOL_OPTIONS = ("state_slots", "kv_tokens")


@dataclass(frozen=True, slots=True)
class Capacity:
    """What one engine's cache holds, and why.

    `blocks`: the cache's blocks, state pool included (None: unbounded). `state_slots` /
    `kv_tokens`: the two pools of a policy that keeps them apart (None: one shared pool).
    `memory_blocks`: the engine memory the numbers were derived from (the override or the
    profile's); `requested`: the override as given. `source` says which of those decided,
    `reason` says so in words (for manifests, `/get_server_info` and messages)."""

    policy: str
    blocks: int | None
    memory_blocks: int
    requested: int | None
    source: Source
    reason: str
    state_slots: int | None = None
    kv_tokens: int | None = None

    @property
    def reported_blocks(self) -> int:
        """The block count a run reports and divides its working set by: the override as
        given, else the blocks the cache holds, else (unbounded) the profile's memory."""
        return self.requested or self.blocks or self.memory_blocks

    @property
    def pooled(self) -> bool:
        """States in a pool of their own beside the KV pool (SGLang)."""
        return self.state_slots is not None


class CapacityError(ValueError):
    """A capacity that cannot be honoured; the message names the setting."""


def bounded(policy: str, own: int | None, capacity_blocks: int | None, pooled: bool) -> int | None:
    """Rules 2-4 for a block count `capacity_blocks` handed to a cache whose policy holds `own`
    blocks by itself (None: unbounded); the cache core applies the same function
    (`replay.sim.cache.requests.bounded_capacity`, kept there so the core imports no policy)."""
    from replay.sim.cache.requests import CacheError, bounded_capacity

    try:
        return bounded_capacity(policy, own, capacity_blocks, pooled)
    except CacheError as e:
        raise CapacityError(str(e)) from e


def sglang_pools(
    profile: ModelProfile, memory_blocks: int, opts: Mapping[str, Any], policy: str = "sglang"
) -> tuple[int, int]:
    """(KV tokens, state slots) of SGLang on `memory_blocks` blocks of `profile` (rule 4),
    with SGLang's split options (`mamba_full_memory_ratio`, `max_mamba_cache_size`) from
    `opts`. Raises `CapacityError` naming the shortfall when SGLang would refuse to start."""
    from replay.sim.native.sglang_cache import pool_sizes

    try:
        return pool_sizes(
            memory_blocks,
            profile.block_tokens,
            profile.checkpoint_blocks,
            opts.get("mamba_full_memory_ratio"),
            opts.get("max_mamba_cache_size"),
        )
    except RuntimeError as e:
        raise CapacityError(f"policy '{policy}': {e}") from e


def _check_rows(policy: str, slots: int) -> None:
    """SGLang refuses a state pool that serves no request (`max_running`)."""
    from replay.sim.native.sglang_cache import max_running

    try:
        max_running(slots)
    except RuntimeError as e:
        raise CapacityError(f"policy '{policy}': {e}") from e


def _kv_blocks(kv_tokens: int, block_tokens: int) -> int:
    return -(-kv_tokens // block_tokens)


def resolve_capacity(
    policy: str,
    profile: ModelProfile,
    capacity_blocks: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> Capacity:
    """The capacity of `policy` (a `replay.sim` policy name or `kv-lru`) on `profile` (already
    token-scaled), with the block count `capacity_blocks` if given and the policy's `options` (token
    options already scaled). Unknown policies and options are refused by `make_policy`."""
    from replay.sim.cache.policies import Policy, make_policy

    if capacity_blocks is not None and capacity_blocks < 1:
        raise CapacityError(f"the cache's block count must be at least 1, not {capacity_blocks}")
    opts = dict(options or {})
    memory = capacity_blocks if capacity_blocks is not None else profile.blocks_per_engine
    source: Source = "override" if capacity_blocks is not None else "profile"
    where = (
        f"{capacity_blocks} blocks given"
        if capacity_blocks is not None
        else f"the profile's blocks_per_engine ({profile.blocks_per_engine}) for {profile.name}"
    )
    if policy == "kv-lru":
        return Capacity(
            policy, memory, memory, capacity_blocks, source, f"{memory} blocks: {where}"
        )
    cls = Policy.registry.get(policy)
    if cls is not None and all(k in cls.options for k in POOL_OPTIONS):
        return _pooled(policy, profile, capacity_blocks, opts, memory, source, where)
    pol = make_policy(policy, profile, **opts)
    own = pol.capacity_blocks(profile)
    if policy == "sglang-native" and own is not None:  # SGLang's own code splits the memory
        _, slots = sglang_pools(profile, memory, pol.opts, policy)
        _check_rows(policy, slots)
    if own is None:
        note = (
            f" (the {capacity_blocks} blocks given only size the working-set ratio)"
            if capacity_blocks
            else ""
        )
        return Capacity(
            policy,
            None,
            profile.blocks_per_engine,
            capacity_blocks,
            "unbounded",
            f"policy '{policy}' holds everything{note}",
        )
    blocks = bounded(policy, own, capacity_blocks, False)
    assert blocks is not None
    return Capacity(policy, blocks, memory, capacity_blocks, source, f"{blocks} blocks: {where}")


def _pooled(
    policy: str,
    profile: ModelProfile,
    capacity_blocks: int | None,
    opts: dict[str, Any],
    memory: int,
    source: Source,
    where: str,
) -> Capacity:
    """Rule 4: SGLang's two pools from the memory, an option setting either outright."""
    given = [k for k in POOL_OPTIONS if opts.get(k) is not None]
    if capacity_blocks is not None and len(given) == len(POOL_OPTIONS):
        raise CapacityError(
            f"policy '{policy}': a block count ({capacity_blocks}, --capacity-blocks / --blocks) and "
            "both pool options state_slots and kv_tokens were given; give the block count "
            "or the two pools, not both"
        )
    kv_tokens, slots = (
        (0, 0) if len(given) == len(POOL_OPTIONS) else sglang_pools(profile, memory, opts)
    )
    for k in given:
        value = opts[k]
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            raise CapacityError(f"policy '{policy}': option {k} must be positive, not {value!r}")
    if "state_slots" in given:
        slots = int(opts["state_slots"])
    if "kv_tokens" in given:
        kv_tokens = int(opts["kv_tokens"])
    blocks = _kv_blocks(kv_tokens, profile.block_tokens) + profile.checkpoint_blocks * slots
    _check_rows(policy, slots)
    if given:
        source = "options"
        named = " and ".join(f"{k}={opts[k]}" for k in given)
        where = f"options {named}" + (f", the rest from {where}" if len(given) == 1 else "")
    return Capacity(
        policy,
        blocks,
        memory,
        capacity_blocks,
        source,
        f"{slots} state slots and {kv_tokens} KV tokens ({blocks} blocks) from {where}, "
        "split as SGLang sizes its pools",
        slots,
        kv_tokens,
    )
