"""`trace_stats` on a hand-built trace whose every figure is known."""

from __future__ import annotations

import math

import numpy as np

from replay.traces.model import Trace, Trajectory
from replay.traces.stats import prefix_relations, tool_gaps, trace_stats


def traj(
    tid: str,
    blocks: list[list[int]],
    inp: list[int],
    out: list[int],
    t: list[float],
    api: list[float],
    think: list[float],
    **kw: object,
) -> Trajectory:
    n = len(blocks)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in blocks])
    return Trajectory(
        id=tid,
        block_size=64,
        hash_scope="local",
        namespace=tid.split("/")[0],
        t=np.array(t, dtype=float),
        input_tokens=np.array(inp, dtype=np.int64),
        output_tokens=np.array(out, dtype=np.int64),
        api_time=np.array(api, dtype=float),
        think_time=np.array(think, dtype=float),
        ttft=np.full(n, np.nan),
        request_type=np.ones(n, dtype=np.int8),
        stop=np.zeros(n, dtype=np.int8),
        hash_offsets=offsets,
        hash_ids=np.array([i for b in blocks for i in b], dtype=np.int64),
        **kw,  # type: ignore[arg-type]
    )


NAN = math.nan
SUB = traj(
    "r/a",
    [[1, 2], [1, 2, 3]],
    [128, 150],
    [10, 30],
    [0, 400],
    [1, 1],
    [NAN, NAN],
    parent_id="r",
    agent_id="a",
    spawn_t=5,
    spawn_index=2,
)
ROOT = traj(
    "r",
    [
        [1, 2, 3],  # first: 150 tokens -> 2 full blocks + 1 partial
        [1, 2, 4, 5],  # continuation: shares both full blocks (the partial one changed)
        [1, 2, 4, 5, 6],  # continuation: 4 full blocks of [1,2,4,5] at in=256
        [1, 9],  # context edit: shares block 1 only
        [7, 8],  # fresh
    ],
    [150, 256, 300, 100, 120],
    [100, 200, 300, 400, 500],
    [0, 10, 20, 30, 1000],
    [2, 3, NAN, 1, 1],
    [NAN, NAN, 5, NAN, NAN],
    subagents=(SUB,),
)
TRACE = Trace([ROOT], "hand", "weka", 64)


def test_prefix_relations() -> None:
    assert prefix_relations(ROOT).tolist() == [0, 1, 1, 2, 3]
    assert prefix_relations(SUB).tolist() == [0, 1]


def test_tool_gaps_follow_gap_before() -> None:
    # 10-0-2, 20-10-3 -> think_time 5, 30-20-(nan->0), 1000-30-1
    assert tool_gaps(ROOT).tolist() == [8.0, 5.0, 10.0, 969.0]
    assert tool_gaps(ROOT).tolist() == [ROOT.gap_before(i) for i in range(1, 5)]
    assert tool_gaps(SUB).tolist() == [399.0]


def test_trace_stats_known_answers() -> None:
    s = trace_stats(TRACE, 300.0)
    assert s["trajectories"] == 1 and s["subagents"] == 1 and s["max_subagent_depth"] == 1
    assert s["requests"] == 7 and s["top_level_requests"] == 5 and s["subagent_requests"] == 2
    prompts = [150, 256, 300, 100, 120, 128, 150]
    assert s["mean_prompt_tokens"] == np.mean(prompts) and s["median_prompt_tokens"] == 150
    assert (
        s["mean_output_tokens"] == np.mean([100, 200, 300, 400, 500, 10, 30])
        and s["median_output_tokens"] == 200
    )
    # Later requests: 4 in the root, 1 in the subagent; 3 continuations, 1 edit, 1 fresh.
    assert (
        s["continuation_share"] == 3 / 5
        and s["context_edit_share"] == 1 / 5
        and s["fresh_share"] == 1 / 5
    )
    # Gaps 8, 5, 10, 969, 399: two above the 300 s cap.
    assert s["tool_gaps"] == 5 and s["tool_gap_over_cap_share"] == 2 / 5
    assert s["tool_gap_p50_s"] == 10.0 and s["tool_gap_max_s"] == 969.0
    assert s["hash_ids"] == 16 + 5 and s["load_issues"] == 0


def test_over_cap_share_follows_the_cap() -> None:
    assert trace_stats(TRACE, gap_cap_s=1000.0)["tool_gap_over_cap_share"] == 0.0
    assert trace_stats(TRACE, gap_cap_s=9.0)["tool_gap_over_cap_share"] == 3 / 5
