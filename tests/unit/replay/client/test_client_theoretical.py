"""A live run's records carry aiperf's theoretical prefix-cache counts of their turns (issue
35, point 2): the trace's per-trace counts (replay.traces.prefix), a subagent's included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.summary import summary_of_dir
from replay.client.config import EngineSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.rundir import read_requests
from replay.traces.prefix import prefix_blocks
from replay.workload import WorkloadConfig


async def test_live_records_carry_the_traces_theoretical_counts(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    h = helpers
    child = h.make_trajectory(
        "p/sub",
        [150, 200],
        [4, 4],
        [[*range(1, 8), 700, 701, 702], [*range(1, 8), 700, 701, 702, 703]],
        namespace="p",
        agent_id="sub",
        parent_id="p",
        spawn_index=1,
    )
    parent = h.make_trajectory(
        "p",
        [112, 180, 245],
        [8, 8, 8],
        [list(range(1, 8)), [*range(1, 12), 900], [*range(1, 16), 901]],
        gaps=[0.0, 0.3, 0.3],
        subagents=(child,),
    )
    wl = WorkloadConfig(sessions=1, duration_s=1.0, window=(0.0, 1.0), start_lo=0, start_hi=0)
    plan = RunPlan(
        engines=[EngineSpec(name="vllm", kind="vllm", url=fake_engine.url)],
        trace=h.trace_of(parent),
        workload=wl,
        out_dir=tmp_path / "r",
        backoff_s=0.05,
        scrape_interval_s=0.5,
        flush_interval_s=0.2,
        summarize=summary_of_dir,
    )
    await run_live(plan)
    df = read_requests(tmp_path / "r")
    want = prefix_blocks(parent)
    assert {"p", "p/sub"} <= set(df["trajectory"])
    for row in df.itertuples():
        hits, totals = want[row.trajectory]
        got = (row.theoretical_hit_blocks, row.theoretical_blocks)
        assert got == (hits[row.turn], totals[row.turn]), row
