"""Live runs end to end against real HTTP engines on 127.0.0.1: exact rewriting, subagents,
faults and retries, an engine that goes away and comes back, overflow, cancellation at the
end, Ctrl-C, resume, and the same seeded assignment on every engine."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from analysis.summary import summary_of_dir
from replay.client.config import EngineSpec
from replay.client.orchestrate import PreflightFailed, RunPlan, check_engines, run_live
from replay.rundir import read_manifest, read_requests
from replay.workload import WorkloadConfig


def plan_for(
    urls: dict[str, tuple[str, str]],
    trace: Any,
    out: Path,
    *,
    sessions: int = 2,
    duration_s: float = 1.5,
    **kw: Any,
) -> RunPlan:
    wl = kw.pop("workload", None) or WorkloadConfig(
        sessions=sessions, duration_s=duration_s, window=(0.0, duration_s)
    )
    specs = [EngineSpec(name=n, kind=k, url=u) for n, (k, u) in urls.items()]
    kw.setdefault("backoff_s", 0.05)
    kw.setdefault("scrape_interval_s", 0.5)
    kw.setdefault("flush_interval_s", 0.2)
    kw.setdefault("summarize", summary_of_dir)  # what `replay run` hands the executor
    return RunPlan(engines=specs, trace=trace, workload=wl, out_dir=out, **kw)


def assignments(df: pd.DataFrame) -> list[pd.DataFrame]:
    """Records of each replayed trajectory in order (split at priming / first turns)."""
    out = []
    for _, g in df.sort_values("scheduled_s").groupby(["engine", "session", "agent"]):
        starts = (g["priming"] | (g["turn"] <= g["turn"].shift(fill_value=-1))).cumsum()
        out.extend(part for _, part in g.groupby(starts))
    return out


async def test_continuation_turns_hit_everything_the_engine_computed(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    h = helpers
    trace = h.trace_of(h.growing_trajectory("a", turns=6), h.growing_trajectory("b", turns=7))
    outcome = await run_live(plan_for({"vllm": ("vllm", fake_engine.url)}, trace, tmp_path / "r"))
    assert outcome.status == "completed"
    df = read_requests(tmp_path / "r")
    ok = df[df.status == "ok"]
    assert len(ok) > 20
    tr = {t.id: t for t in trace.trajectories}
    checked = 0
    for part in assignments(ok):
        rows = part.to_dict("records")
        for prev, cur in itertools.pairwise(rows):
            assert cur["prompt_tokens"] == tr[cur["trajectory"]].input_tokens[cur["turn"]]
            floor = (prev["prompt_tokens"] + prev["output_tokens"] - 1) // 16 * 16
            assert cur["cached_tokens"] >= floor, (prev, cur)
            assert cur["ideal_cached_tokens"] >= prev["prompt_tokens"] + prev["output_tokens"] - 1
            checked += 1
    assert checked > 10
    man = read_manifest(tmp_path / "r")
    assert man.status == "completed" and man.engines[0].block_size == 16
    summary = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    eng = summary["engines"]["vllm"]
    assert eng["hit_rate"] > 0.5 and eng["ideal_hit_rate"] >= eng["hit_rate"]
    assert eng["counter_hit_rate"] is not None  # the engine's counters over the window


async def test_each_prompt_is_the_previous_prompt_plus_generated_ids(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(helpers.growing_trajectory("a", turns=5))
    await run_live(
        plan_for(
            {"vllm": ("vllm", fake_engine.url)}, trace, tmp_path / "r", sessions=1, duration_s=0.6
        )
    )
    prompts = [r["prompt"] for r in fake_engine.requests if r["max_tokens"] == 8]
    pairs = 0
    for prev, cur in itertools.pairwise(prompts):
        if len(cur) > len(prev):  # the same trajectory continuing (not a new assignment)
            gen = fake_engine.gen_ids(prev, 8)
            assert cur[: len(prev) + 8] == prev + gen
            pairs += 1
    assert pairs >= 3


async def test_subagent_first_prompt_shares_the_parents_blocks(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    h = helpers
    parent_blocks = [list(range(1, 8)), [*list(range(1, 12)), 900], [*list(range(1, 16)), 901]]
    child = h.make_trajectory(
        "p/sub",
        [150, 200],
        [4, 4],
        [[*list(range(1, 8)), 700, 701, 702], [*list(range(1, 8)), 700, 701, 702, 703]],
        namespace="p",
        agent_id="sub",
        parent_id="p",
        spawn_index=1,
    )
    parent = h.make_trajectory(
        "p", [112, 180, 245], [8, 8, 8], parent_blocks, gaps=[0.0, 0.3, 0.3], subagents=(child,)
    )
    wl = WorkloadConfig(sessions=1, duration_s=1.0, window=(0.0, 1.0), start_lo=0, start_hi=0)
    await run_live(
        plan_for(
            {"vllm": ("vllm", fake_engine.url)}, h.trace_of(parent), tmp_path / "r", workload=wl
        )
    )
    df = read_requests(tmp_path / "r")
    sub = df[(df.agent == "sub") & (df.turn == 0)].iloc[0]
    assert sub["trajectory"] == "p/sub"
    # Seven shared blocks of 16 tokens (the parent's first request was exactly them).
    assert sub["cached_tokens"] >= 7 * 16 - 16
    assert sub["ideal_cached_tokens"] >= 7 * 16


@pytest.mark.parametrize("mode", ["inline", "skip"])
async def test_subagents_inline_run_in_the_parents_slot_or_are_skipped(
    fake_engine: Any, helpers: Any, tmp_path: Path, mode: str
) -> None:
    h = helpers
    child = h.make_trajectory(
        "p/sub",
        [150, 200, 220],
        [4, 4, 4],
        [[1, 2, 3, 700], [1, 2, 3, 700, 701], [1, 2, 3, 700, 701, 702]],
        namespace="p",
        agent_id="sub",
        parent_id="p",
        spawn_index=1,
        gaps=[0.0, 0.1, 0.1],
    )
    parent = h.make_trajectory(
        "p",
        [112, 180, 245],
        [8, 8, 8],
        [list(range(1, 8)), list(range(1, 12)), list(range(1, 16))],
        gaps=[0.0, 0.05, 0.05],
        subagents=(child,),
    )
    wl = WorkloadConfig(
        sessions=1, duration_s=3.0, window=(0.0, 3.0), start_lo=0, start_hi=0, subagents=mode
    )  # type: ignore[arg-type]
    out = tmp_path / "r"
    await run_live(
        plan_for({"vllm": ("vllm", fake_engine.url)}, h.trace_of(parent), out, workload=wl)
    )
    df = read_requests(out).sort_values("sent_s")
    assert read_manifest(out).config.subagents == mode
    if mode == "skip":
        assert set(df.agent) == {"main"}
        return
    # One slot, inline: every request is sent after the one before it came back, and the
    # parent's turn after the branch point follows the subagent's three turns.
    sent, done = df.sent_s.tolist(), df.done_s.tolist()
    assert all(b >= a - 1e-6 for a, b in zip(done, sent[1:], strict=False))
    order = list(zip(df.agent, df.turn, strict=True))
    i = order.index(("main", 1))
    assert order[i - 3 : i] == [("sub", 0), ("sub", 1), ("sub", 2)]


async def test_a_failed_turn_is_retried_and_recorded_each_time(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(helpers.growing_trajectory("a", turns=4))
    plan = plan_for(
        {"vllm": ("vllm", fake_engine.url)}, trace, tmp_path / "r", sessions=1, duration_s=1.0
    )
    reports = await check_engines(plan)
    fake_engine.faults = ["500", "reset"]
    await run_live(plan, reports=reports)
    df = read_requests(tmp_path / "r").sort_values("scheduled_s")
    first = df.iloc[:3].to_dict("records")
    assert [r["attempt"] for r in first] == [0, 1, 2]
    assert [r["status"] for r in first] == ["error", "error", "ok"]
    assert "HTTP 500" in first[0]["error"]
    assert first[0]["turn"] == first[1]["turn"] == first[2]["turn"]


async def test_exhausted_retries_abandon_the_trajectory_and_the_run_goes_on(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(
        helpers.growing_trajectory("a", turns=4), helpers.growing_trajectory("b", turns=4)
    )
    plan = plan_for(
        {"vllm": ("vllm", fake_engine.url)},
        trace,
        tmp_path / "r",
        sessions=1,
        duration_s=1.0,
        retries=2,
    )
    reports = await check_engines(plan)
    fake_engine.faults = ["500"] * 3
    out = await run_live(plan, reports=reports)
    df = read_requests(tmp_path / "r").sort_values("scheduled_s")
    assert list(df.status[:3]) == ["error"] * 3
    assert df.status[3:].isin(["ok", "cancelled"]).all() and len(df) > 6
    assert out.stats["vllm"].abandoned == 1


async def test_an_engine_that_goes_away_is_picked_up_when_it_returns(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(helpers.growing_trajectory("a", turns=6))
    port = fake_engine.port
    plan = plan_for(
        {"vllm": ("vllm", fake_engine.url)},
        trace,
        tmp_path / "r",
        sessions=2,
        duration_s=2.5,
        retries=1,
    )
    task = asyncio.create_task(run_live(plan))
    await asyncio.sleep(0.6)
    await fake_engine.stop()
    await asyncio.sleep(0.5)
    await fake_engine.start(port)
    outcome = await task
    assert outcome.status == "completed"
    df = read_requests(tmp_path / "r")
    errors = df[df.status == "error"]
    assert len(errors) > 0
    back = df[(df.status == "ok") & (df.scheduled_s > errors.scheduled_s.max())]
    assert len(back) > 3


async def test_prompts_over_the_context_are_not_sent_and_are_flagged(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    fake_engine.max_model_len = 400
    trace = helpers.trace_of(helpers.growing_trajectory("a", turns=8, first=200, step=60))
    sent_before = len(fake_engine.requests)
    await run_live(
        plan_for(
            {"vllm": ("vllm", fake_engine.url)}, trace, tmp_path / "r", sessions=1, duration_s=0.8
        )
    )
    df = read_requests(tmp_path / "r")
    over = df[df.status == "overflow"]
    assert len(over) > 0
    assert (over.prompt_tokens + over.expected_output_tokens > 400).all()
    assert "exceed the engine's context of 400 tokens" in over.error.iloc[0]
    assert all(
        len(r["prompt"]) + r["max_tokens"] <= 400 for r in fake_engine.requests[sent_before:]
    )
    summary = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    assert summary["engines"]["vllm"]["overflow_flagged"] is True


async def test_requests_in_flight_at_the_end_are_recorded_cancelled(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    fake_engine.token_delay_s = 0.1  # 8 tokens: 0.8 s a request
    trace = helpers.trace_of(helpers.growing_trajectory("a", turns=4))
    await run_live(
        plan_for(
            {"vllm": ("vllm", fake_engine.url)}, trace, tmp_path / "r", sessions=2, duration_s=0.5
        )
    )
    df = read_requests(tmp_path / "r")
    assert (df.status == "cancelled").sum() == 2
    c = df[df.status == "cancelled"].iloc[0]
    assert c["sent_s"] is not None and c["error"] == "cancelled at the end of the run"


async def test_stop_interrupts_cleanly_and_resume_continues_the_run(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(
        helpers.growing_trajectory("a", turns=5), helpers.growing_trajectory("b", turns=5)
    )
    stop = asyncio.Event()
    plan = plan_for({"vllm": ("vllm", fake_engine.url)}, trace, tmp_path / "r", duration_s=2.0)
    task = asyncio.create_task(run_live(plan, stop=stop))
    await asyncio.sleep(0.5)
    stop.set()
    first = await task
    assert first.status == "interrupted"
    assert read_manifest(tmp_path / "r").status == "interrupted"
    assert (tmp_path / "r" / "summary.json").exists()
    n1 = len(read_requests(tmp_path / "r"))
    last1 = read_requests(tmp_path / "r").scheduled_s.max()
    plan = dataclasses.replace(plan, resume=True)
    second = await run_live(plan)
    assert second.status == "completed"
    df = read_requests(tmp_path / "r")
    assert len(df) > n1
    later = df.iloc[n1:]
    assert later.scheduled_s.min() >= last1 - 0.05  # the clock continues, not restarts
    man = read_manifest(tmp_path / "r")
    assert man.status == "completed" and len(man.segments) == 2


async def test_a_failing_preflight_stops_the_run_before_anything_is_written(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    fake_engine.report_cached = False
    trace = helpers.trace_of(helpers.growing_trajectory("a"))
    with pytest.raises(PreflightFailed, match="--enable-prompt-tokens-details"):
        await run_live(plan_for({"vllm": ("vllm", fake_engine.url)}, trace, tmp_path / "r"))
    assert not (tmp_path / "r").exists()


async def test_every_engine_gets_the_same_seeded_assignment(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    h = helpers
    other = h.FakeEngine()
    await other.start()
    try:
        trace = h.trace_of(*(h.growing_trajectory(f"t{k}", turns=5) for k in range(5)))
        await run_live(
            plan_for(
                {"vllm": ("vllm", fake_engine.url), "sglang": ("sglang", other.url)},
                trace,
                tmp_path / "r",
                sessions=3,
                duration_s=1.0,
            )
        )
    finally:
        await other.stop()
    df = read_requests(tmp_path / "r")
    firsts = {}
    for eng, g in df.groupby("engine"):
        firsts[eng] = [
            tuple(p.iloc[0][["session", "trajectory", "turn"]]) for p in assignments(g)[:0] or []
        ]
        per_session = g.sort_values("scheduled_s").groupby("session").first()
        firsts[eng] = sorted(
            zip(per_session.index, per_session.trajectory, per_session.turn, strict=True)
        )
    assert firsts["vllm"] == firsts["sglang"]
    assert set(df.engine) == {"vllm", "sglang"}
    metrics = pd.read_parquet(tmp_path / "r" / "server_metrics.parquet")
    assert "vllm:prefix_cache_hits_total" in set(metrics.metric)


async def test_records_are_readable_while_the_run_goes_on(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(helpers.growing_trajectory("a", turns=6))
    plan = plan_for(
        {"vllm": ("vllm", fake_engine.url)},
        trace,
        tmp_path / "r",
        duration_s=2.0,
        parquet_interval_s=0.3,
    )
    task = asyncio.create_task(run_live(plan))
    await asyncio.sleep(1.2)
    mid = pd.read_parquet(tmp_path / "r" / "requests.parquet")  # rebuilt mid-run, off the loop
    assert len(mid) > 0 and not task.done()
    assert read_manifest(tmp_path / "r").status == "running"
    await task
    assert len(read_requests(tmp_path / "r")) >= len(mid)
