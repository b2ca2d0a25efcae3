"""An emulator with an external store behind its host tier (issue 34, tiers rule 5: `replay
serve-sim --external-memory-gb`): host memory no larger than the GPU cache keeps nothing the
GPU dropped (rule 2), so a session's prefix pushed out of the GPU is lost with host memory
alone and served from a Mooncake store behind it; an LMCache store holds no state, so the
hybrid prefix is lost there too. Child processes, as `replay run` starts them (the config's
command line carries the store's flags)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from replay.emulator.config import emulator_config, from_child_args
from replay.emulator.launch import start_emulator_group

SESSION = list(range(1, 257))  # a first turn of four 64-token blocks
NEXT_TURN = SESSION + list(range(5000, 5064))
OTHERS = [[10_000 + 1_000 * k + i for i in range(1024)] for k in range(24)]


def _complete(url: str, ids: list[int]) -> dict[str, Any]:
    body = {"prompt": ids, "max_tokens": 4, "ignore_eos": True}
    req = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        usage: dict[str, Any] = json.load(resp)["usage"]
    return usage


def _next_turn_cached(url: str) -> int:
    _complete(url, SESSION)
    for prompt in OTHERS:
        _complete(url, prompt)
    cached: int = _complete(url, NEXT_TURN).get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return cached


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_prefix_host_memory_could_not_keep_is_served_from_the_store(engine: str) -> None:
    # 300 blocks of 64 tokens on the GPU; 8 GiB of host memory is fewer blocks than that.
    shape = dict(port=0, time_scale=1000.0, blocks=300, block_tokens=64, host_memory_gb=8.0)
    mooncake = emulator_config(engine, external_memory_gb=64.0, **shape)
    lmcache = emulator_config(engine, external_memory_gb=64.0, external_store="lmcache", **shape)
    assert from_child_args(mooncake.child_args()) == mooncake
    assert from_child_args(lmcache.child_args()) == lmcache
    configs = [emulator_config(engine, **shape), mooncake, lmcache]
    got = []
    for cfg in configs:
        with start_emulator_group([cfg]) as group:
            got.append(_next_turn_cached(group.urls[engine]))
    host_only, from_store, kv_only = got
    assert host_only == 0  # host memory no larger than the GPU's keeps nothing dropped
    assert from_store >= 192  # at least the first three blocks, from the store
    assert kv_only == 0  # KV in the store, the state nowhere: no hit
