"""Which cache an emulator runs: the engine's policy from `replay.sim`, or `kv-lru`."""

from __future__ import annotations

from replay.engines.emulator.cache import EngineCache
from replay.engines.emulator.config import EmulatorConfig
from replay.engines.emulator.kv_cache import KVLRUCache
from replay.profiles import ModelProfile, load_profile


class UnknownPolicy(ValueError):
    """A policy name no cache implements; the message lists the known ones."""


def policy_options(policy: str, base: ModelProfile, profile: ModelProfile) -> dict[str, object]:
    """Policy options for a cache resized from `base` to `profile`.

    SGLang's state pool is a fixed number of checkpoint slots (≈430 on GLM-5.3-Flash); when
    the cache is scaled down for a small trace, the pool shrinks in proportion so it keeps
    its share of memory (otherwise it would not even fit)."""
    if policy != "sglang" or profile.blocks_per_engine == base.blocks_per_engine:
        return {}
    from replay.sim.policies import SglangPolicy

    slots = int(SglangPolicy.options["state_slots"])
    scaled = round(slots * profile.blocks_per_engine / base.blocks_per_engine)
    return {"state_slots": max(1, scaled)}


def make_cache(cfg: EmulatorConfig, profile: ModelProfile) -> EngineCache:
    """The cache for `cfg.policy_name`, sized by the (overridden) profile."""
    name = cfg.policy_name
    if name == "kv-lru":
        return KVLRUCache(profile.block_tokens, profile.blocks_per_engine)
    from replay.engines.emulator.sim_cache import SimCache

    return SimCache(name, profile, policy_options(name, load_profile(cfg.model), profile))
