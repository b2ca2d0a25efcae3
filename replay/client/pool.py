"""The run's side of `replay run --workers K`: start K client processes (here, or as Ray
actors with `--ray ADDRESS`), merge their part files into the run's journal, restart one that
dies, and leave none behind.

Merging: each worker appends whole lines to its own `parts/w<k>.jsonl` (replay.client
.workers); the run tails every part file from the byte offset it has read to, takes the
complete lines, and hands each to the run writer (the one writer of `requests.jsonl`, which
rebuilds `requests.parquet` from it: the contract is unchanged) unless its `(worker, seq)`
was taken already — so a line is merged once, also across a restart or a `--resume` (whose
journal seeds the taken set). A worker that dies mid-run (killed, crashed) loses only what it
had not flushed (at most `flush_interval_s`) and its requests in flight, which it never
recorded; its part file is merged to the last whole line, and it is started again for the
same slots, each slot going on with its next trajectory (as `--resume` does: the interrupted
one's generated ids are gone), up to `max_restarts` times; then the run fails.

A Ray actor's part file lies on its own machine; its handle pulls the lines into the run
directory's part file (replay.client.ray_workers), so the merge below is the same for both.

Stopping: the run writes `parts/STOP` (every worker polls it; a Ray actor's handle passes it
on to the actor's own folder), waits `grace_s`, then kills what is left and
waits for it (a Ray actor: `ray.kill`). Workers also die with the run's process
(replay.lifeline), so a SIGKILLed run leaves no worker behind.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

from replay.client.workers import PARTS, STOP, WorkerSpec, part_path, run_worker, slots_of


class WorkerError(RuntimeError):
    """Workers could not be started (or Ray reached); the message says which and why."""


@dataclass(frozen=True)
class Timing:
    """When the run started and ends, sent to each worker once every worker is ready."""

    t0_ns: int
    epoch_ns: int
    end_epoch_ns: int


def _child(spec: WorkerSpec, conn: Connection) -> None:
    """A local worker process: say ready (imports done, spec unpickled), wait for the
    start, run; exit with the worker's code."""
    conn.send("ready")
    timing: Timing = conn.recv()
    conn.close()
    code = run_worker(replace(spec, **vars(timing)))
    os._exit(code)  # no atexit work in a spawned child: the part file is closed already


class PartTail:
    """Reads the complete lines a part file gained since the last call."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        cut = data.rfind(b"\n") + 1
        self.offset += cut
        rows = []
        for line in data[:cut].split(b"\n"):
            if line:
                with contextlib.suppress(orjson.JSONDecodeError):
                    row = orjson.loads(line)
                    if isinstance(row, dict):
                        rows.append(row)
        return rows


def start_key(row: dict[str, Any]) -> tuple[str, int] | None:
    """(engine, slot) when the row is the first request of a top-level trajectory (the rule
    of orchestrate.resume_point), else None."""
    first = row.get("priming") or row.get("turn") == 0
    if row.get("agent") == "main" and row.get("attempt") == 0 and first:
        return str(row["engine"]), int(row["session"])
    return None


class _Local:
    def __init__(self, spec: WorkerSpec):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_child, args=(spec, child), daemon=True)
        self.proc.start()
        child.close()

    def ready(self, timeout_s: float) -> bool:
        if self.conn.poll(timeout_s):
            with contextlib.suppress(EOFError, OSError):
                return bool(self.conn.recv() == "ready")
        return False

    def go(self, timing: Timing) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(timing)

    def exitcode(self) -> int | None:
        return self.proc.exitcode

    def pid(self) -> int | None:
        return self.proc.pid

    def join(self, timeout_s: float) -> None:
        self.proc.join(timeout_s)

    def kill(self) -> None:
        if self.proc.exitcode is None:
            self.proc.kill()
        self.proc.join(10)
        self.conn.close()


class WorkerPool:
    """K workers of one run (see the module docstring)."""

    def __init__(
        self,
        specs: list[WorkerSpec],
        *,
        ray_address: str | None = None,
        max_restarts: int = 3,
        taken: Iterable[dict[str, Any]] = (),
        ready_timeout_s: float = 120.0,
        grace_s: float = 20.0,
    ):
        self.specs = specs
        self.ray_address = ray_address
        self.max_restarts = max_restarts
        self.ready_timeout_s = ready_timeout_s
        self.grace_s = grace_s
        self.run_dir = Path(specs[0].run_dir)
        self.tails = {s.index: PartTail(part_path(self.run_dir, s.index)) for s in specs}
        self.taken: set[tuple[int, int]] = set()
        self.starts: dict[tuple[str, int], int] = {}
        for row in taken:  # a resumed run's journal: merged already
            self._take(row)
        self.handles: dict[int, Any] = {}
        self.restarts: dict[int, int] = {}
        self.notes: list[str] = []
        self.timing: Timing | None = None
        self.failed: str | None = None
        self._stopping = False
        self._lock = threading.Lock()
        self._buffer: list[dict[str, Any]] = []  # rows merged by a restart, not yet handed on

    # bookkeeping -----------------------------------------------------------------------
    def _take(self, row: dict[str, Any]) -> bool:
        w, s = row.get("worker"), row.get("seq")
        if isinstance(w, int) and isinstance(s, int):
            if (w, s) in self.taken:
                return False
            self.taken.add((w, s))
        if (key := start_key(row)) is not None:
            self.starts[key] = self.starts.get(key, 0) + 1
        return True

    def poll(self) -> list[dict[str, Any]]:
        """The rows the part files gained, each once."""
        rows, self._buffer = self._buffer, []
        rows.extend(r for t in self.tails.values() for r in t.read() if self._take(r))
        return rows

    def ordinals(self, spec: WorkerSpec) -> dict[int, int]:
        """Per slot of this worker, the next assignment (the trajectories it started)."""
        slots = slots_of(spec.index, spec.workers, spec.workload.sessions)
        engines = [e.name for e in spec.engines]
        return {s: max(self.starts.get((e, s), 0) for e in engines) for s in slots}

    # lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start every worker and wait until each is ready (imports done); WorkerError."""
        (self.run_dir / PARTS).mkdir(parents=True, exist_ok=True)
        (self.run_dir / PARTS / STOP).unlink(missing_ok=True)
        if self.ray_address:
            from replay.client.ray_workers import RayError, RayHandle, connect

            try:
                connect(self.ray_address)
            except RayError as e:
                raise WorkerError(str(e)) from None
            self.handles = {s.index: RayHandle(s) for s in self.specs}
        else:
            self.handles = {s.index: _Local(s) for s in self.specs}
        deadline = time.monotonic() + self.ready_timeout_s
        for i, h in self.handles.items():
            if not h.ready(max(deadline - time.monotonic(), 0.1)):
                self.stop()
                raise WorkerError(
                    f"client worker {i} did not start within {self.ready_timeout_s:g} s "
                    f"(exit code {h.exitcode()}); see its error above"
                )
        if self.ray_address:
            from replay.client.ray_workers import record_local_cluster

            record_local_cluster()  # a SIGKILLed run's agents: the next --ray local stops them

    def go(self, timing: Timing) -> None:
        self.timing = timing
        for h in self.handles.values():
            h.go(timing)

    def check(self) -> None:
        """Restart workers that died before the run's end; set `failed` past the limit or
        when a worker ended with a crashed session (exit code 3)."""
        with self._lock:  # a restart and `stop` never interleave (see `stop`)
            if self._stopping or self.timing is None:
                return
            if time.time_ns() >= self.timing.end_epoch_ns:
                return  # ending by themselves
            for spec in self.specs:
                h = self.handles[spec.index]
                code = h.exitcode()
                if code is None:
                    continue
                n = self.restarts.get(spec.index, 0)
                if code == 3 or n >= self.max_restarts:
                    why = "a session crashed" if code == 3 else f"died {n + 1} times"
                    self.failed = f"client worker {spec.index} {why} (exit code {code})"
                    return
                self.restarts[spec.index] = n + 1
                self.notes.append(
                    f"client worker {spec.index} (pid {h.pid()}) ended with exit code {code} "
                    f"mid-run; its records up to its last flush were kept and it was started "
                    f"again, each of its sessions going on with its next trajectory"
                )
                self._restart(spec)

    def _restart(self, spec: WorkerSpec) -> None:
        # Merge its part file whole before counting the trajectories its slots started.
        self._buffer.extend(r for r in self.tails[spec.index].read() if self._take(r))
        fresh = replace(spec, first_ordinals=self.ordinals(spec))
        if self.ray_address:
            from replay.client.ray_workers import RayHandle

            h: Any = RayHandle(fresh)
        else:
            h = _Local(fresh)
        self.handles[spec.index] = h
        if h.ready(self.ready_timeout_s) and self.timing is not None:
            h.go(self.timing)

    def stop(self) -> None:
        """Ask every worker to end, wait up to `grace_s`, kill what is left; wait for all.

        `check` runs in a thread of its own (the merge loop's), so a restart may be under
        way when the run ends: stop waits for it under the lock, so the worker it started
        is among the handles stopped here. Without that, a worker started after this loop
        outlived the run and wrote a part file after the parts were merged and removed."""
        with self._lock:
            self._stopping = True
        with contextlib.suppress(OSError):
            (self.run_dir / PARTS / STOP).touch()
        deadline = time.monotonic() + self.grace_s
        for h in self.handles.values():
            h.join(max(deadline - time.monotonic(), 0.0))
        for h in self.handles.values():
            h.kill()
        if self.ray_address:  # a cluster `--ray local` started ends with the pool (issue 36)
            from replay.client.ray_workers import stop_local_cluster

            stop_local_cluster()

    def pids(self) -> list[int]:
        return [p for h in self.handles.values() if (p := h.pid()) is not None]


__all__ = ["PartTail", "Timing", "WorkerError", "WorkerPool", "start_key"]
