"""aiperf's theoretical prefix-cache counts per trace (replay.traces.prefix, issue 35 point 2).

The vectorised counts are checked against the plain rule, written here from its definition:
one seen-set per trace (the root and its subagents), requests in the trace's time order, a
request's hits the leading run of its hash ids already seen, then all its ids join the set.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from replay.traces.loader import load_trace
from replay.traces.model import Trajectory
from replay.traces.prefix import prefix_blocks
from replay.workload import Workload, WorkloadConfig

SAMPLE = Path(__file__).resolve().parents[4] / "replay" / "data" / "sample-weka.jsonl.gz"


def _plain(root: Trajectory) -> dict[str, tuple[list[int], list[int]]]:
    starts = {root.id: 0.0}
    stack = [root]
    while stack:
        tr = stack.pop()
        for sub in tr.subagents:
            starts[sub.id] = starts[tr.id] + float(sub.spawn_t)
            stack.append(sub)
    trajs = list(root.walk())
    order = sorted(
        (starts[tr.id] + float(tr.t[i]), k, i)
        for k, tr in enumerate(trajs)
        for i in range(tr.num_requests)
    )
    out = {tr.id: ([0] * tr.num_requests, [0] * tr.num_requests) for tr in trajs}
    seen: set[int] = set()
    for _, k, i in order:
        tr = trajs[k]
        ids = [int(b) for b in tr.blocks(i)]
        run = 0
        for b in ids:
            if b not in seen:
                break
            run += 1
        out[tr.id][0][i], out[tr.id][1][i] = run, len(ids)
        seen.update(ids)
    return out


def _req(t: float, ids: list[int]) -> dict[str, Any]:
    return {"t": t, "type": "s", "in": 64 * len(ids), "out": 4, "api_time": 1.0, "hash_ids": ids}


def test_counts_follow_the_rule_by_hand(write_jsonl: Callable[..., Path]) -> None:
    """A root and a subagent share one seen-set in trace time; a new block ends the run,
    and an id repeated inside one request is not a hit for that request."""
    session = {
        "id": "s",
        "block_size": 64,
        "hash_id_scope": "local",
        "requests": [
            _req(0.0, [1, 2, 3]),
            {
                "t": 5.0,
                "type": "subagent",
                "agent_id": "a",
                "requests": [_req(5.0, [1, 2, 9]), _req(20.0, [1, 2, 9, 4])],
            },
            _req(10.0, [1, 2, 3, 4]),  # 4 is new here: 3 hits
            _req(30.0, [1, 2, 9, 7, 7]),  # 9 came from the subagent at t=5; the 2nd 7 is no hit
        ],
    }
    trace = load_trace(write_jsonl([session]))
    got = prefix_blocks(trace.trajectories[0])
    assert [list(v) for v in got["s"]] == [[0, 3, 3], [3, 4, 5]]
    assert [list(v) for v in got["s/a"]] == [[2, 4], [3, 4]]
    assert {k: tuple(map(list, v)) for k, v in got.items()} == _plain(trace.trajectories[0])


def test_counts_match_the_plain_rule_on_the_sample() -> None:
    trace = load_trace(SAMPLE)
    for root in trace.trajectories:
        got = {k: (list(h), list(n)) for k, (h, n) in prefix_blocks(root).items()}
        assert got == _plain(root), root.id


def test_the_workload_answers_per_request() -> None:
    trace = load_trace(SAMPLE)
    workload = Workload(trace, WorkloadConfig(sessions=2))
    root = trace.trajectories[0]
    sub = next(iter(root.walk())) if not root.subagents else root.subagents[0]
    want = prefix_blocks(root)
    for tr in (root, sub):
        hits, totals = want[tr.id]
        assert workload.prefix_blocks(tr, tr.num_requests - 1) == (
            int(hits[-1]),
            int(totals[-1]),
        )
