"""Adapter: the simulator's online cache core (`replay.sim`) as an emulator `EngineCache`."""

from __future__ import annotations

from replay.engines.emulator.cache import EngineCache
from replay.engines.emulator.kv_cache import KVLRUCache
from replay.profiles import ModelProfile


def make_sim_cache(policy: str, profile: ModelProfile) -> EngineCache:
    # Interim until replay.sim's online core lands: a plain KV cache.
    return KVLRUCache(profile.block_tokens, profile.blocks_per_engine)
