"""Which cache an emulator runs, sized how: the engine's policy from `replay.sim` (or
`kv-lru`, a plain KV cache), with the profile and options scaled for a scaled-down trace.

`cache_settings` is the one place that turns (policy, model, token scale, block count) into
what the simulator's cache takes, so an emulator and `replay simulate` given the same
settings build the same cache (the twin check relies on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replay.engines.emulator.cache import EngineCache
from replay.engines.emulator.config import EmulatorConfig
from replay.engines.emulator.kv_cache import KVLRUCache
from replay.profiles import ModelProfile

# Policy options measured in tokens: they shrink with a scaled trace like the profile does.
_TOKEN_OPTIONS = ("grid", "chunk", "every", "kv_tokens")
# Options that size a policy's own pools: they follow a changed block count.
_POOL_OPTIONS = ("state_slots", "kv_tokens")


@dataclass(frozen=True)
class CacheSettings:
    """What `replay.sim.cache.HybridCache` (and `replay.sim.runner.SimConfig`) take."""

    policy: str
    profile: ModelProfile
    options: dict[str, object] = field(default_factory=dict)
    capacity_blocks: int | None = None  # None: the policy's own size for the profile


def cache_settings(
    policy: str, profile: ModelProfile, token_scale: float = 1.0, blocks: int | None = None
) -> CacheSettings:
    """Settings for `policy` on `profile` (already scaled by `token_scale`), with the cache
    resized to `blocks` if given.

    Token-valued options (SGLang's 256-token grid, chunk and 5.9M-token KV pool, dense's
    spacing) shrink by the token scale, so a scaled prompt gets as many checkpoints as its
    full-size original. A policy that sizes its own pools (SGLang: ≈430 checkpoint slots
    beside its KV pool) has them resized in proportion to `blocks`; any other policy gets
    `blocks` as its capacity.
    """
    from replay.sim.policies import Policy

    cls = Policy.registry.get(policy)
    if cls is None:  # let make_policy name the known ones
        return CacheSettings(policy, profile, {}, blocks)
    opts: dict[str, object] = {}
    if token_scale != 1.0:
        for key in _TOKEN_OPTIONS:
            if key in cls.options:
                opts[key] = max(1, round(float(cls.options[key]) / token_scale))
    capacity = blocks
    if blocks is not None and any(k in cls.options for k in _POOL_OPTIONS):
        own = make_policy_capacity(policy, profile, opts)
        ratio = blocks / own if own else 1.0
        for key in _POOL_OPTIONS:
            if key in cls.options:
                value = opts.get(key, cls.options[key])
                assert isinstance(value, int | float)
                opts[key] = max(1, round(value * ratio))
        capacity = None
    return CacheSettings(policy, profile, opts, capacity)


def make_policy_capacity(policy: str, profile: ModelProfile, opts: dict[str, object]) -> int | None:
    from replay.sim.policies import make_policy

    return make_policy(policy, profile, **opts).capacity_blocks(profile)


def make_cache(cfg: EmulatorConfig, profile: ModelProfile) -> EngineCache:
    """The cache for `cfg.policy_name` on the emulator's (scaled) profile."""
    name = cfg.policy_name
    if name == "kv-lru":
        from replay.sim.policy_base import engine_cache_blocks

        return KVLRUCache(profile.block_tokens, cfg.blocks or engine_cache_blocks(profile))
    from replay.engines.emulator.sim_cache import SimCache

    return SimCache(cache_settings(name, profile, cfg.token_scale, cfg.blocks))
