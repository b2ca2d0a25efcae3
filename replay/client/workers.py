"""One client process of `replay run --workers K`: it owns whole sessions and writes its own
part file of the run directory.

Worker k of K replays the session slots s with s mod K = k (whole sessions: every turn and
subagent of a slot's trajectories), for every engine, with the same workload, salt and
prompts as a one-process run would (the workload and the token space are seeded per slot).
It appends its records to `parts/w<k>.jsonl` — that file has this one writer — as whole
lines, each stamped with `worker` and a per-file `seq`, so the run merging the parts into
`requests.jsonl` (replay.client.pool) takes every line exactly once, also after a restart or
a resume. The worker ends at the run's end (its in-flight requests recorded `cancelled`),
when the run writes `parts/STOP`, on SIGTERM, or with its parent (replay.lifeline).

Times are seconds from the run's start: a worker on the run's machine shares its monotonic
clock (`t0_ns`); one on another machine (Ray) places the start by wall clock (`epoch_ns`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from replay.client.fleet import FleetSpec, build_client_fleet
from replay.client.session import EngineSessions, SessionPolicy
from replay.engines.adapters import Limits, make_adapter
from replay.lifeline import PARENT_ENV, die_with_parent
from replay.prompts import PromptBuilder, TokenSpace
from replay.records import RequestRecord
from replay.rundir_journal import append_whole
from replay.traces.model import Trace
from replay.workload import Workload, WorkloadConfig

PARTS = "parts"
STOP = "STOP"


def part_path(run_dir: Path, index: int) -> Path:
    return Path(run_dir) / PARTS / f"w{index}.jsonl"


def slots_of(index: int, workers: int, sessions: int) -> list[int]:
    """The session slots worker `index` of `workers` owns (every workers-th one)."""
    return list(range(index, sessions, workers))


@dataclass(frozen=True)
class WorkerEngine:
    """One engine as a worker drives it (resolved by the run's preflight)."""

    name: str
    kind: str
    url: str
    model: str | None
    context_tokens: int | None
    vocab_size: int
    adapter_options: dict[str, Any] = field(default_factory=dict)
    # Replicas this worker routes over itself (its own router and load book: K workers are
    # K router instances, each seeing its own sessions' load), or a router in front.
    fleet: FleetSpec | None = None
    # A hybrid engine in vLLM's align mode: the block of its checkpoint rule (preflight).
    align_block: int | None = None


@dataclass(frozen=True)
class WorkerSpec:
    """Everything one worker process needs (picklable: it crosses a process or Ray)."""

    index: int
    workers: int
    engines: list[WorkerEngine]
    trace: Trace
    workload: WorkloadConfig
    salt: int
    run_dir: str
    t0_ns: int  # the run's start on the run machine's perf_counter clock
    epoch_ns: int  # ... and on the wall clock (for a worker on another machine)
    end_epoch_ns: int  # when the run ends (wall clock)
    host: str
    policy: SessionPolicy
    limits: Limits
    first_ordinals: dict[int, int] = field(default_factory=dict)
    flush_interval_s: float = 0.25
    parent_pid: int | None = None
    # The first `seq` to write: past what the run's journal holds of this worker already (a
    # resumed run, whose part files were merged and removed), so no line repeats a key.
    seq_start: int = 0


def last_seq(path: Path) -> int:
    """The highest `seq` in a part file (-1 when it has none): a restarted worker goes on."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return -1
    best = -1
    for line in data.split(b"\n"):
        if line:
            with contextlib.suppress(orjson.JSONDecodeError):
                row = orjson.loads(line)
                if isinstance(row, dict) and isinstance(row.get("seq"), int):
                    best = max(best, row["seq"])
    return best


class PartWriter:
    """The one writer of a worker's part file: whole lines, appended on `flush()`."""

    def __init__(self, path: Path, worker: int, seq_start: int = 0):
        self.path = path
        self.worker = worker
        path.parent.mkdir(parents=True, exist_ok=True)
        self._seq = max(last_seq(path) + 1, seq_start)
        self._pending: list[bytes] = []
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.written = 0

    def add(self, rec: RequestRecord) -> None:
        row = rec.as_dict()
        row["worker"], row["seq"] = self.worker, self._seq
        self._seq += 1
        self._pending.append(orjson.dumps(row) + b"\n")

    def flush(self) -> None:
        if self._pending:
            append_whole(self._fd, self.path, b"".join(self._pending))
            self.written += len(self._pending)
            self._pending.clear()

    def close(self) -> None:
        self.flush()
        os.close(self._fd)


def _t0(spec: WorkerSpec) -> int:
    if spec.host == socket.gethostname():
        return spec.t0_ns  # CLOCK_MONOTONIC is one clock for every process of a machine
    return time.perf_counter_ns() - (time.time_ns() - spec.epoch_ns)


async def _serve(spec: WorkerSpec) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)  # not on a Ray worker's thread
    run_dir = Path(spec.run_dir)
    out = PartWriter(part_path(run_dir, spec.index), spec.index, spec.seq_start)
    workload = Workload(spec.trace, spec.workload)
    t0 = _t0(spec)
    slots = slots_of(spec.index, spec.workers, spec.workload.sessions)
    runners = []
    for e in spec.engines:
        adapter = make_adapter(e.kind, e.url, e.model, limits=spec.limits, **e.adapter_options)
        fleet = None
        if e.fleet is not None:
            fleet = build_client_fleet(
                e.name, e.kind, e.fleet, e.model, limits=spec.limits,
                adapter_options=e.adapter_options, seed=spec.workload.seed,
            )  # fmt: skip
        runners.append(
            EngineSessions(
                e.name,
                adapter,
                workload,
                PromptBuilder(TokenSpace(e.vocab_size, spec.salt)),
                t0_ns=t0,
                emit=out.add,
                context_tokens=e.context_tokens,
                policy=spec.policy,
                first_ordinals=spec.first_ordinals,
                slots=slots,
                fleet=fleet,
                align_block=e.align_block,
            )
        )
    tasks = [asyncio.create_task(r.run()) for r in runners]
    stop_file = run_dir / PARTS / STOP
    code = 0
    try:
        while not stop.is_set():
            if time.time_ns() >= spec.end_epoch_ns or stop_file.exists():
                break
            if any(t.done() for t in tasks):
                code = 3  # a session crashed: the run records it as failed
                break
            out.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), spec.flush_interval_s)
    finally:
        for t in tasks:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException) and not isinstance(res, asyncio.CancelledError):
                print(f"worker {spec.index}: {type(res).__name__}: {res}", file=sys.stderr)
                code = 3
        for runner in runners:
            await runner.close()
        out.close()
    return code


def run_worker(spec: WorkerSpec) -> int:
    """A worker's entry point (a spawned process or a Ray task); its exit code."""
    if spec.parent_pid is not None:
        os.environ[PARENT_ENV] = str(spec.parent_pid)
        die_with_parent()
    sys.setswitchinterval(0.001)  # see run_live: huge prompts are built in threads
    return asyncio.run(_serve(spec))


def worker_process_main(spec: WorkerSpec) -> None:
    """`multiprocessing` target: exit with the worker's code."""
    sys.exit(run_worker(spec))


__all__ = [
    "PARTS",
    "STOP",
    "PartWriter",
    "WorkerEngine",
    "WorkerSpec",
    "last_seq",
    "part_path",
    "run_worker",
    "slots_of",
    "worker_process_main",
]
