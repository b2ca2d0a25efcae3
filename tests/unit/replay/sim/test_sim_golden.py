"""Pinned results: every policy's per-request resume positions, miss split and eviction
counts on one fixed, seeded request stream, compared with a stored copy.

The simulator's speed work (issue 14) rewrites the cache's hot paths; this pins what they
compute so a rewrite cannot silently change a result. A deliberate change of behaviour
(a policy rule, a fix) rewrites the stored copy, with the reason in the commit:

    REPLAY_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/replay/sim/test_sim_golden.py
"""

from __future__ import annotations

import heapq
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replay.sim.cache.hybrid import Handle
from replay.sim.cache.keys import LineagePrefix
from replay.sim.cache.policies import POLICY_NAMES, make_policy
from tests.unit.replay.sim.conftest import tiny_profile

GOLDEN = Path(__file__).with_name("golden_cache_results.json")
# The native policies run an engine's own code in a worker; their cross-check tests pin them.
POLICIES = [p for p in POLICY_NAMES if not p.endswith("-native")]
SIZES = (40, 80)  # cache blocks of 16 tokens: both evict, the smaller one hard


def options(name: str, blocks: int) -> dict[str, Any]:
    """Policy options scaled to the tiny profile (16-token blocks, 32-token chunks)."""
    if name == "sglang":
        # 10 slots: SGLang runs at most slots // 5 requests at once (two here)
        return {"state_slots": 10, "kv_tokens": 16 * (blocks - 20), "grid": 8}
    if name == "dense":
        return {"every": 48}
    return {}


def stream(n: int = 160, seed: int = 7) -> list[tuple[int, float, int, int, float, float]]:
    """(parent, share, new tokens, output tokens, gap, hold) per request: six agent-like
    conversations that mostly extend their latest request, with side calls (no parent),
    context edits (part of the parent kept) and branches off older requests."""
    rng = np.random.default_rng(seed)
    latest: dict[int, int] = {}
    out: list[tuple[int, float, int, int, float, float]] = []
    length: list[int] = []  # prompt + output tokens, as `run` builds them
    for i in range(n):
        conv = int(rng.integers(6))
        r = float(rng.random())
        parent = latest.get(conv, -1)
        if parent >= 0 and length[parent] > 400:
            parent = -1  # a long conversation ends; a new one starts in its slot
        share = 1.0
        if r < 0.1:
            parent = -1  # a side call
        elif r < 0.2 and parent >= 0:
            share = float(rng.uniform(0.3, 0.9))  # a context edit
        elif r < 0.3 and i > 0:
            parent = int(rng.integers(i))  # a branch off an older request
            share = float(rng.uniform(0.5, 1.0))
        if r >= 0.1:
            latest[conv] = i
        extra, n_out = int(rng.integers(1, 90)), int(rng.integers(0, 40))
        out.append(
            (parent, share, extra, n_out, float(rng.exponential(0.6)), float(rng.uniform(0.2, 4)))
        )
        shared = int(length[parent] * share) if parent >= 0 else 0
        length.append(shared + extra + n_out)
    return out


def run(name: str, blocks: int) -> dict[str, Any]:
    prof = tiny_profile(blocks=blocks)
    cache = make_policy(name, prof, **options(name, blocks)).make_cache(prof)
    seqs: list[LineagePrefix] = []
    ends: list[tuple[float, int, Handle, LineagePrefix, int]] = []
    rows: list[list[int]] = []
    now = 0.0
    for i, (parent, share, extra, out, gap, hold) in enumerate(stream()):
        now += gap
        while ends and ends[0][0] <= now:
            t, _, h, seq, total = heapq.heappop(ends)
            cache.finish(h, seq, total, t)
        par = seqs[parent] if parent >= 0 else None
        shared = int(par.length * share) if par is not None else 0
        n = shared + extra
        seq = LineagePrefix(i + 1, n + out, par, shared)
        seqs.append(seq)
        info = cache.lookup(seq, n, now)
        h = cache.begin(seq, n, info, now)
        ok = cache.reserve(h, n + out, now)
        if ok:
            cache.prefill_done(h, now)
            heapq.heappush(ends, (now + hold, i, h, seq, n + out))
        else:
            cache.abort(h, now)
        rows.append(
            [
                info.resume_pos,
                info.ideal_pos,
                info.checkpoint_pos,
                info.resident_pos,
                info.kv_pos,
                int(ok),
                cache.used_blocks,
            ]
        )
    while ends:
        t, _, h, seq, total = heapq.heappop(ends)
        cache.finish(h, seq, total, t)
    return {
        "requests": rows,
        "evictions": cache.evictions,
        "admission_refusals": cache.admission_refusals,
        "resident_blocks": cache.resident_blocks,
        "resident_states": cache.resident_states,
    }


def compute() -> dict[str, Any]:
    return {f"{name}@{blocks}": run(name, blocks) for name in POLICIES for blocks in SIZES}


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    got = compute()
    if os.environ.get("REPLAY_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, separators=(",", ":")) + "\n")
        pytest.skip(f"rewrote {GOLDEN.name} (REPLAY_UPDATE_GOLDEN=1)")
    return got


@pytest.mark.parametrize("name", POLICIES)
def test_per_request_results_are_pinned(results: dict[str, Any], name: str) -> None:
    want = json.loads(GOLDEN.read_text())
    for blocks in SIZES:
        key = f"{name}@{blocks}"
        got, ref = results[key], want[key]
        cols = ["resume", "ideal", "checkpoint", "resident", "kv", "reserved", "used_blocks"]
        for i, (a, b) in enumerate(zip(got["requests"], ref["requests"], strict=True)):
            assert a == b, (
                f"{key}, request {i}: {dict(zip(cols, a, strict=True))} != pinned {dict(zip(cols, b, strict=True))}"
            )
        for field in ("evictions", "admission_refusals", "resident_blocks", "resident_states"):
            assert got[field] == ref[field], f"{key}: {field} {got[field]} != pinned {ref[field]}"


def test_the_pinned_stream_exercises_eviction_and_reuse(results: dict[str, Any]) -> None:
    """Not a vacuous pin: under the small cache every bounded policy evicts, and requests
    resume from cached states."""
    for name in POLICIES:
        r = results[f"{name}@{SIZES[0]}"]
        if name != "ideal":
            assert r["evictions"] > 0, name
        assert sum(1 for row in r["requests"] if row[0] > 0) > 10, name
