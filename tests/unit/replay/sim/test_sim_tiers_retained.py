"""The emulator's prompts (`PrefixKeys`, handed to the cache `retained`) with a host tier
(issue 34): under vLLM's connector a request loads [r, p) into new blocks and does not hold
the GPU's copies of that range, so they can be evicted before its prompt is in; the cache
then builds them again from the request's prompt, which must still know their tokens. The
48-session emulated run with 512 GiB of host memory failed 823 vLLM requests on this
("position 1 lies before the tokens this retained sequence keeps")."""

from __future__ import annotations

from dataclasses import replace

from replay.emulator.hashing import PrefixKeys
from replay.profiles import ModelProfile
from replay.sim.engine.cache import SimCache, cache_settings

B = 16
A_IDS = list(range(64))
A_OUT = list(range(1000, 1016))
B_IDS = A_IDS + A_OUT + list(range(2000, 2032))
OTHER = list(range(50_000, 50_064))  # a sibling at the root


def _profile() -> ModelProfile:
    return ModelProfile(
        name="tiny",
        model="tiny hybrid",
        gpus=1,
        block_tokens=B,
        blocks_per_engine=60,
        checkpoint_blocks=2,
        cache_gib_per_gpu=60.0,
        prefill_cost_d=1.862e-5,
        prefill_cost_e=3.33e-6,
        cost_unit_tokens=100,
        chunk_tokens=32,
        context_tokens=4096,
    )


def _turn(sim: SimCache, rid: int, ids: list[int], out: list[int], t: float) -> None:
    n = len(ids)
    assert sim.admit(rid, PrefixKeys(ids, B), n, n + len(out), t) is not None
    sim.prefill(rid, 0, n, t)
    sim.finish(rid, PrefixKeys(ids + out, B), n + len(out), t + 1.0)


def test_an_unheld_gpu_copy_of_the_loaded_range_can_go_before_the_prompt_is_in() -> None:
    sim = SimCache(replace(cache_settings("vllm", _profile()), host_memory_gb=40.0))
    cache = sim.cache
    _turn(sim, 1, OTHER, [7] * 16, 0.0)
    _turn(sim, 2, A_IDS, A_OUT, 2.0)
    prompt = PrefixKeys(B_IDS, B)
    cache.drop_block(cache.nodes[prompt.key_at(48)])  # [32, 48) leaves the GPU for the host
    res = sim.admit(3, prompt, len(B_IDS), len(B_IDS) + 16, 4.0)
    assert res is not None and res.cached == 48 and res.cached_host == 48  # r = 0, p = 48
    for end in (16, 32):  # the unheld copies of [0, 32) go, as an LRU may take them
        b = cache.nodes[prompt.key_at(end)]
        assert b.resident and not b.live
        cache.drop_block(b)
    sim.prefill(3, 48, len(B_IDS), 4.0)  # built again from the prompt's own tokens
    assert cache.nodes[prompt.key_at(16)].resident
