"""Nothing hangs: every policy, with trace and engine timing, finishes on traces whose
timestamps are hostile (large floats, exact multiples of the idle time, gaps of 1e-9 s and
1e5 s, equal timestamps, many-digit fractions), each run under a wall-clock limit.

A hang is a test failure, not a stuck suite: the runs go in a child process with a timeout,
which prints each policy as it starts, so a timeout names the policy and the timing.

The first test pins the case that hung on the real corpus (issue 22): a leaf-last timer
filed at `last_use + idle_s` and popped as due, while `now - last_use >= idle_s` said it was
not idle yet, re-filed the state at the same time forever."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replay.sim.cache.eviction import GreedyDualSize
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import LineagePrefix
from replay.sim.cache.policies import POLICY_NAMES, make_policy
from tests.child import run_child
from tests.unit.replay.sim.conftest import tiny_profile

# vllm-native runs vLLM's own code in a worker; its own tests drive it.
POLICIES = [p for p in POLICY_NAMES if not p.endswith("-native")]
LIMIT_S = 240  # the whole child process: ~40 short runs that each take well under a second


def test_a_due_demotion_timer_always_finds_its_state_idle() -> None:
    # In a child process with a limit: the regression this pins is an endless loop.
    code = "from tests.unit.replay.sim.test_sim_progress import due_timer_case; due_timer_case()"
    proc = run_child(code, [], 60, "GreedyDualSize._demote at a timer's due time")
    assert proc.returncode == 0, proc.stderr[-3000:]


def due_timer_case() -> None:
    # The floats of the hang: the timer's due time is last_use + 60, yet now - last_use
    # is 59.99999999999977 at that due time.
    last_use = 1989.619621
    due = last_use + 60.0
    assert due - last_use < 60.0  # the disagreement itself, so this test keeps its point
    profile = tiny_profile(blocks=40)
    cache = HybridCache(profile, make_policy("flashstate", profile, leaf_idle_s=60.0))
    gds = cache.eviction
    assert isinstance(gds, GreedyDualSize) and gds.tiers and gds.idle_s == 60.0
    seq = LineagePrefix(1, 40, None, 0)
    info = cache.lookup(seq, 32, last_use)
    h = cache.begin(seq, 32, info, last_use)
    assert cache.reserve(h, 40, last_use)
    cache.prefill_done(h, last_use)
    cache.finish(h, seq, 40, last_use)
    leaf = max((s for s in cache.live_resident.values() if s.resident), key=lambda s: s.pos)
    assert not leaf.inner and leaf.last_use == last_use
    assert [t for t, _, s in gds.timers if s is leaf] == [due]
    gds._demote(due)  # returns: the timer is consumed and the leaf is demoted
    assert not gds.timers or gds.timers[0][0] > due
    assert gds.is_inner(leaf, due)


def session(
    sid: str, times: list[float], rng: np.random.Generator, think_s: float | None = None
) -> dict[str, Any]:
    """An agent-like session at the given request times: each turn extends the last by a
    tool result, now and then a context edit, with api_time missing on some turns
    (`think_s`: every tool wait exactly that long, api_time a many-digit fraction)."""
    reqs: list[dict[str, Any]] = []
    ids: list[int] = []
    nxt = 1
    n = 0
    for i, t in enumerate(times):
        if ids and rng.random() < 0.1:  # a context edit keeps a leading part
            ids = ids[: len(ids) // 2]
            n = len(ids) * 64
        grow = int(rng.integers(2_000, 40_000))
        n += grow
        while len(ids) < -(-n // 64):
            ids.append(nxt)
            nxt += 1
        r: dict[str, Any] = {
            "t": t,
            "type": "n",
            "in": n,
            "out": int(rng.integers(50, 3_000)),
            "hash_ids": list(ids),
            "stop": "tool_use" if i < len(times) - 1 else "end_turn",
        }
        if think_s is not None:
            r["think_time"] = think_s
            r["api_time"] = float(rng.random() * 30)
        elif rng.random() < 0.9:
            r["api_time"] = float(rng.choice([0.0, 1e-9, 3.0, 60.0, float(rng.random() * 30)]))
        reqs.append(r)
    return {"id": sid, "block_size": 64, "hash_id_scope": "local", "requests": reqs}


def hostile_times(kind: str, k: int, rng: np.random.Generator) -> list[float]:
    if kind == "large":  # large absolute floats: ulp ≈ 1e-7 s
        return [1e9 + 60.0 * i + float(rng.random()) for i in range(k)]
    if kind == "idle-multiples":  # every gap exactly the leaf-idle time
        return [60.0 * i for i in range(k)]
    if kind == "tiny":
        return [1e-9 * i for i in range(k)]
    if kind == "huge":
        return [1e5 * i for i in range(k)]
    if kind == "equal":
        return [42.0] * k
    # many-digit fractions around the idle time, the shape of the real corpus's hang
    gaps = rng.choice([59.999999999, 60.0, 60.000000001, 1989.619621, 1e-9, 4.9], size=k)
    return np.cumsum(gaps).tolist()


# "idle-exact": every tool wait is exactly the leaf-idle time (60 s) after a request that
# ended at a many-digit time, so the cache is asked at exactly last_use + 60: the shape that
# hung on the real corpus (the old comparison found ~2% of those states not yet idle).
KINDS = ["large", "idle-multiples", "tiny", "huge", "equal", "fractions", "idle-exact"]


@pytest.fixture(scope="module")
def hostile_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    rng = np.random.default_rng(22)
    out = {}
    for kind in KINDS:
        path = tmp_path_factory.mktemp("hostile") / f"{kind}.jsonl"
        think = 60.0 if kind == "idle-exact" else None
        lines = [
            json.dumps(session(f"{kind}-{j}", hostile_times(kind, 20, rng), rng, think))
            for j in range(4)
        ]
        path.write_text("\n".join(lines) + "\n")
        out[kind] = path
    return out


CHILD = """
import sys
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
trace = load_trace(sys.argv[1])
for timing in ("trace", "engine"):
    for policy in sys.argv[2].split(","):
        print("start", policy, timing, flush=True)
        # 300 blocks of 4,352 tokens: four sessions of these contexts (~390 blocks) evict
        res = simulate(trace, SimConfig(policy, 4, timing=timing, duration_s=2400.0,
                                        window=(400.0, 2400.0), capacity_blocks=300))
        assert res.summary["all_requests"] > 0, (policy, timing)
print("all done", flush=True)
"""


@pytest.mark.parametrize("kind", KINDS)
def test_every_policy_finishes_on_hostile_timestamps(
    hostile_traces: dict[str, Path], kind: str
) -> None:
    args = [str(hostile_traces[kind]), ",".join(POLICIES)]
    proc = run_child(CHILD, args, LIMIT_S, f"{kind} timestamps")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "all done" in proc.stdout
