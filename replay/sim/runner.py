"""One simulated run: a trace, a policy, a session count and a seed in; request records and
a summary row out (`simulate`), optionally written as a run directory (`write_run`)."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import replay
from replay.profiles import DEFAULT_MODEL, ModelProfile, load_profile
from replay.records import RequestRecord
from replay.resume import Resume
from replay.rundir import RunWriter
from replay.rundir_models import EngineEntry, Manifest, RunConfig, TraceInfo, WorkloadCounts
from replay.sim.cache.capacity import Capacity
from replay.sim.cache.hybrid import ResumeInfo
from replay.sim.driver import Executor, Sessions, SimRequest
from replay.sim.engine.cache import CacheSettings, SimCache, cache_settings
from replay.sim.engine.clock import StepClock
from replay.sim.engine.core import EngineCore, admission_for
from replay.sim.engine.rules import parse_rules, rules_for
from replay.sim.engine.scale import scaled_profile
from replay.sim.engine_timing import EngineExecutor
from replay.sim.events import EventLoop
from replay.sim.executors import TraceExecutor
from replay.sim.measures import Occupancy, WorkingSet, summarize
from replay.traces.model import Trace
from replay.workload import (
    DEFAULT_WORKLOAD,
    RecycleStart,
    StartAt,
    SubagentMode,
    Workload,
    WorkloadConfig,
)

Timing = Literal["trace", "engine"]
# Recorded as the engine's flags (where set), not in the run config.
_ENGINE_FIELDS = (
    "engine_rules",
    "admission",
    "host_memory_gb",
    "host_bandwidth_gbs",
    "host_kv_share",
    "external_memory_gb",
    "external_bandwidth_gbs",
    "external_store",
)
TIMINGS: tuple[str, ...] = ("trace", "engine")


@dataclass(frozen=True)
class SimConfig:
    """What one simulated run replays, and how. The workload's settings default to the
    workload config's (`replay.workload.DEFAULT_WORKLOAD`, their one place)."""

    policy: str
    sessions: int
    seed: int = DEFAULT_WORKLOAD.seed
    model: str = DEFAULT_MODEL
    timing: Timing = "trace"
    duration_s: float = DEFAULT_WORKLOAD.duration_s
    window: tuple[float, float] = DEFAULT_WORKLOAD.window
    policy_opts: dict[str, Any] = field(default_factory=dict)
    capacity_blocks: int | None = None  # None: the policy's (the profile's engine cache)
    # A host-memory tier (issue 34, replay.sim.cache.tiers): GiB per engine (0: none) and the
    # host-to-GPU bandwidth per GPU in GB/s (None: the tier's default).
    host_memory_gb: float = 0.0
    host_bandwidth_gbs: float | None = None
    host_kv_share: float | None = None  # SGLang's host KV pool share (None: the engine's rule)
    # An external store behind host memory (replay.sim.cache.tiers, rule 5): GiB per engine
    # (0: none), its bandwidth into host memory per GPU in GB/s (None: the host link's
    # default), and what it is (None: mooncake, KV and states; lmcache: KV only).
    external_memory_gb: float = 0.0
    external_bandwidth_gbs: float | None = None
    external_store: str | None = None
    subagents: SubagentMode = DEFAULT_WORKLOAD.subagents
    # The trace's token lengths were divided by this (`replay.traces.scale`): the profile
    # and the policy's token-valued options are scaled alike, so a scaled context takes as
    # many blocks and costs as much as its full-size original.
    token_scale: float = 1.0
    warmup_s: float = DEFAULT_WORKLOAD.warmup_s  # first priming requests spread over this
    gap_cap_s: float = DEFAULT_WORKLOAD.gap_cap_s  # tool gaps capped at this (replay.workload)
    # Engine timing: the engine's memory rules with these changes, "NAME=VALUE,..."
    # (`replay.sim.engine.rules.parse_rules`), and its admission ("park" | "schedule";
    # None: the engine's own). Experiments (experiments/pressure_sweep.py) toggle them.
    engine_rules: str = ""
    admission: str | None = None
    # The start rules (replay.workload) and the preset that set them (replay.presets; the
    # spec records it, the run config does not).
    start_range: tuple[float, float] = (DEFAULT_WORKLOAD.start_lo, DEFAULT_WORKLOAD.start_hi)
    start_at: StartAt = DEFAULT_WORKLOAD.start_at
    recycle_start: RecycleStart = DEFAULT_WORKLOAD.recycle_start
    preset: str | None = None

    def workload(self) -> WorkloadConfig:
        """The replay rules this run follows (`replay.workload`, their one place)."""
        return WorkloadConfig(
            sessions=self.sessions,
            duration_s=self.duration_s,
            window=self.window,
            seed=self.seed,
            subagents=self.subagents,
            warmup_s=self.warmup_s,
            gap_cap_s=self.gap_cap_s,
            start_lo=self.start_range[0],
            start_hi=self.start_range[1],
            start_at=self.start_at,
            recycle_start=self.recycle_start,
        )

    @property
    def run_name(self) -> str:
        return f"{self.policy}-s{self.sessions}-seed{self.seed}"

    @property
    def engine_copies(self) -> int:
        """Copies of the engine the run pays for (a fleet's replicas): its GPUs count each."""
        return 1

    @property
    def not_run_config(self) -> tuple[str, ...]:
        """Fields the run directory's run config does not hold (a fleet's: in its flags)."""
        return ()

    def engine_flags(self) -> list[str]:
        """The engine's flags in the manifest: the policy's options, then the engine rules."""
        return [f"{k}={v}" for k, v in sorted(self.policy_opts.items())] + [
            f"{k}={getattr(self, k)}"
            for k in _ENGINE_FIELDS
            if getattr(self, k) or (k == "host_kv_share" and self.host_kv_share is not None)
        ]

    def fleet_shape(self) -> dict[str, Any]:
        """The spec's fleet fields (a fleet's replicas, router and its options): what
        `replay.runspec.sweep.spec_of` adds to one engine's."""
        return {}


@dataclass
class SimResult:
    config: SimConfig
    records: list[RequestRecord]
    summary: dict[str, Any]
    wall_seconds: float
    # Engine timing: the engine's own figures over the window (`EngineExecutor.stats`).
    engine: dict[str, float] = field(default_factory=dict)


def sim_capacity(cfg: SimConfig, profile: ModelProfile | None = None) -> Capacity:
    """The capacity `cfg` runs with (`replay.sim.cache.capacity.resolve_capacity`, as `simulate`
    resolves it), so a command can refuse one that cannot be honoured before any run starts:
    raises `CapacityError` (or `PolicyError`, a ValueError too) with the reason."""
    scaled, settings = scaled_settings(cfg, profile)
    assert settings.capacity is not None
    if cfg.host_memory_gb:  # a host tier that cannot be built is refused here too
        from replay.sim.cache.tiers import check_host_tier

        check_host_tier(cfg.policy, scaled, cfg.host_memory_gb)
    if cfg.host_kv_share is not None:  # a split of host memory the engine can take
        from replay.sim.cache.tiers import check_kv_share

        pooled = settings.capacity.pooled
        check_kv_share(cfg.policy, pooled, cfg.host_memory_gb, cfg.host_kv_share)
    if cfg.external_memory_gb or cfg.external_store is not None:  # rule 5's store
        from replay.sim.cache.tiers import check_external

        store = cfg.external_store or "mooncake"
        check_external(cfg.host_memory_gb, cfg.external_memory_gb, store)
    return settings.capacity


def scaled_settings(
    cfg: SimConfig, profile: ModelProfile | None = None
) -> tuple[ModelProfile, CacheSettings]:
    """The profile `cfg` runs on, scaled to its trace's tokens (`replay.sim.engine.scale`; `profile`:
    the full-size one, default `cfg.model`'s), and the settings of the cache its policy gets
    there (each replica's, in a fleet)."""
    profile = scaled_profile(profile or load_profile(cfg.model), cfg.token_scale)
    settings = cache_settings(
        cfg.policy, profile, cfg.token_scale, cfg.capacity_blocks, cfg.policy_opts
    )
    if cfg.host_memory_gb:  # a host tier (issue 34): SimCache attaches it
        settings = replace(
            settings,
            host_memory_gb=cfg.host_memory_gb,
            host_bandwidth_gbs=cfg.host_bandwidth_gbs,
            host_kv_share=cfg.host_kv_share,
        )
    if cfg.external_memory_gb:  # an external store behind it (tiers rule 5)
        settings = replace(
            settings,
            external_memory_gb=cfg.external_memory_gb,
            external_bandwidth_gbs=cfg.external_bandwidth_gbs,
            external_store=cfg.external_store or "mooncake",
        )
    return profile, settings


def engine_core(cfg: SimConfig, clock: StepClock, cache: SimCache) -> EngineCore:
    """The engine model `cfg`'s policy runs in with engine timing: its engine's memory rules
    with `cfg.engine_rules`' changes (`replay.sim.engine.rules`) and its admission
    (`cfg.admission`, else the engine's own)."""
    rules = parse_rules(cfg.engine_rules, rules_for(cfg.policy))
    admission = cfg.admission or admission_for(cfg.policy)
    if admission not in ("park", "schedule"):
        raise ValueError(f"admission: '{admission}' is not one of park, schedule")
    return EngineCore(clock, cache, admission, rules)  # type: ignore[arg-type]


class RunMeter:
    """What a run samples while it replays: the cache's occupancy at each request arrival in
    the window (`Occupancy`; `occupancy` says the resident states and used blocks, summed over
    a fleet's replicas) and the sessions' working set (`WorkingSet`)."""

    def __init__(
        self, cfg: SimConfig, profile: ModelProfile, occupancy: Callable[[], tuple[int, int]]
    ) -> None:
        self.occ = Occupancy(cfg.window)
        self.ws = WorkingSet(cfg.window, profile.block_tokens, profile.checkpoint_blocks)
        self.occupancy = occupancy

    def sample(self, now: float) -> None:
        """A request arrived at `now` (an executor's `Sampler`): the working set is the one
        `replay_sessions` keeps up to date (`WorkingSet.blocks`), not summed again here."""
        states, used = self.occupancy()
        self.occ.add(now, states, used, self.ws.blocks)


def replay_sessions(
    trace: Trace,
    cfg: SimConfig,
    loop: EventLoop,
    executor: Executor,
    meter: RunMeter,
    profile: ModelProfile,
) -> Sessions:
    """Replay `trace`'s workload under `cfg`'s rules through `executor` until the run's end,
    `meter` sampling as it goes; returns the sessions (their requests and assignments). A
    request too long for `profile`'s context is recorded as an overflow, not sent."""
    sessions = Sessions(loop, executor, Workload(trace, cfg.workload()), cfg.duration_s)
    sessions.context_tokens = profile.context_tokens
    sessions.on_context = meter.ws.update
    sessions.start()
    loop.run(cfg.duration_s)
    sessions.on_context = None
    return sessions


def run_summary(
    cfg: SimConfig,
    records: list[RequestRecord],
    meter: RunMeter,
    profile: ModelProfile,
    sessions: Sessions,
    settings: CacheSettings,
    caches: Sequence[SimCache],
    *,
    wall_seconds: float,
) -> dict[str, Any]:
    """The run's row of the sweep's summary (`replay.sim.measures.summarize`) and what was
    replayed (`run_shape`), over every engine of the run (`caches`: one, or a fleet's
    replicas, each of `settings`' capacity): their GPUs (`profile`'s per engine), blocks,
    evictions and admission refusals added up."""
    assert settings.capacity is not None
    n = len(caches)
    profile = profile.model_copy(update={"gpus": profile.gpus * n})
    summary = summarize(
        records,
        meter.occ,
        profile,
        policy=cfg.policy,
        sessions=cfg.sessions,
        seed=cfg.seed,
        timing=cfg.timing,
        wall_seconds=wall_seconds,
        capacity=settings.capacity.reported_blocks * n,  # replay.sim.cache.capacity: the one rule
        evictions=sum(c.cache.evictions for c in caches),
        refusals=sum(c.cache.admission_refusals for c in caches),
        working_set_blocks=meter.ws.mean_blocks(cfg.duration_s),
        token_scale=cfg.token_scale,
        external=bool(cfg.external_memory_gb),
    )
    summary.update(run_shape(profile, cfg, sessions))
    return summary


def simulate(trace: Trace, cfg: SimConfig, profile: ModelProfile | None = None) -> SimResult:
    """Replay `trace` under `cfg` on a virtual clock. `profile`: the full-size profile
    (default: `cfg.model`'s); a token-scaled trace gets it scaled (`replay.sim.engine.scale`).

    Python's cyclic garbage collector is paused for the run and restored after: a run
    allocates hundreds of thousands of heap entries and keeps its tree nodes to the end, so
    the collector's passes free next to nothing, yet took ~15% of a 48-session replay
    (measured with scripts/bench_sim.py). At the end the run unlinks what it built
    (`release`), so it is freed by reference counting, not left to the collector once it
    resumes. Nothing a run computes depends on either."""
    with gc_paused():
        return _simulate(trace, cfg, profile)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a run, restored after (`simulate`'s
    docstring says why; `replay.sim.fleet.simulate_fleet` pauses it alike)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _simulate(trace: Trace, cfg: SimConfig, profile: ModelProfile | None) -> SimResult:
    t0 = time.perf_counter()
    profile, settings = scaled_settings(cfg, profile)
    sim_cache = SimCache(settings)
    cache = sim_cache.cache
    loop = EventLoop(cfg.policy)
    meter = RunMeter(cfg, profile, lambda: (cache.resident_states, cache.used_blocks))
    executor: EngineExecutor | TraceExecutor
    if cfg.timing == "engine":
        core = engine_core(cfg, StepClock(profile, cfg.token_scale), sim_cache)
        executor = EngineExecutor(loop, core, meter.sample, cfg.window)
    else:
        executor = TraceExecutor(loop, cache, profile, meter.sample)
    try:
        sessions = replay_sessions(trace, cfg, loop, executor, meter, profile)
    finally:
        close = getattr(cache, "close", None)  # a native cache's worker process
        if close is not None:
            close()
    records = [to_record(r, cfg.policy, sessions.workload) for r in sessions.recorded()]
    wall = time.perf_counter() - t0
    summary = run_summary(
        cfg, records, meter, profile, sessions, settings, [sim_cache], wall_seconds=wall
    )
    engine: dict[str, float] = {}
    if isinstance(executor, EngineExecutor):
        engine = {**executor.stats.summary(), "preemptions": executor.core.counters.preemptions}
    release([sim_cache], sessions)
    return SimResult(cfg, records, summary, wall, engine)


def release(caches: Sequence[SimCache], sessions: Sessions) -> None:
    """Unlink what a finished run built (the caches' prefix trees, the requests), so that
    it is freed by reference counting as the run returns rather than by the cyclic
    collector (`replay.sim.cache.store.CacheStore.release` says what that cost)."""
    for c in caches:
        unlink = getattr(c.cache, "release", None)  # a native oracle's cache has none
        if unlink is not None:
            unlink()
    sessions.release()


def to_record(r: SimRequest, engine: str, workload: Workload | None = None) -> RequestRecord:
    """The request record of `r`; `workload` (the run's) fills aiperf's theoretical
    prefix-cache counts (`Workload.prefix_blocks`)."""
    info = r.info
    rec = RequestRecord(
        engine=engine,
        session=r.slot,
        trajectory=r.trajectory.id,
        agent=r.trajectory.agent_id or "main",
        turn=r.index,
        scheduled_s=r.scheduled_s,
        sent_s=r.sent_s,
        first_token_s=r.first_token_s,
        done_s=r.done_s,
        prompt_tokens=r.n,
        output_tokens=r.out if r.done_s is not None and r.status == "ok" else 0,
        expected_output_tokens=r.out,
        finish_reason="length" if r.status == "ok" and r.done_s is not None else None,
        status="ok" if r.status == "ok" and r.done_s is not None else "overflow",
        error=r.error,
        tool_gap_s=r.gap_s,
        priming=r.priming,
    )
    blocks = workload.prefix_blocks(r.trajectory, r.index) if workload is not None else None
    if blocks is not None:
        rec.theoretical_hit_blocks, rec.theoretical_blocks = blocks
    if r.status == "ok" and r.done_s is None:  # still running at the end of the run
        rec.status, rec.error = "cancelled", "the run ended before it completed"
    if isinstance(info, ResumeInfo):  # trace timing: the cache's lookup at send time
        info = info.resume()
    if isinstance(info, Resume):
        rec.set_resume(info)
    return rec


def run_shape(profile: ModelProfile, cfg: SimConfig, sessions: Sessions) -> dict[str, Any]:
    """The summary's figures of what was replayed: the block as simulated and at full size,
    the subagent mode and the trajectories' assignment to sessions."""
    return {
        "block_tokens": profile.block_tokens,
        "token_scale": cfg.token_scale,
        "full_size_block_tokens": round(profile.block_tokens * cfg.token_scale),
        "subagents": cfg.subagents,
        "assignments": sessions.assignments,
        "trajectories_replayed": len(sessions.trajectories_replayed),
        "reused_assignments": sessions.reused_assignments,
    }


def write_run(
    result: SimResult,
    run_dir: Path,
    *,
    command: str = "replay simulate",
    trace_source: str = "",
    trace_sha256: str | None = None,
    spec: dict[str, Any],
) -> Path:
    """The run directory (DESIGN.md contract) for one simulated run, a fleet's too: its
    config says how many engine copies the GPUs count (`engine_copies`), the engine's flags
    (`engine_flags`) and the fields the run config does not hold (`not_run_config`); `spec`:
    the run's spec as the manifest stores it, required: every simulated manifest carries its
    spec (the caller builds it, as the command line does: `replay.runspec.sweep.manifest_spec`;
    this layer never imports the spec's)."""
    cfg = result.config
    profile = load_profile(cfg.model)
    s = result.summary
    manifest = Manifest(
        command=command,
        executor="simulator",
        harness_version=replay.__version__,
        config=RunConfig.model_validate(
            {
                **{
                    k: v
                    for k, v in asdict(cfg).items()
                    if k not in _ENGINE_FIELDS and k not in cfg.not_run_config and k != "preset"
                },
                # The cache as simulated, never null: the blocks the working set is divided
                # by, the block size in the trace's tokens, and the full-size block.
                "capacity_blocks": s["capacity_blocks"],
                "block_tokens": s["block_tokens"],
                "full_size_block_tokens": s["full_size_block_tokens"],
                "requested_capacity_blocks": cfg.capacity_blocks,
            }
        ),
        workload=WorkloadCounts(
            subagents=cfg.subagents,
            assignments=s["assignments"],
            trajectories_replayed=s["trajectories_replayed"],
            reused_assignments=s["reused_assignments"],
            # The source's pressure measure (time average over the window, ÷ capacity).
            working_set_ratio=s["working_set_ratio"],
        ),
        trace=TraceInfo(path=trace_source, sha256=trace_sha256, token_scale=cfg.token_scale),
        seed=cfg.seed,
        spec=spec,
        engines=[
            EngineEntry(
                name=cfg.policy,
                kind="sim",
                model=profile.model,
                gpus=profile.gpus * cfg.engine_copies,
                gpu_type=profile.gpu_type,
                flags=cfg.engine_flags(),
            )
        ],
    )
    # summary.json is the command layer's (analysis.summary, its one producer); the
    # simulator's own figures are the sweep's summary.csv row (replay.sim.measures).
    with RunWriter(run_dir, manifest) as w:
        for rec in result.records:
            w.add(rec)
    return run_dir
