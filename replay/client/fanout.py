"""The live run's glue to its client workers (`--workers K`, `--ray ADDRESS`): the worker
specs from the resolved plan, the loop that merges their records into the run writer and
the live panel's stats, and the trajectory counts the manifest keeps.

The run (replay.client.orchestrate.run_live) stays the one writer of `requests.jsonl` and
of everything else in the run directory; the workers only send requests and write their
own part files (replay.client.workers, replay.client.pool).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.client.plan import RunPlan
from replay.client.pool import PartTail, Timing, WorkerPool
from replay.client.session import LiveStats, SessionPolicy
from replay.client.workers import PARTS, WorkerEngine, WorkerSpec
from replay.records import RECORD_FIELDS, RequestRecord
from replay.rundir import RunWriter, read_journal
from replay.rundir_models import WorkloadCounts
from replay.workload import Workload

if TYPE_CHECKING:
    from replay.engines.preflight import PreflightReport


class WorkerFailed(RuntimeError):
    """A client worker failed past its restarts (or a session in it crashed)."""


def uses_workers(plan: RunPlan) -> bool:
    return plan.workers > 1 or plan.ray_address is not None


def build_pool(
    plan: RunPlan,
    reports: list[PreflightReport],
    salt: int,
    first_ordinals: dict[int, int],
    policy: SessionPolicy,
) -> WorkerPool:
    engines = [
        WorkerEngine(
            name=s.name,
            kind=s.kind,
            url=s.url or "",
            model=r.model,
            context_tokens=s.context_tokens or r.context_tokens,
            vocab_size=s.vocab_size,
            adapter_options=s.adapter_options(),
            fleet=plan.fleets.get(s.name),
            align_block=r.hybrid.align_block if r.hybrid is not None else None,
        )
        for s, r in zip(plan.engines, reports, strict=True)
    ]
    k = max(plan.workers, 1)
    taken = read_journal(plan.out_dir) if plan.resume else []
    next_seq: dict[int, int] = {}
    for row in taken:
        w, s = row.get("worker"), row.get("seq")
        if isinstance(w, int) and isinstance(s, int):
            next_seq[w] = max(next_seq.get(w, 0), s + 1)
    specs = [
        WorkerSpec(
            index=i,
            workers=k,
            engines=engines,
            trace=plan.trace,
            workload=plan.workload,
            salt=salt,
            run_dir=str(Path(plan.out_dir).absolute()),
            t0_ns=0,
            epoch_ns=0,
            end_epoch_ns=0,
            host=socket.gethostname(),
            policy=policy,
            limits=plan.limits,
            first_ordinals={s: n for s, n in first_ordinals.items() if s % k == i},
            parent_pid=os.getpid(),
            seq_start=next_seq.get(i, 0),
        )
        for i in range(k)
    ]
    return WorkerPool(specs, ray_address=plan.ray_address, taken=taken)


def timing(t0_ns: int, duration_wall_s: float) -> Timing:
    """The run's start (`t0_ns` on this machine's perf_counter clock) on both clocks."""
    epoch = time.time_ns() - (time.perf_counter_ns() - t0_ns)
    return Timing(t0_ns, epoch, epoch + int(duration_wall_s * 1e9))


def _observe(stats: dict[str, LiveStats], rows: list[dict[str, Any]]) -> None:
    now = time.perf_counter_ns()
    for row in rows:
        st = stats.get(str(row.get("engine")))
        if st is not None:
            st.observe(RequestRecord(**{k: row[k] for k in RECORD_FIELDS if k in row}), now)


async def merge_loop(
    pool: WorkerPool, writer: RunWriter, stats: dict[str, LiveStats], interval_s: float
) -> None:
    """Merge the workers' records every interval and restart a worker that died; raises
    WorkerFailed when one fails for good (the run ends `failed`)."""
    while True:
        await asyncio.to_thread(pool.check)
        # A poll moves the part files' read offsets: cancelled while it runs (the run's end),
        # the lines it read are merged before the cancellation goes on, or they were lost
        # (`finish` reads on from the moved offsets).
        polled = asyncio.ensure_future(asyncio.to_thread(pool.poll))
        try:
            rows = await asyncio.shield(polled)
        except asyncio.CancelledError:
            _merge(writer, stats, await polled)
            raise
        _merge(writer, stats, rows)
        if pool.failed:
            raise WorkerFailed(pool.failed)
        await asyncio.sleep(interval_s)


def _merge(writer: RunWriter, stats: dict[str, LiveStats], rows: list[dict[str, Any]]) -> None:
    for row in rows:
        writer.add(row)
    _observe(stats, rows)


async def finish(
    pool: WorkerPool, writer: RunWriter, stats: dict[str, LiveStats], keep_parts: bool
) -> None:
    """Stop the workers (none is left running), merge the rest of their records, note the
    restarts; the part files go once the journal holds every line of them."""
    await asyncio.to_thread(pool.stop)
    _merge(writer, stats, await asyncio.to_thread(pool.poll))
    writer.flush()
    if pool.notes:
        writer.update_manifest(notes=[*writer.manifest.notes, *pool.notes])
    if not keep_parts and writer.disk_full is None:
        shutil.rmtree(Path(writer.run_dir) / PARTS, ignore_errors=True)


def fold_parts(writer: RunWriter) -> int:
    """Before a resumed run reads where it stopped: merge into the journal the lines its
    workers' part files gained after the last merge (a run killed with SIGKILL never
    merged them), each `(worker, seq)` once, then remove the part files. Returns the lines
    merged. Without this the resume point, read from the journal, missed the trajectories
    those lines started, and the resumed workers replayed them again (issue 36)."""
    parts = Path(writer.run_dir) / PARTS
    if not parts.is_dir():
        return 0
    taken = {(r.get("worker"), r.get("seq")) for r in read_journal(writer.run_dir)}
    rows = []
    for path in sorted(parts.glob("w*.jsonl")):
        for row in PartTail(path).read():
            key = (row.get("worker"), row.get("seq"))
            if isinstance(key[0], int) and isinstance(key[1], int) and key not in taken:
                taken.add(key)
                rows.append(row)
    for row in rows:
        writer.add(row)
    writer.flush()
    if rows:
        note = f"{len(rows)} records the workers wrote after the last merge were merged on resume"
        writer.update_manifest(notes=[*writer.manifest.notes, note])
    if writer.disk_full is None:
        shutil.rmtree(parts, ignore_errors=True)
    return len(rows)


def worker_counts(pool: WorkerPool, workload: Workload, engines: list[str]) -> WorkloadCounts:
    """Trajectories started per engine, and how many replayed one again (from the records:
    the workers' own counters died with them)."""
    assignments: dict[str, int] = {}
    reused: dict[str, int] = {}
    for name in engines:
        n = r = 0
        for slot in range(workload.cfg.sessions):
            k = pool.starts.get((name, slot), 0)
            n += k
            r += sum(workload.assignment(slot, o).reuse > 0 for o in range(k))
        assignments[name], reused[name] = n, r
    return WorkloadCounts(
        trajectories=len(workload.trajectories), assignments=assignments, reused_assignments=reused
    )


__all__ = [
    "WorkerFailed",
    "build_pool",
    "finish",
    "fold_parts",
    "merge_loop",
    "timing",
    "uses_workers",
    "worker_counts",
]
