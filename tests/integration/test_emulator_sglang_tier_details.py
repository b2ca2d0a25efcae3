"""A replayed request's cached tokens by tier against an SGLang emulator with tiers (issue 34
point 3): the emulator answers `meta_info.cached_tokens_details` as SGLang 0.5.22 does
(replay.emulator.shapes.sglang_details), and the client's SGLang adapter reads each request's
host and store tokens from it, equal to what the emulator's engine model counted for that
request (`/emulator/stats`). An emulator without a tier answers no details, so the records
of an untiered run keep their columns. Child processes, as `replay run` starts them."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import numpy as np

from replay.emulator.config import emulator_config
from replay.emulator.launch import start_emulator_group
from replay.engines.adapters import StreamResult, make_adapter

SESSION = list(range(1, 257))  # a first turn of four 64-token blocks
NEXT_TURN = SESSION + list(range(5000, 5064))
OTHERS = [[10_000 + 1_000 * k + i for i in range(1024)] for k in range(24)]
SHAPE: dict[str, Any] = dict(port=0, time_scale=1000.0, blocks=300, block_tokens=64)


def _counters(url: str) -> tuple[int, int]:
    c = json.load(urllib.request.urlopen(url + "/emulator/stats", timeout=10))["counters"]
    return int(c["cached_tokens_host"]), int(c["cached_tokens_external"])


async def _replay(url: str, tiered: bool = True) -> list[tuple[StreamResult, int, int]]:
    """The session's first turn, the others' prompts that push it off the GPU, its next turn,
    one request at a time: each result with the host and store tokens the emulator counted
    for it (its counters' growth)."""
    adapter = make_adapter("sglang", url, None)
    out = []
    try:
        for prompt in [SESSION, *OTHERS, NEXT_TURN]:
            before = _counters(url) if tiered else (0, 0)
            res = await adapter.generate(adapter.request_body(np.array(prompt), 4))
            assert res.status == "ok", res.error
            after = _counters(url) if tiered else (0, 0)
            out.append((res, after[0] - before[0], after[1] - before[1]))
    finally:
        await adapter.close()
    return out


async def test_a_requests_host_tokens_are_the_emulators_own_count() -> None:
    cfg = emulator_config("sglang", host_memory_gb=64.0, host_bandwidth_gbs=32.0, **SHAPE)
    with start_emulator_group([cfg]) as group:
        results = await _replay(group.urls["sglang"])
    for res, host, store in results:
        assert (res.cached_host, res.cached_external) == (host, store)
        assert res.cached_tokens is not None and host <= res.cached_tokens
    last = results[-1][0]
    assert last.cached_host is not None and last.cached_host >= 192  # from host memory


async def test_a_stores_tokens_are_the_emulators_own_count() -> None:
    """Host memory no larger than the GPU cache, a Mooncake store behind it: the dropped
    prefix comes from the store, SGLang's `storage`."""
    cfg = emulator_config("sglang", host_memory_gb=8.0, external_memory_gb=64.0, **SHAPE)
    with start_emulator_group([cfg]) as group:
        results = await _replay(group.urls["sglang"])
    for res, host, store in results:
        assert (res.cached_host, res.cached_external) == (host, store)
    last = results[-1][0]
    assert last.cached_external is not None and last.cached_external >= 192


async def test_an_untiered_emulator_answers_no_details() -> None:
    with start_emulator_group([emulator_config("sglang", **SHAPE)]) as group:
        results = await _replay(group.urls["sglang"], tiered=False)
    assert all(r.cached_host is None and r.cached_external is None for r, _, _ in results)
    assert results[1][0].cached_tokens == 0  # no tier: the other prompts share nothing
