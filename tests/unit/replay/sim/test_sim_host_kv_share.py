"""SGLang HiCache's host memory split by a given KV share (`attach_host_tier(kv_share=...)`,
`EngineShape.host_kv_share`, what `replay plan-host --kv-share` sweeps): the host KV pool
gets that share of its blocks, the state pool the rest in whole states; None keeps the
engine's own split; one-pool engines and no host memory refuse a share."""

from __future__ import annotations

import pytest

from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policies import make_policy
from replay.sim.cache.tiers import HostTier, TierError, attach_host_tier, check_kv_share
from replay.sim.runner import SimConfig, sim_capacity
from tests.unit.replay.sim.test_sim_tiers import _profile


def _tier(policy: str, share: float | None, host_gb: float = 40.0) -> tuple[HybridCache, HostTier]:
    prof = _profile()  # 1 GiB blocks, two-block states
    cache = make_policy(policy, prof).make_cache(prof)
    return cache, attach_host_tier(cache, policy, prof, host_gb, kv_share=share)


@pytest.mark.parametrize(("share", "kv", "slots"), [(0.5, 20, 10), (0.8, 32, 4), (1.0, 40, 0)])
def test_a_kv_share_sizes_sglangs_two_host_pools(share: float, kv: int, slots: int) -> None:
    _, tier = _tier("sglang", share)
    assert (tier.kv_cap, tier.state_cap) == (kv, slots)  # 40 blocks: kv, then states of 2


def test_no_share_is_the_engines_own_split() -> None:
    cache, tier = _tier("sglang", None)
    assert cache.capacity is not None and cache.state_slots is not None
    own = (cache.capacity - cache.C * cache.state_slots) / cache.capacity
    assert tier.kv_cap == int(40 * own)
    assert tier.state_cap == int(40 * (1 - own)) // cache.C


def test_a_share_is_refused_for_one_pool_and_without_host_memory() -> None:
    for policy in ("vllm", "flashstate"):
        with pytest.raises(TierError, match=f"policy '{policy}' keeps one host pool"):
            _tier(policy, 0.5)
    with pytest.raises(TierError, match="no host memory to split"):
        check_kv_share("sglang", True, 0.0, 0.5)
    with pytest.raises(TierError, match=r"--kv-share 1.2: a share of host memory is a fraction"):
        check_kv_share("sglang", True, 64.0, 1.2)


def test_the_run_config_refuses_a_share_it_cannot_honour() -> None:
    with pytest.raises(TierError, match="keeps one host pool"):
        sim_capacity(SimConfig("vllm", 4, host_memory_gb=64, host_kv_share=0.5))
    with pytest.raises(TierError, match="no host memory"):
        sim_capacity(SimConfig("sglang", 4, host_kv_share=0.5))
    assert sim_capacity(SimConfig("sglang", 4, host_memory_gb=64, host_kv_share=0.5)).pooled
    flags = SimConfig("sglang", 4, host_memory_gb=64, host_kv_share=0.5).engine_flags()
    assert "host_kv_share=0.5" in flags
