"""A live run's plan: everything it needs, resolved (`RunPlan`). Its own module, below both
the run (`replay.client.orchestrate`, which runs it) and the client processes
(`replay.client.fanout`, which split its sessions), so neither imports the other for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.client.config import EngineSpec
from replay.client.fleet import FleetSpec
from replay.engines.adapters import Limits
from replay.rundir import RunStatus
from replay.rundir_models import RunSummary
from replay.traces.model import Trace
from replay.workload import WorkloadConfig


@dataclass(frozen=True)
class RunPlan:
    """Everything a live run needs, resolved (the command layer builds it). Frozen: what is
    learned later (the emulators' URLs and fleets, the engines' announced clock) makes a new
    plan (`dataclasses.replace`), whose spec says it too, before the manifest is written."""

    engines: list[EngineSpec]
    trace: Trace
    workload: WorkloadConfig  # in the replayed clock
    out_dir: Path
    time_scale: float = 1.0
    clock_scale: float = 1.0  # see SessionPolicy.clock_scale
    command: str = ""
    limits: Limits = field(default_factory=Limits)
    retries: int = 3
    backoff_s: float = 2.0
    scrape_interval_s: float = 5.0
    flush_interval_s: float = 1.0
    parquet_interval_s: float = 15.0  # requests.parquet rebuilt off the loop this often
    salt: int | None = None
    slo: dict[str, float | None] | None = None  # analysis.slo.Slo as a dict; None: defaults
    trace_token_scale: float = 1.0  # the trace's own (replay.traces.scale)
    resume: bool = False
    emulated: bool | None = None  # every engine is an emulator this harness started
    spec: dict[str, Any] | None = None  # the run's RunSpec as resolved (manifest.json's `spec`)
    # Builds summary.json from the run directory at the end (the command layer passes
    # analysis.summary.summary_of_dir); None: the run writes no summary.
    summarize: Callable[[Path, RunStatus], RunSummary] | None = None
    health_interval_s: float = 1.0  # engine_down events are timed to this
    # Emulators this harness owns and restarts when they die: name -> restarts so far.
    restarts: Callable[[], dict[str, int]] | None = None
    # ... and when each was down (perf_counter_ns pairs), for outages between health polls.
    outages: Callable[[], dict[str, list[tuple[int, int | None]]]] | None = None
    # Client processes (replay.client.fanout): K workers each own every K-th session slot;
    # with `ray_address` they are Ray actors ("local": a Ray started here).
    workers: int = 1
    # Engines of several replicas (replay.client.fleet), by engine name; the engine's `url`
    # is then its first replica's (or the router's, with router "external").
    fleets: dict[str, FleetSpec] = field(default_factory=dict)
    ray_address: str | None = None
    keep_parts: bool = False  # keep parts/ after the merge (tests compare it to the journal)
    # Server logs of engines the user started (`--engine-log NAME=PATH`): an engine that goes
    # down gets the log's last error line in its event (replay.client.health).
    engine_logs: dict[str, Path] = field(default_factory=dict)
    # `--reset-cache`: each engine's prefix cache reset after preflight, before the first
    # replay request (replay.client.phases); an engine that offers none fails the run first.
    reset_cache: bool = False

    @property
    def duration_wall_s(self) -> float:
        return self.workload.duration_s / self.time_scale
