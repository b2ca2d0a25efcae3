"""`replay run --workers K --ray ADDRESS`: the run's client workers as Ray actors.

Each actor runs one `replay.client.workers` worker, the same code as a local worker
process, writing its part file into a folder of its own on its own machine
(`replay.owned_tmp`, removed when the actor ends; one a killed actor left is removed by the
next actor there). The run pulls the file's complete lines through Ray every
`PULL_INTERVAL_S` and appends them to the run directory's `parts/w<k>.jsonl`, where the pool
merges them as a local worker's (replay.client.pool): so a worker on another machine needs no
shared filesystem, and every request reaches the journal (percentiles stay exact). The run's
`parts/STOP` is passed on to the actor's own. A worker that dies loses what it had written
since the last pull, as a local one loses what it had not flushed. Ray is the harness's
distributed engine already (replay.sim.sweep places a sweep's simulations the same way). A
stopped run kills its actors (`ray.kill`).
A cluster `--ray local` started is stopped with every process it started when the pool
stops (`stop_local_cluster`), or else at the process's exit. A SIGKILLed run stops nothing:
its GCS and raylet die with it, but Ray's dashboard and runtime-env agents live on about a
minute, so the cluster's processes are written down once its workers are ready
(`record_local_cluster`, in a folder the run owns: `replay.owned_tmp`) and the next
`--ray local` stops those a killed run left, and says so.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from replay.client.workers import PARTS, STOP, WorkerSpec, last_seq, part_path, run_worker
from replay.owned_tmp import describe, list_processes, owned_tempdir, remove_orphans
from replay.rundir_journal import append_whole

# The folder that lists a `--ray local` cluster's processes (`replay.owned_tmp`).
TMP_PREFIX = "replay-ray-local-"
# An actor's own folder for its part file, on the machine it runs on.
WORKER_TMP_PREFIX = "replay-ray-worker-"
# How often the run pulls an actor's new lines: a local worker's flush interval.
PULL_INTERVAL_S = 0.25


class RayError(RuntimeError):
    """Ray is missing or its cluster cannot be reached; the message names --ray (a
    `replay.client.pool.WorkerError` too: the workers could not start)."""


# Whether this process started the Ray cluster it is connected to (`--ray local`).
_LOCAL_STARTED = False
_RECORD: Any = None  # the folder listing its processes (tempfile.TemporaryDirectory)


def connect(address: str) -> None:
    global _LOCAL_STARTED
    try:
        import ray
    except ImportError as e:
        raise RayError(
            "--ray: Ray is not installed; it is the optional extra: pip install 'agent-replay[ray]'"
        ) from e
    if ray.is_initialized():
        return
    if address == "local" and (removed := remove_orphans(TMP_PREFIX)):
        print(describe(removed, "Ray cluster"), file=sys.stderr, flush=True)
    try:
        ray.init(address=None if address == "local" else address, log_to_driver=False)
    except Exception as e:  # Ray raises several types for an unreachable cluster
        raise RayError(f"--ray {address}: cannot start or reach Ray ({e})") from e
    if address == "local":
        _LOCAL_STARTED = True
        atexit.register(stop_local_cluster)


def record_local_cluster() -> None:
    """Write down the processes of the cluster `--ray local` started here (its agents are
    up once a worker is), so the next `--ray local` can stop them should this process be
    SIGKILLed; nothing when this process started none."""
    global _RECORD
    if not _LOCAL_STARTED:
        return
    import ray

    if _RECORD is None:
        _RECORD = owned_tempdir(TMP_PREFIX)
    list_processes(Path(_RECORD.name), _cluster_processes(ray))


def stop_local_cluster() -> None:
    """Stop the cluster `--ray local` started here, with every process it started; nothing
    when this process started none. Without it the cluster ended only when the thread that
    started it did (Ray binds its GCS and raylet to that thread with PR_SET_PDEATHSIG: the
    run's pool starts from a worker thread), killed, and Ray's dashboard and runtime-env
    agents, the raylet's children, went on about a minute until they noticed (issue 36).
    The processes below the node's are found first, then killed once Ray is shut down."""
    global _LOCAL_STARTED, _RECORD
    if not _LOCAL_STARTED:
        return
    _LOCAL_STARTED = False
    import ray

    left = _cluster_processes(ray)
    with contextlib.suppress(Exception):
        ray.shutdown()
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if _RECORD is not None:
        with contextlib.suppress(OSError):
            _RECORD.cleanup()
        _RECORD = None


def _cluster_processes(ray: Any) -> set[int]:
    """The local node's processes (GCS, raylet, dashboard, monitors) and all below them
    (agents, workers); empty where Ray's node or /proc cannot be read."""
    from replay.engines.smg import descendants

    try:
        node = ray._private.worker._global_node
        roots = {proc.pid for _, proc in node.live_processes()}
    except Exception:  # Ray's internals moved: ray.shutdown() alone
        return set()
    out = set(roots)
    for pid in roots:
        with contextlib.suppress(OSError):
            out |= descendants(pid)
    out.discard(os.getpid())
    return out


class _Worker:
    """The actor: holds the spec until the run's start is known, then runs the worker,
    whose part file lies in a folder of the actor's own; `drain` hands its new complete
    lines to the run. Threaded (`max_concurrency`): `drain` and `stop` answer while `run`
    runs."""

    def __init__(self, spec: WorkerSpec):
        if removed := remove_orphans(WORKER_TMP_PREFIX):
            print(describe(removed, "Ray worker"), file=sys.stderr, flush=True)
        self._tmp = owned_tempdir(WORKER_TMP_PREFIX)
        self.folder = Path(self._tmp.name)
        self.spec = replace(spec, run_dir=str(self.folder))
        self._part = part_path(self.folder, spec.index)
        self._offset = 0

    def ready(self) -> int:
        return os.getpid()

    def where(self) -> str:
        return str(self._part)

    def run(self, timing: Any) -> int:
        return run_worker(replace(self.spec, **vars(timing)))

    def drain(self) -> bytes:
        """The complete lines the part file gained since the last call."""
        try:
            with open(self._part, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return b""
        cut = data.rfind(b"\n") + 1
        self._offset += cut
        return data[:cut]

    def stop(self) -> None:
        (self.folder / PARTS).mkdir(parents=True, exist_ok=True)
        (self.folder / PARTS / STOP).touch()

    def close(self) -> None:
        self._tmp.cleanup()


class RayHandle:
    """One worker actor, with the interface of a local worker process (replay.client.pool),
    and the thread that pulls its lines into the run directory's part file."""

    def __init__(self, spec: WorkerSpec):
        import ray

        actor_cls: Any = ray.remote(_Worker).options(num_cpus=0, max_concurrency=4)
        run_dir = Path(spec.run_dir)
        self.part = part_path(run_dir, spec.index)
        self.stop_file = run_dir / PARTS / STOP
        # The actor's part file starts empty: its `seq` goes on past the lines pulled here
        # already (a restarted worker), as a local worker's goes on in its own file.
        seq_start = max(spec.seq_start, last_seq(self.part) + 1)
        # No parent pid: an actor's parent is Ray's raylet, not this process.
        self.actor: Any = actor_cls.remote(replace(spec, parent_pid=None, seq_start=seq_start))
        self._run: Any = None
        self._pid: int | None = None
        self._code: int | None = None
        self._puller: threading.Thread | None = None

    def ready(self, timeout_s: float) -> bool:
        import ray

        try:
            self._pid = int(ray.get(self.actor.ready.remote(), timeout=timeout_s))
        except Exception:
            return False
        return True

    def go(self, timing: Any) -> None:
        self._run = self.actor.run.remote(timing)
        self._puller = threading.Thread(target=self._pull, name="ray-worker-pull", daemon=True)
        self._puller.start()

    def _pull(self) -> None:
        """Until the worker has ended: pass the run's STOP on, append the actor's new lines
        to the run's part file; after its end one last pull, then its folder is removed."""
        import ray

        stopped = False
        fd = os.open(self.part, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while True:
                done, _ = ray.wait([self._run], timeout=PULL_INTERVAL_S)
                if not stopped and self.stop_file.exists():
                    self.actor.stop.remote()
                    stopped = True
                try:
                    data = ray.get(self.actor.drain.remote(), timeout=30)
                except Exception:  # the actor is gone (killed, its node lost)
                    return
                if data:
                    append_whole(fd, self.part, data)
                if done:
                    with contextlib.suppress(Exception):
                        ray.get(self.actor.close.remote(), timeout=10)
                    return
        finally:
            os.close(fd)

    def exitcode(self) -> int | None:
        """The worker's exit code once it has ended and its lines are in the run's part
        file; None before."""
        import ray

        if self._code is not None:
            return self._code
        if self._run is None or self._puller is None or self._puller.is_alive():
            return None
        try:
            self._code = int(ray.get(self._run, timeout=0))
        except Exception:  # the actor died (killed, its node lost)
            self._code = -9
        return self._code

    def pid(self) -> int | None:
        return self._pid

    def join(self, timeout_s: float) -> None:
        if self._puller is not None:
            self._puller.join(timeout_s)

    def kill(self) -> None:
        import ray

        ray.kill(self.actor)
        if self._puller is not None:
            self._puller.join(35)


__all__ = ["RayError", "RayHandle", "connect", "stop_local_cluster"]
