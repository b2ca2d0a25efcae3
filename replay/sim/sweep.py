"""A sweep: every policy × session count × seed, run in this process, in worker processes,
or on a Ray cluster, each written as a run directory, plus one `summary.csv`.

Workers only simulate; the calling process writes every run directory, so a Ray cluster
needs no shared filesystem. Worker processes are forked after the trace is loaded, so a
full-size corpus is parsed once, not once per worker.
"""

from __future__ import annotations

import contextlib
import csv
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from replay.fleet import DEFAULT_ROUTER
from replay.lifeline import bind_to_parent
from replay.sim.fleet import FleetConfig, simulate_fleet
from replay.sim.measures import SUMMARY_COLUMNS
from replay.sim.runner import SimConfig, SimResult, simulate, write_run
from replay.traces.model import Trace


class RayError(RuntimeError):
    """Ray is missing or its cluster cannot be reached; the message says which."""


# The trace a forked worker simulates (set in the parent just before the pool forks).
_WORKER_TRACE: Trace | None = None


def plan(
    policies: Sequence[str],
    sessions: Sequence[int],
    seeds: int,
    *,
    replicas: Sequence[int] = (),
    routers: Sequence[str] = (),
    router_opts: dict[str, Any] | None = None,
    **common: Any,
) -> list[SimConfig]:
    """Every combination, policies outermost (runs of one policy finish together), for
    scripts and tests (`replay simulate` resolves a spec per point and runs
    `replay.runspec.sweep.config_of`'s config of each). With
    `replicas` and `routers` each point is a fleet (`replay.sim.fleet`) of every replica
    count × router; without, one engine per run."""
    if not replicas and not routers:
        return [
            SimConfig(policy=p, sessions=n, seed=s, **common)
            for p in policies
            for n in sessions
            for s in range(seeds)
        ]
    return [
        FleetConfig(
            policy=p,
            sessions=n,
            seed=s,
            replicas=k,
            router=r,
            router_opts=dict(router_opts or {}),
            **common,
        )
        for p in policies
        for k in (replicas or (1,))
        for r in (routers or (DEFAULT_ROUTER,))
        for n in sessions
        for s in range(seeds)
    ]


def run_one(trace: Trace, cfg: SimConfig) -> SimResult:
    """One point: a fleet's or a single engine's simulation."""
    if isinstance(cfg, FleetConfig):
        return simulate_fleet(trace, cfg)
    return simulate(trace, cfg)


def _simulate_in_worker(cfg: SimConfig) -> SimResult:
    assert _WORKER_TRACE is not None, "worker started without a trace"
    return run_one(_WORKER_TRACE, cfg)


def _local(trace: Trace, configs: list[SimConfig], workers: int) -> Iterator[SimResult]:
    global _WORKER_TRACE
    if workers <= 1 or len(configs) <= 1:
        for cfg in configs:
            yield run_one(trace, cfg)
        return
    _WORKER_TRACE = trace
    try:
        ctx = mp.get_context("fork")
        # No more processes than runs: a forked pool starts all of max_workers at once.
        # Each worker dies with this process, even a SIGKILLed one (issue 36: a stopped
        # sweep left both 330 MB workers running for a minute or more).
        pool = ProcessPoolExecutor(
            max_workers=min(workers, len(configs)),
            mp_context=ctx,
            initializer=bind_to_parent,
            initargs=(os.getpid(),),
        )
        done = False
        try:
            futures = [pool.submit(_simulate_in_worker, cfg) for cfg in configs]
            for fut in as_completed(futures):
                yield fut.result()
            done = True
        finally:
            if done:
                pool.shutdown(wait=True)
            else:
                _kill_pool(pool)
    finally:
        _WORKER_TRACE = None


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """A sweep that stops early (an error, a closed generator) kills its workers instead of
    waiting for every queued simulation to finish, as the pool's own shutdown would."""
    procs = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(OSError, ValueError):
            p.kill()
    for p in procs:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            p.join(2)


def results(trace: Trace, configs: list[SimConfig], workers: int = 1) -> Iterator[SimResult]:
    """Each config's result, in this process or `workers` forked ones, as they finish; no run
    directory is written (a caller that wants them has `run_sweep`)."""
    return _local(trace, configs, workers)


def _on_ray(trace: Trace, configs: list[SimConfig], address: str) -> Iterator[SimResult]:
    try:
        import ray
    except ImportError as e:
        raise RayError(
            "Ray is not installed; it is the optional extra: pip install 'agent-replay[ray]'"
        ) from e
    if ray.is_initialized():
        yield from _ray_results(ray, trace, configs)
        return
    try:
        ray.init(address=None if address == "local" else address, log_to_driver=False)
    except Exception as e:  # Ray raises several types for an unreachable cluster
        raise RayError(f"cannot start or reach Ray at '{address}': {e}") from e
    try:
        yield from _ray_results(ray, trace, configs)
    finally:
        # Stops the cluster `--ray local` started (a remote one is only disconnected from).
        # A forked sweep child runs no atexit handlers, so without this the local cluster
        # died only with its driver, and Ray's dashboard and runtime-env agents a minute
        # after that (issue 36); the command kills whatever of it is left.
        ray.shutdown()


def _ray_results(ray: Any, trace: Trace, configs: list[SimConfig]) -> Iterator[SimResult]:
    remote_sim = ray.remote(run_one)
    trace_ref = ray.put(trace)
    pending = [remote_sim.remote(trace_ref, cfg) for cfg in configs]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])


def run_sweep(
    trace: Trace,
    configs: list[SimConfig],
    out_dir: Path,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    trace_source: str = "",
    command: str = "replay simulate",
    on_result: Callable[[SimResult], None] | None = None,
    spec_of: Callable[[SimConfig], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Run every config, write its run directory under `out_dir` and `summary.csv`; returns
    the summary rows in plan order. `spec_of`: a run's spec as its manifest stores it,
    required: every simulated manifest carries its spec (the command line's,
    `replay.runspec.sweep.manifest_spec`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results = (
        _on_ray(trace, configs, ray_address) if ray_address else _local(trace, configs, workers)
    )
    by_name: dict[str, dict[str, Any]] = {}
    for res in results:
        write_run(
            res,
            out_dir / res.config.run_name,
            command=command,
            trace_source=trace_source,
            trace_sha256=trace.sha256,
            spec=spec_of(res.config),
        )
        by_name[res.config.run_name] = res.summary
        if on_result is not None:
            on_result(res)
    rows = [by_name[c.run_name] for c in configs]
    write_summary_csv(rows, out_dir / "summary.csv")
    return rows


def write_summary_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """The required columns first, then every extra column any row has."""
    extra: list[str] = []
    for r in rows:
        extra.extend(k for k in r if k not in SUMMARY_COLUMNS and k not in extra)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=[*SUMMARY_COLUMNS, *extra])
        w.writeheader()
        for r in rows:
            w.writerow(r)
