"""An emulator with a host-memory tier (issue 34: `replay serve-sim --host-memory-gb`, and
`replay run --host-memory-gb` for the emulators it starts): a session's next turn, after other
sessions pushed its prefix out of a small GPU cache, is served from host memory, its tokens
reported as cached (the emulator's answers carry no tier split), where the same emulator without the tier recomputes the prompt. Child processes, as
`replay run` starts them (`start_emulator_group`, the config's command line). Their `/metrics`
split the hits by tier as vLLM 0.32 and SGLang 0.5.22 do (replay/emulator/metrics.py)."""

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


def _replay(url: str) -> int:
    """The session's first turn, the other sessions' prompts, then its next turn: the cached
    tokens the next turn reports."""
    assert "prompt_tokens_details" not in _complete(url, SESSION)
    for prompt in OTHERS:
        _complete(url, prompt)
    cached: int = _complete(url, NEXT_TURN).get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return cached


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_prefix_the_gpu_dropped_is_served_from_host_memory(engine: str) -> None:
    # 300 blocks of 64 tokens on the GPU; 64 GiB of host memory holds 1,296 such blocks.
    shape = dict(port=0, time_scale=1000.0, blocks=300, block_tokens=64)
    tiered = emulator_config(engine, host_memory_gb=64.0, host_bandwidth_gbs=32.0, **shape)
    assert from_child_args(tiered.child_args()) == tiered
    with start_emulator_group([emulator_config(engine, **shape)]) as group:
        assert _replay(group.urls[engine]) == 0  # one tier: the session's prefix is gone
    with start_emulator_group([tiered]) as group:
        url = group.urls[engine]
        assert _replay(url) >= 192  # at least the first three blocks, from host memory
        stats = json.load(urllib.request.urlopen(url + "/emulator/stats", timeout=10))
        assert stats["config"]["host_memory_gb"] == 64.0
        assert stats["counters"]["cached_tokens"] >= 192


def _metrics(url: str) -> dict[str, float]:
    """`/metrics` as `name[label value]` -> value (the `source` / `cache_source` label)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            tier = s.labels.get("source") or s.labels.get("cache_source")
            out[f"{s.name}[{tier}]" if tier else s.name] = s.value
    return out


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_metrics_split_the_hits_by_tier_as_the_engines_do(engine: str) -> None:
    """vLLM 0.32: host-served tokens are `external_kv_transfer` and connector hits, the
    GPU's own hits `prefix_cache_hits` / `local_cache_hit`; SGLang 0.5.22: `cached_tokens`
    by `cache_source`. The emulator's counters hold the split the engine model made."""
    shape = dict(port=0, time_scale=1000.0, blocks=300, block_tokens=64)
    tiered = emulator_config(engine, host_memory_gb=64.0, host_bandwidth_gbs=32.0, **shape)
    with start_emulator_group([tiered]) as group:
        url = group.urls[engine]
        assert _replay(url) >= 192
        c = json.load(urllib.request.urlopen(url + "/emulator/stats", timeout=10))["counters"]
        m = _metrics(url)
    host, cached = c["cached_tokens_host"], c["cached_tokens"]
    assert host >= 192 and c["cached_tokens_external"] == 0  # no store: all from the host
    gpu = cached - host
    if engine == "vllm":
        assert m["vllm:prompt_tokens_by_source_total[external_kv_transfer]"] == host
        assert m["vllm:prompt_tokens_by_source_total[local_cache_hit]"] == gpu
        assert m["vllm:prefix_cache_hits_total"] == gpu
        assert m["vllm:external_prefix_cache_hits_total"] == host
        queries = m["vllm:prefix_cache_queries_total"]
        assert m["vllm:external_prefix_cache_queries_total"] == queries - gpu
        assert m["vllm:prompt_tokens_cached_by_source_total[host]"] == host
        assert m["vllm:prompt_tokens_cached_by_source_total[device]"] == gpu
        assert m["vllm:prompt_tokens_cached_total"] == cached
    else:
        assert m["sglang:cached_tokens_total[host]"] == host
        assert m["sglang:cached_tokens_total[device]"] == gpu
        assert "sglang:cached_tokens_total[storage]" not in m  # no store served any


def test_an_untiered_emulator_exports_no_tier_metrics() -> None:
    shape = dict(port=0, time_scale=1000.0, blocks=300, block_tokens=64)
    with start_emulator_group([emulator_config("vllm", **shape)]) as group:
        url = group.urls["vllm"]
        _complete(url, SESSION)
        _complete(url, NEXT_TURN)
        m = _metrics(url)
    hits = m["vllm:prefix_cache_hits_total"]
    assert hits > 0
    assert m["vllm:prompt_tokens_by_source_total[local_cache_hit]"] == hits
    assert m["vllm:prompt_tokens_by_source_total[external_kv_transfer]"] == 0
    assert not any("external_prefix" in k or "cached_by_source" in k for k in m)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_stores_tokens_are_the_connectors_and_storage(engine: str) -> None:
    """With host memory no larger than the GPU cache, a dropped prefix comes from a Mooncake
    store (tests/integration/test_emulator_external_store.py): vLLM counts it as the
    connector's `external_unspecified` (MooncakeStoreConnector names no tier), SGLang as
    `storage`."""
    shape = dict(port=0, time_scale=1000.0, blocks=300, block_tokens=64, host_memory_gb=8.0)
    with start_emulator_group([emulator_config(engine, external_memory_gb=64.0, **shape)]) as g:
        url = g.urls[engine]
        assert _replay(url) >= 192
        c = json.load(urllib.request.urlopen(url + "/emulator/stats", timeout=10))["counters"]
        m = _metrics(url)
    store, host = c["cached_tokens_external"], c["cached_tokens_host"]
    assert store >= 192
    if engine == "vllm":
        assert m["vllm:prompt_tokens_by_source_total[external_kv_transfer]"] == host + store
        assert m["vllm:prompt_tokens_cached_by_source_total[external_unspecified]"] == store
        assert m["vllm:prompt_tokens_cached_by_source_total[host]"] == host
    else:
        assert m["sglang:cached_tokens_total[storage]"] == store
        assert m["sglang:cached_tokens_total[host]"] == host
