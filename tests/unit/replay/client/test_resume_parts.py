"""`--resume` of a `--workers` run killed with SIGKILL (issue 36): the lines its workers
wrote to their part files after the run's last merge are merged before the resume point is
read, so no trajectory they started is replayed again and no turn is recorded twice. The
random-kill property test is tests/integration/test_resume_kills.py."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from analysis.summary import summary_of_dir
from replay.client.config import EngineSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.rundir import read_journal, read_manifest
from replay.workload import WorkloadConfig

TURN = ("engine", "session", "trajectory", "agent", "turn", "priming")


def _plan(url: str, trace: Any, out: Path) -> RunPlan:
    wl = WorkloadConfig(sessions=4, duration_s=30.0, window=(0.0, 30.0))
    return RunPlan(
        engines=[EngineSpec(name="vllm", kind="vllm", url=url)],
        trace=trace,
        workload=wl,
        out_dir=out,
        backoff_s=0.05,
        scrape_interval_s=0.5,
        flush_interval_s=0.2,
        summarize=summary_of_dir,
        workers=2,
    )


def _as_if_killed_before_merging(out: Path, worker: int) -> int:
    """Move one worker's lines from the journal back to its part file: the state a run
    SIGKILLed between the worker's flush and the run's merge leaves."""
    journal = out / "requests.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    mine = [x for x in lines if orjson.loads(x).get("worker") == worker]
    journal.write_bytes(b"".join(x for x in lines if x not in mine))
    (out / "parts").mkdir()
    (out / "parts" / f"w{worker}.jsonl").write_bytes(b"".join(mine))
    return len(mine)


async def test_a_resume_after_a_kill_merges_the_parts_first_and_repeats_no_turn(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    h = helpers
    trace = h.trace_of(*(h.growing_trajectory(f"t{i}", turns=30, step=8) for i in range(4)))
    fake_engine.token_delay_s = 0.005
    out = tmp_path / "r"
    stop = asyncio.Event()
    first = asyncio.create_task(run_live(_plan(fake_engine.url, trace, out), stop=stop))
    while not (out / "requests.jsonl").exists() or len(read_journal(out)) < 10:
        await asyncio.sleep(0.2)
    stop.set()
    assert (await first).status == "interrupted"
    before = read_journal(out)
    assert any(r["worker"] == 1 and r["priming"] for r in before)
    moved = _as_if_killed_before_merging(out, 1)

    stop2 = asyncio.Event()
    plan = dataclasses.replace(_plan(fake_engine.url, trace, out), resume=True)
    again = asyncio.create_task(run_live(plan, stop=stop2))
    while len(read_journal(out)) < len(before) + 10:
        await asyncio.sleep(0.2)
    stop2.set()
    await again
    journal = read_journal(out)
    keys = Counter((r["worker"], r["seq"]) for r in journal)
    assert max(keys.values()) == 1, "a part file's line merged twice"
    assert {(r["worker"], r["seq"]) for r in before} <= set(keys), "a part file's line lost"
    turns = Counter(tuple(r[k] for k in TURN) for r in journal if r["status"] == "ok")
    assert [t for t, n in turns.items() if n > 1] == [], "a turn recorded twice"
    notes = " ".join(read_manifest(out).notes)
    assert f"{moved} records the workers wrote after the last merge were merged on resume" in notes
    assert not (out / "parts").exists()
