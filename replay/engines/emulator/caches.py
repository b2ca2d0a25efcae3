"""Which cache an emulator runs: the engine's policy from `replay.sim`, or `kv-lru`."""

from __future__ import annotations

from replay.engines.emulator.cache import EngineCache
from replay.engines.emulator.config import EmulatorConfig
from replay.engines.emulator.kv_cache import KVLRUCache
from replay.profiles import ModelProfile, load_profile


class UnknownPolicy(ValueError):
    """A policy name no cache implements; the message lists the known ones."""


# Policy options measured in tokens: they shrink with a scaled trace like the profile does.
_TOKEN_OPTIONS = ("grid", "chunk", "every")


def policy_options(
    policy: str, base: ModelProfile, profile: ModelProfile, token_scale: float = 1.0
) -> dict[str, object]:
    """Options for `policy` on a cache resized from `base` to `profile` for a trace whose
    token lengths were divided by `token_scale`.

    Token-valued options (SGLang's 256-token grid and chunk, dense's spacing) shrink by the
    token scale, so a scaled prompt gets as many checkpoints as its full-size original.
    SGLang's state pool is a fixed number of checkpoint slots (≈430 on GLM-5.3-Flash): when
    the block count is changed, the pool changes in proportion so it keeps its share of
    memory (otherwise a small cache could not even hold it)."""
    from replay.sim.policies import Policy

    cls = Policy.registry.get(policy)
    if cls is None:
        return {}
    opts: dict[str, object] = {}
    if token_scale != 1.0:
        for key in _TOKEN_OPTIONS:
            if key in cls.options:
                opts[key] = max(1, round(int(cls.options[key]) / token_scale))
    if "state_slots" in cls.options and profile.blocks_per_engine != base.blocks_per_engine:
        slots = int(cls.options["state_slots"])
        opts["state_slots"] = max(
            1, round(slots * profile.blocks_per_engine / base.blocks_per_engine)
        )
    return opts


def make_cache(cfg: EmulatorConfig, profile: ModelProfile) -> EngineCache:
    """The cache for `cfg.policy_name`, sized by the (overridden) profile."""
    name = cfg.policy_name
    if name == "kv-lru":
        return KVLRUCache(profile.block_tokens, profile.blocks_per_engine)
    from replay.engines.emulator.sim_cache import SimCache

    base = load_profile(cfg.model)
    return SimCache(name, profile, policy_options(name, base, profile, cfg.token_scale))
