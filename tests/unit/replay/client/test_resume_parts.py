"""`--resume` of a `--workers` run killed with SIGKILL (issue 36): the lines its workers
wrote to their part files after the run's last merge are merged before the resume point is
read, so no trajectory they started is replayed again and no turn is recorded twice (as
`scripts/probe_resume_kills.py` counts them: a slot replaying the same trajectory again as its
next ordinal is no duplicate). The random-kill property test is
tests/integration/test_resume_kills.py."""

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
from replay.workload import Workload, WorkloadConfig
from tests.scripts import load_script

probe = load_script("probe_resume_kills")


def _drawn(trace: Any) -> Any:
    workload = Workload(trace, _workload())

    def drawn(slot: int, ordinal: int) -> tuple[str, int]:
        a = workload.assignment(slot, ordinal)
        return a.trajectory.id, a.first_index

    return drawn


def _workload() -> WorkloadConfig:
    return WorkloadConfig(sessions=4, duration_s=30.0, window=(0.0, 30.0))


def _plan(url: str, trace: Any, out: Path) -> RunPlan:
    return RunPlan(
        engines=[EngineSpec(name="vllm", kind="vllm", url=url)],
        trace=trace,
        workload=_workload(),
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
    assert probe.repeated_turns(journal, _drawn(trace)) == 0, "a turn recorded twice"
    notes = " ".join(read_manifest(out).notes)
    assert f"{moved} records the workers wrote after the last merge were merged on resume" in notes
    assert not (out / "parts").exists()


def _row(slot: int, tid: str, turn: int, t: float, priming: bool = False) -> dict[str, Any]:
    return {"engine": "vllm", "session": slot, "trajectory": tid, "agent": "main",
            "turn": turn, "priming": priming, "attempt": 0, "status": "ok", "sent_s": t}  # fmt: skip


def test_the_duplicate_count_tells_a_replayed_ordinal_from_a_slot_drawing_a_trajectory_again() -> (
    None
):
    draws = {(0, 0): ("t2", 17), (0, 1): ("t2", 8)}

    def drawn(slot: int, ordinal: int) -> tuple[str, int]:
        return draws.get((slot, ordinal), ("none", -1))

    first = [_row(0, "t2", 17, 0.1, True), *(_row(0, "t2", k, 0.1 + k / 100) for k in (18, 19, 20))]
    # The slot's next ordinal draws t2 again, from turn 8: turns 18-20 again are no duplicate.
    again = [_row(0, "t2", 8, 1.0, True), *(_row(0, "t2", k, 1.0 + k / 100) for k in range(9, 22))]
    assert probe.repeated_turns(first + again, drawn) == 0
    # A resume that replays ordinal 0 from its start records its turns twice.
    replayed = [_row(0, "t2", 17, 0.5, True), *(_row(0, "t2", k, 0.5 + k / 100) for k in (18, 19))]
    assert probe.repeated_turns(first + replayed + again, drawn) == 3
    # So does a turn recorded ok twice within one assignment (a merged line twice).
    assert probe.repeated_turns([*first, _row(0, "t2", 19, 0.3)], drawn) == 1
