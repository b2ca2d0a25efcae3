"""Which cache an emulator runs: the engine's policy from `replay.sim`, or `kv-lru`."""

from __future__ import annotations

from replay.engines.emulator.cache import EngineCache
from replay.engines.emulator.config import EmulatorConfig
from replay.engines.emulator.kv_cache import KVLRUCache
from replay.profiles import ModelProfile, load_profile


class UnknownPolicy(ValueError):
    """A policy name no cache implements; the message lists the known ones."""


# Policy options measured in tokens: they shrink with a scaled trace like the profile does.
_TOKEN_OPTIONS = ("grid", "chunk", "every", "kv_tokens")


def policy_options(
    policy: str, base: ModelProfile, profile: ModelProfile, token_scale: float = 1.0
) -> dict[str, object]:
    """Options for `policy` on a cache resized from `base` to `profile` for a trace whose
    token lengths were divided by `token_scale`.

    Token-valued options (SGLang's 256-token grid and chunk, dense's spacing) shrink by the
    token scale, so a scaled prompt gets as many checkpoints as its full-size original.
    SGLang's pools are sized absolutely (≈430 checkpoint slots beside 5.9M tokens of KV on
    GLM-5.3-Flash): when the block count is changed, both change in proportion so the cache
    keeps its size relative to the other engines' (and a small cache can still hold them)."""
    from replay.sim.policies import Policy

    cls = Policy.registry.get(policy)
    if cls is None:
        return {}
    opts: dict[str, object] = {}
    if token_scale != 1.0:
        for key in _TOKEN_OPTIONS:
            if key in cls.options:
                opts[key] = max(1, round(int(cls.options[key]) / token_scale))
    ratio = profile.blocks_per_gpu / base.blocks_per_gpu
    if ratio != 1.0:
        for key in ("state_slots", "kv_tokens"):
            if key in cls.options:
                value = opts.get(key, cls.options[key])
                assert isinstance(value, int | float)
                opts[key] = max(1, round(value * ratio))
    return opts


def make_cache(cfg: EmulatorConfig, profile: ModelProfile) -> EngineCache:
    """The cache for `cfg.policy_name`, sized by the (overridden) profile."""
    name = cfg.policy_name
    if name == "kv-lru":
        return KVLRUCache(profile.block_tokens, profile.blocks_per_gpu)
    from replay.engines.emulator.sim_cache import SimCache

    base = load_profile(cfg.model)
    return SimCache(name, profile, policy_options(name, base, profile, cfg.token_scale))
