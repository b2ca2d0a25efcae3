"""`replay.sim.cache.capacity`: the one rule that sizes every engine cache, and the places that used
to decide it themselves (the cache core, `cache_settings`, the runner, kv-lru, SGLang)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.profiles import load_profile
from replay.sim.cache.capacity import CapacityError, resolve_capacity
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policies import make_policy
from replay.sim.cache.requests import CacheError
from replay.sim.engine.cache import cache_settings, engine_cache
from replay.sim.engine.scale import scaled_profile
from replay.sim.native.sglang_cache import engine_config
from replay.sim.runner import SimConfig, sim_capacity
from tests.unit.replay.sim.conftest import tiny_profile

GLM = load_profile("glm-5.3-flash")


def test_a_one_pool_policy_holds_the_profile_or_the_override() -> None:
    cap = resolve_capacity("vllm", GLM)
    assert (cap.blocks, cap.source, cap.state_slots, cap.reported_blocks) == (
        2531,
        "profile",
        None,
        2531,
    )
    assert "blocks_per_engine (2531)" in cap.reason
    cap = resolve_capacity("flashstate", GLM, 1000)
    assert (cap.blocks, cap.source, cap.requested, cap.reported_blocks) == (
        1000,
        "override",
        1000,
        1000,
    )
    lru = resolve_capacity("kv-lru", GLM)
    assert (lru.blocks, lru.source) == (2531, "profile")
    assert engine_cache("kv-lru", GLM, capacity_blocks=77).capacity.blocks == 77


def test_an_unbounded_policy_stays_unbounded_and_an_override_sizes_only_the_ratio() -> None:
    cap = resolve_capacity("ideal", GLM)
    assert (cap.blocks, cap.source, cap.reported_blocks) == (None, "unbounded", 2531)
    cap = resolve_capacity("ideal", GLM, 1000)
    assert cap.blocks is None and cap.reported_blocks == 1000
    assert "only size the working-set ratio" in cap.reason
    cache = HybridCache(GLM, make_policy("ideal", GLM), capacity_blocks=1000)
    assert cache.capacity is None


def test_sglang_pools_from_the_memory_as_sglang_sizes_them() -> None:
    """2,531 blocks: 238 state slots and 1,336 KV blocks (the cache holds 1,336 + 5·238); a
    block override is split by the same rule SGLang's own cache (`sglang-native`) uses."""
    cap = resolve_capacity("sglang", GLM)
    assert (cap.state_slots, cap.kv_tokens, cap.blocks) == (238, 1336 * 4352, 1336 + 5 * 238)
    assert cap.reported_blocks == cap.blocks and cap.source == "profile"
    for blocks in (1000, 1500, 5062):
        cap = resolve_capacity("sglang", GLM, blocks)
        native = engine_config(GLM, {}, blocks)
        assert (cap.kv_tokens, cap.state_slots) == (native["kv_tokens"], native["state_slots"])
        assert cap.reported_blocks == blocks and cap.blocks is not None
        assert blocks - 5 <= cap.blocks <= blocks  # less the padding slot (not cache)
    cache = engine_cache("sglang", GLM, capacity_blocks=1000)
    assert cache.capacity_blocks == resolve_capacity("sglang", GLM, 1000).blocks == 995


def test_sglang_options_set_a_pool_and_the_rest_comes_from_the_memory() -> None:
    cap = resolve_capacity("sglang", GLM, 1000, {"state_slots": 50})
    assert cap.state_slots == 50 and cap.source == "options"
    assert cap.kv_tokens == engine_config(GLM, {}, 1000)["kv_tokens"]
    both = resolve_capacity("sglang", GLM, None, {"state_slots": 50, "kv_tokens": 4352 * 100})
    assert both.blocks == 100 + 5 * 50


def test_a_scaled_profile_gets_its_own_sglang_pool_not_glms() -> None:
    """The KV pool of a token-scaled profile comes from that profile's memory (it used to be
    GLM-5.3-Flash's 5.8M tokens ÷ the scale for every model)."""
    nemo = load_profile("nemotron-3-super")
    prof = scaled_profile(nemo, 16)
    settings = cache_settings("sglang", prof, 16)
    assert settings.capacity is not None
    kv, slots = settings.capacity.kv_tokens, settings.capacity.state_slots
    assert (kv, slots) == (
        engine_config(prof, {}, nemo.blocks_per_engine)["kv_tokens"],
        engine_config(prof, {}, nemo.blocks_per_engine)["state_slots"],
    )
    assert settings.options["kv_tokens"] == kv
    glm = cache_settings("sglang", scaled_profile(GLM, 16), 16)
    assert glm.options["kv_tokens"] == round(1336 * 4352 / 16)  # as before, for GLM


def test_capacities_that_cannot_be_honoured_say_why() -> None:
    with pytest.raises(CapacityError, match=r"both pool options state_slots and kv_tokens"):
        resolve_capacity("sglang", GLM, 1000, {"state_slots": 50, "kv_tokens": 4352})
    with pytest.raises(CapacityError, match=r"leaves 0 state slots .* SGLang refuses to start"):
        resolve_capacity("sglang", GLM, 4)
    with pytest.raises(CapacityError, match=r"state slots serve no request"):
        resolve_capacity("sglang", GLM, 40)
    with pytest.raises(CapacityError, match=r"option state_slots must be positive, not 0"):
        resolve_capacity("sglang", GLM, None, {"state_slots": 0})
    with pytest.raises(CapacityError, match=r"at least 1, not 0"):
        resolve_capacity("vllm", GLM, 0)
    with pytest.raises(ValueError, match=r"unknown policy 'nope'"):
        resolve_capacity("nope", GLM)
    prof = tiny_profile(blocks=400)
    pol = make_policy("sglang", prof, state_slots=10, kv_tokens=16 * 300, grid=8)
    with pytest.raises(
        CacheError, match=r"sizes its state and KV pools .*capacity.resolve_capacity"
    ):
        HybridCache(prof, pol, capacity_blocks=200)
    assert HybridCache(prof, pol).capacity == 300 + 2 * 10


def test_the_cache_core_honours_an_override_for_a_one_pool_policy() -> None:
    prof = tiny_profile(blocks=40)
    assert HybridCache(prof, make_policy("vllm", prof), capacity_blocks=12).capacity == 12
    assert HybridCache(prof, make_policy("vllm", prof)).capacity == 40


def test_a_run_resolves_its_capacity_before_it_starts() -> None:
    cfg = SimConfig("sglang", 2, capacity_blocks=1500, token_scale=16)
    cap = sim_capacity(cfg)
    assert cap.reported_blocks == 1500 and cap.state_slots == 141 and cap.blocks == 1495
    with pytest.raises(CapacityError, match=r"policy 'sglang-native': .*SGLang refuses to start"):
        sim_capacity(SimConfig("sglang-native", 2, capacity_blocks=4))


def test_simulate_refuses_a_capacity_it_cannot_honour_naming_the_flag(small_corpus, tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "simulate", "--trace", str(small_corpus), "--policies", "vllm,sglang",
            "--sessions", "2", "--capacity-blocks", "40", "--out", str(tmp_path / "o"),
        ],
    )  # fmt: skip
    assert res.exit_code == 2
    assert "--capacity-blocks 40: policy 'sglang': 2 state slots serve no request" in " ".join(
        res.output.split()
    )
    assert not (tmp_path / "o").exists()
