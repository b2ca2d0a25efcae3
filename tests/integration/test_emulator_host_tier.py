"""An emulator with a host-memory tier (issue 34: `replay serve-sim --host-memory-gb`, and
`replay run --host-memory-gb` for the emulators it starts): a session's next turn, after other
sessions pushed its prefix out of a small GPU cache, is served from host memory, its tokens
reported as cached (the emulator's answers carry no tier split: the engines' own APIs have
none), where the same emulator without the tier recomputes the prompt. Child processes, as
`replay run` starts them (`start_emulator_group`, the config's command line)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from replay.emulator.config import emulator_config
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
    assert "--host-memory-gb" in tiered.cli_args()
    with start_emulator_group([emulator_config(engine, **shape)]) as group:
        assert _replay(group.urls[engine]) == 0  # one tier: the session's prefix is gone
    with start_emulator_group([tiered]) as group:
        url = group.urls[engine]
        assert _replay(url) >= 192  # at least the first three blocks, from host memory
        stats = json.load(urllib.request.urlopen(url + "/emulator/stats", timeout=10))
        assert stats["config"]["host_memory_gb"] == 64.0
        assert stats["counters"]["cached_tokens"] >= 192
