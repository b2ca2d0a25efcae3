"""Which cache an emulator runs: the engine's policy from `replay.sim`, or `kv-lru`."""

from __future__ import annotations

from replay.engines.emulator.cache import EngineCache
from replay.engines.emulator.config import EmulatorConfig
from replay.engines.emulator.kv_cache import KVLRUCache
from replay.profiles import ModelProfile


class UnknownPolicy(ValueError):
    """A policy name no cache implements; the message lists the known ones."""


def make_cache(cfg: EmulatorConfig, profile: ModelProfile) -> EngineCache:
    """The cache for `cfg.policy_name`, sized by the (overridden) profile."""
    name = cfg.policy_name
    if name == "kv-lru":
        return KVLRUCache(profile.block_tokens, profile.blocks_per_engine)
    from replay.engines.emulator.sim_cache import make_sim_cache

    return make_sim_cache(name, profile)
