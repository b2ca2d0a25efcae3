"""`replay run --workers K --ray ADDRESS`: the run's client workers as Ray actors.

Each actor runs one `replay.client.workers` worker, the same code as a local worker
process, and writes its part file into the run directory, so a worker on another machine
needs the run directory on a filesystem both machines share (a local Ray, `--ray local`,
shares this machine's). Ray is the harness's distributed engine already (replay.sim.sweep
places a sweep's simulations the same way). A stopped run kills its actors (`ray.kill`).
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
from dataclasses import replace
from pathlib import Path
from typing import Any

from replay.client.workers import WorkerSpec, run_worker
from replay.owned_tmp import describe, list_processes, owned_tempdir, remove_orphans

# The folder that lists a `--ray local` cluster's processes (`replay.owned_tmp`).
TMP_PREFIX = "replay-ray-local-"


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
    """The actor: holds the spec until the run's start is known, then runs the worker."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec

    def ready(self) -> int:
        return os.getpid()

    def run(self, timing: Any) -> int:
        return run_worker(replace(self.spec, **vars(timing)))


class RayHandle:
    """One worker actor, with the interface of a local worker process (replay.client.pool)."""

    def __init__(self, spec: WorkerSpec):
        import ray

        actor_cls = ray.remote(num_cpus=0)(_Worker)
        # No parent pid: an actor's parent is Ray's raylet, not this process.
        self.actor: Any = actor_cls.remote(replace(spec, parent_pid=None))
        self._run: Any = None
        self._pid: int | None = None
        self._code: int | None = None

    def ready(self, timeout_s: float) -> bool:
        import ray

        try:
            self._pid = int(ray.get(self.actor.ready.remote(), timeout=timeout_s))
        except Exception:
            return False
        return True

    def go(self, timing: Any) -> None:
        self._run = self.actor.run.remote(timing)

    def exitcode(self) -> int | None:
        import ray

        if self._code is not None:
            return self._code
        if self._run is None:
            return None
        done, _ = ray.wait([self._run], timeout=0)
        if not done:
            return None
        try:
            self._code = int(ray.get(done[0]))
        except Exception:  # the actor died (killed, its node lost)
            self._code = -9
        return self._code

    def pid(self) -> int | None:
        return self._pid

    def join(self, timeout_s: float) -> None:
        import ray

        if self._run is not None:
            ray.wait([self._run], timeout=timeout_s)

    def kill(self) -> None:
        import ray

        ray.kill(self.actor)


__all__ = ["RayError", "RayHandle", "connect", "stop_local_cluster"]
