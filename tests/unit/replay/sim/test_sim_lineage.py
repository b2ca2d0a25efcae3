"""The simulator's lineage: a request descends from the earlier request of its trajectory
with the longest common block prefix, not simply from the one just before (a side call)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replay.profiles import ModelProfile
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policies import make_policy
from replay.sim.driver import Sessions, SimRequest
from replay.sim.events import EventLoop
from replay.sim.executors import TraceExecutor
from replay.traces import load_trace
from replay.traces.lineage import Lineage
from replay.traces.model import Trajectory
from replay.workload import Workload, WorkloadConfig

BS = 64


def _write(tmp_path: Path, requests: list[tuple[int, int, list[int]]]) -> Path:
    """One Weka trajectory, one request a second: (prompt tokens, output tokens, hash ids)."""
    rows: list[dict[str, Any]] = [
        {"t": float(k), "in": n, "out": out, "hash_ids": ids}
        for k, (n, out, ids) in enumerate(requests)
    ]
    doc = {"id": "s", "block_size": BS, "hash_id_scope": "local", "requests": rows}
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    return path


def _trajectory(tmp_path: Path, requests: list[tuple[int, int, list[int]]]) -> Trajectory:
    return load_trace(_write(tmp_path, requests)).trajectories[0]


# main turn (4 full blocks + a partial one), a fresh side call, then the main turn again:
# it keeps the first turn's full blocks, its partial block re-hashed as it filled up.
MAIN_SIDE_MAIN = [
    (300, 20, [1, 2, 3, 4, 5]),
    (100, 10, [101, 102]),
    (400, 20, [1, 2, 3, 4, 6, 7, 8]),
]


def _replay(
    tmp_path: Path, profile: ModelProfile, policy: str, start_at: float
) -> list[SimRequest]:
    """The first conversation of a one-session replay of MAIN_SIDE_MAIN, as `simulate` runs it,
    starting at fraction `start_at` of the trajectory."""
    trace = load_trace(_write(tmp_path, MAIN_SIDE_MAIN))
    cfg = WorkloadConfig(
        sessions=1, duration_s=60.0, window=(0.0, 60.0), start_lo=start_at, start_hi=start_at
    )
    loop = EventLoop()
    cache = HybridCache(profile, make_policy(policy, profile))
    sessions = Sessions(
        loop, TraceExecutor(loop, cache, profile, lambda now: None), Workload(trace, cfg), 60.0
    )
    sessions.start()
    loop.run(60.0)
    first = sessions.requests[0].conv
    return [r for r in sessions.requests if r.conv == first]


@pytest.mark.parametrize("policy", ["vllm", "flashstate", "ideal"])
def test_the_main_turn_after_a_side_call_resumes_from_the_turn_before_it(
    tmp_path: Path, make_profile: Callable[..., ModelProfile], policy: str
) -> None:
    reqs = _replay(tmp_path, make_profile(blocks=400), policy, 0.0)
    assert [r.index for r in reqs] == [0, 1, 2] and all(r.status == "ok" for r in reqs)
    main, side, again = (r.info for r in reqs)
    assert main.ideal_pos == side.ideal_pos == 0  # the side call shares nothing: cold
    # Exact continuation of request 0: its prompt and its output (300 + 20 tokens).
    assert again.ideal_pos == 320 == reqs[2].ideal_hint
    assert 0 < again.resume_pos <= again.ideal_pos


def test_a_turn_whose_predecessor_was_never_replayed_is_cold(
    tmp_path: Path, make_profile: Callable[..., ModelProfile]
) -> None:
    # Start at request 2: the priming request is the side call, so request 0 (what request 2
    # extends) was never sent in this replay and nothing of it can be cached.
    reqs = _replay(tmp_path, make_profile(blocks=400), "ideal", 0.7)
    assert [(r.index, r.priming) for r in reqs] == [(1, True), (2, False)]
    assert reqs[1].info.ideal_pos == 0 and reqs[1].ideal_hint == 0


def test_predecessor_is_the_longest_block_prefix_latest_on_a_tie(tmp_path: Path) -> None:
    tr = _trajectory(
        tmp_path,
        [
            (300, 10, [1, 2, 3, 4, 5]),  # 0: first
            (400, 10, [1, 2, 3, 4, 6, 7, 8]),  # 1: continues 0
            (100, 10, [101, 102]),  # 2: side call
            (120, 10, [201, 202]),  # 3: another side call
            (500, 10, [1, 2, 3, 4, 6, 7, 9, 10]),  # 4: continues 1 (past both side calls)
            (200, 10, [1, 2, 11, 12]),  # 5: context edit: two blocks, shared by 0, 1 and 4
            (130, 10, [101, 103, 104]),  # 6: shares the side call's first block
        ],
    )
    lin = Lineage(tr)
    assert lin.predecessor(0) == (-1, 0)
    assert lin.predecessor(1) == (0, 4)
    assert lin.predecessor(2) == (-1, 0)  # fresh: shares no block with anything earlier
    assert lin.predecessor(3) == (-1, 0)
    assert lin.predecessor(4) == (1, 6)
    assert lin.predecessor(5) == (4, 2)  # a tie among 0, 1 and 4: the latest
    assert lin.predecessor(6) == (2, 1)
    assert lin.predecessor(4) == (1, 6)  # memoised answers are the same


def test_ids_that_are_not_prefix_chained_still_give_the_longest_prefix(tmp_path: Path) -> None:
    # Block id 7 at position 1 under two different first blocks: a probe on id 7 alone would
    # pick request 1; only request 0 really shares two blocks with request 3.
    tr = _trajectory(
        tmp_path,
        [
            (150, 10, [1, 7, 8]),
            (150, 10, [2, 7, 9]),
            (70, 10, [50, 51]),
            (200, 10, [1, 7, 30, 31]),
        ],
    )
    assert Lineage(tr).predecessor(3) == (0, 2)


def test_among_falls_back_to_the_closest_replayed_request(tmp_path: Path) -> None:
    """The predecessor when it was replayed; otherwise the replayed request sharing the most
    blocks (the latest on a tie), as the simulator and the live prompt builder both link."""
    tr = _trajectory(
        tmp_path,
        [
            (200, 10, [1, 2, 3]),  # 0
            (250, 10, [1, 2, 4, 5]),  # 1
            (100, 10, [1, 2]),  # 2: shares both blocks with 0 and 1
            (300, 10, [1, 2, 4, 5, 6]),  # 3: continues 1
            (80, 10, [60]),  # 4: shares nothing
        ],
    )
    lin = Lineage(tr)
    assert lin.among(3, [0, 1, 2]) == (1, 4)
    assert lin.among(3, [0, 2]) == (2, 2)  # 1 failed: a tie of 0 and 2, the latest
    assert lin.among(3, [0]) == (0, 2)
    assert lin.among(3, []) == (-1, 0)
    assert lin.among(4, [0, 1, 2, 3]) == (-1, 0)


def test_last_links_name_the_last_request_continuing_each(tmp_path: Path) -> None:
    tr = _trajectory(
        tmp_path,
        [
            (200, 10, [1, 2, 3]),  # 0
            (60, 10, [70]),  # 1: side call
            (300, 10, [1, 2, 3, 4]),  # 2: continues 0
            (60, 10, [70, 71]),  # 3: continues the side call
            (350, 10, [1, 2, 3, 4, 5]),  # 4: continues 2
            (250, 10, [1, 2, 3, 9]),  # 5: an edit, continues 4 (a tie with 2: the latest)
        ],
    )
    lin = Lineage(tr)
    assert list(lin.last_links(0)) == [2, 3, 4, -1, 5, -1]
    # Replayed from request 2: request 3's predecessor (1) was never sent, and nothing
    # replayed shares its first block.
    assert list(lin.last_links(2)) == [-1, -1, 4, -1, 5, -1]
