"""`replay simulate`'s spec: the workload (the same fields and flags as `replay run`'s), the
points it sweeps (policies × session counts × seeds × fleets), the engine model and timing;
and a simulated point's spec and the simulator's config, each built from the other.

A sweep is a list of specs: each point is a `RunSpec` of its own (`SweepSpec.points`, built by
`point`, which `spec_of` uses too), the spec its run directory's manifest stores
(`manifest_spec`, which every caller of `replay.sim.runner.write_run` and
`replay.sim.sweep.run_sweep` hands them); the simulator runs the config built from it
(`config_of`: a fleet's, `replay.sim.fleet.FleetConfig`, where the spec names a router). The
simulator never imports the spec: this layer is above it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from replay.fleet import DEFAULT_ROUTER
from replay.profiles import DEFAULT_MODEL
from replay.runspec.fields import EngineShape, WorkloadSpec
from replay.runspec.resolve import FLAGS, Layer, build, workload
from replay.sim.fleet import FleetConfig
from replay.sim.runner import SimConfig
from replay.strict_numbers import Whole
from replay.workload import DEFAULT_WORKLOAD as W
from replay.workload import TIMED_WARMUP_S

if TYPE_CHECKING:
    from replay.runspec.model import RunSpec


class SweepSpec(BaseModel):
    """A sweep as resolved. `workload.sessions` is the largest count swept."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: WorkloadSpec
    policies: list[str]
    sessions: list[int]
    seeds: Whole = Field(ge=1)
    timing: str
    engine: EngineShape = Field(default_factory=lambda: EngineShape())
    replicas: list[int] = Field(default_factory=list)
    routers: list[str] = Field(default_factory=list)

    def size(self) -> int:
        """How many points `points` builds, counted without building them (a sweep is checked
        against the memory its points need before they exist: replay.commands.scale_guard)."""
        fleets = (
            max(len(self.replicas), 1) * max(len(self.routers), 1)
            if self.replicas or self.routers
            else 1
        )
        return len(self.policies) * fleets * len(self.sessions) * self.seeds

    def points(self, token_scale: float, trace: str) -> list[RunSpec]:
        """Every point's spec, policies outermost (the runs of one policy finish together),
        then each fleet (replica count × router), session count and seed (`workload.seed`
        first); `trace`: the trace's path."""
        fleets: list[tuple[int, str | None]] = [(1, None)]
        if self.replicas or self.routers:
            fleets = [
                (k, r) for k in self.replicas or [1] for r in self.routers or [DEFAULT_ROUTER]
            ]
        # The workload as resolved once (`sweep_workload`: each count checked, the window
        # parsed), each point's session count and seed put in; nothing is built again.
        workloads = {
            (n, s): self.workload.model_copy(
                update={
                    "sessions": n,
                    "seed": self.workload.seed + s,
                    "trace": trace,
                    "token_scale": token_scale,
                }
            )
            for n in self.sessions
            for s in range(self.seeds)
        }
        # The engine's shape whole (capacity, tiers), each fleet's replicas and router over it.
        shape = self.engine.model_dump(exclude={"profile"})
        return [
            point(
                p,
                workloads[n, s],
                self.engine.profile,
                self.timing,
                **{**shape, "replicas": k, "router": r},
            )
            for p in self.policies
            for k, r in fleets
            for n in self.sessions
            for s in range(self.seeds)
        ]


def point(
    policy: str,
    workload: WorkloadSpec,
    profile: str | None,
    timing: str,
    **engine: Any,
) -> RunSpec:
    """One simulated run's spec: `policy` on `profile`'s engine (its model and GPUs, each
    replica's) with `timing`; `engine`: `replay.runspec.model.EngineRun`'s other fields
    (capacity, replicas, router, the policy's and router's options). The bundled sample is
    named by no trace path (`sample`), as in `replay run`'s spec."""
    from replay.client.config import EngineSpec
    from replay.profiles import load_profile
    from replay.runspec.model import EngineRun, RunSpec
    from replay.traces import sample_path

    trace = workload.trace
    sample = trace is not None and Path(trace) == sample_path()
    if sample:
        workload = workload.model_copy(update={"trace": None})
    prof = load_profile(profile or DEFAULT_MODEL)
    spec = EngineSpec(
        name=policy, kind="sim", model=prof.model, gpus=prof.gpus, gpu_type=prof.gpu_type
    )
    run = EngineRun.model_validate(
        {
            "engine": spec,
            "executor": "simulated",
            "policy": policy,
            "profile": profile,
            "timing": timing,
            **engine,
        }
    )
    return RunSpec(workload=workload, engines=[run], sample=sample)


def sweep_workload(
    given: dict[str, Any], sessions: list[int], timing: str
) -> tuple[WorkloadSpec, str]:
    """The workload of a sweep: the flags over the sweep's base (the largest session count,
    and a timed replay's warm-up with engine timing, none with trace timing). Each session
    count is checked on its field, as `replay run`'s (`--sessions 0: must be at least 1`).
    With engine timing a warm-up longer than half the run is cut to half, as `replay run`
    cuts it: the simulated twin of a short run replays the run's workload."""
    for n in sessions:
        build(WorkloadSpec, [Layer(FLAGS, {"sessions": n})])
    warmup = TIMED_WARMUP_S if timing == "engine" else W.warmup_s
    base = Layer("replay simulate", {"sessions": max(sessions), "warmup_s": warmup})
    flags = {k: v for k, v in given.items() if k != "sessions"}
    return workload([Layer(FLAGS, flags), base], clamp_warmup=timing == "engine")


def config_of(spec: RunSpec) -> SimConfig:
    """The simulator's config of one point's spec: a fleet's (`FleetConfig`) where the spec
    names a router, else one engine's."""
    (e,) = spec.engines
    w = spec.workload.config()
    assert e.policy is not None and e.timing is not None, "not a simulated engine's spec"
    common: dict[str, Any] = {
        "policy": e.policy,
        "sessions": spec.workload.sessions,
        "seed": w.seed,
        "model": e.profile or DEFAULT_MODEL,
        "timing": e.timing,
        "duration_s": w.duration_s,
        "window": w.window,
        "policy_opts": dict(e.policy_opts or {}),
        "capacity_blocks": e.capacity_blocks,
        "host_memory_gb": e.host_memory_gb or 0.0,
        "host_bandwidth_gbs": e.host_bandwidth_gbs,
        "host_kv_share": e.host_kv_share,
        "external_memory_gb": e.external_memory_gb or 0.0,
        "external_bandwidth_gbs": e.external_bandwidth_gbs,
        "external_store": e.external_store,
        "subagents": w.subagents,
        "token_scale": spec.workload.token_scale or 1.0,
        "warmup_s": w.warmup_s,
        "gap_cap_s": w.gap_cap_s,
        "start_range": (w.start_lo, w.start_hi),
        "start_at": w.start_at,
        "recycle_start": w.recycle_start,
        "preset": spec.workload.preset,
        "engine_rules": e.engine_rules or "",
        "admission": e.admission,
    }
    if e.router is None:
        return SimConfig(**common)
    opts = dict(e.router_opts or {})
    return FleetConfig(**common, replicas=e.replicas, router=e.router, router_opts=opts)


def band_configs(spec: RunSpec, seeds: int) -> dict[str, list[SimConfig]]:
    """The simulator's configs of a run's seed band (`replay.sim.band.simulate_band`): each
    engine's point, engine timing, `seeds` seeds from the run's own. Empty when the point has
    no simulator twin (an engine that is not emulated, or one behind a router)."""
    if seeds < 1 or not spec.engines:
        return {}
    if any(e.executor != "emulated" or e.replicas > 1 for e in spec.engines):
        return {}
    # The workload exactly as the run replayed it (its window, and its warm-up clamped into a
    # short run), resolved by the same call the run's plan is made with.
    w = spec.workload.config(clamp_warmup=True)
    common: dict[str, Any] = {
        "sessions": w.sessions,
        "timing": "engine",
        "duration_s": w.duration_s,
        "subagents": w.subagents,
        "token_scale": spec.workload.token_scale or 1.0,
        "warmup_s": w.warmup_s,
        "gap_cap_s": w.gap_cap_s,
        "window": w.window,
    }
    return {
        e.name: [
            SimConfig(
                policy=e.policy or e.name,
                seed=w.seed + k,
                model=e.profile or DEFAULT_MODEL,
                capacity_blocks=e.capacity_blocks,
                **common,
            )
            for k in range(seeds)
        ]
        for e in spec.engines
    }


def _start_rules(cfg: SimConfig) -> dict[str, Any]:
    """The start rules as the spec's fields: None where they are the replay's own (so a
    spec without them reads the same)."""
    return {
        "start_range": None if cfg.start_range == (W.start_lo, W.start_hi) else cfg.start_range,
        "start_at": None if cfg.start_at == W.start_at else cfg.start_at,
        "recycle_start": None if cfg.recycle_start == W.recycle_start else cfg.recycle_start,
    }


def spec_of(cfg: SimConfig, trace: str | None = None) -> RunSpec:
    """The run's spec (`point`), which `config_of` builds `cfg` back from; `trace`: the
    trace's path (None: not known)."""
    lo, hi = cfg.window
    workload = WorkloadSpec(
        trace=trace or None,
        sessions=cfg.sessions,
        duration_min=cfg.duration_s / 60,
        window=(lo / 60, hi / 60),
        seed=cfg.seed,
        gap_cap_s=cfg.gap_cap_s,
        warmup_s=cfg.warmup_s,
        subagents=cfg.subagents,
        token_scale=cfg.token_scale,
        preset=cfg.preset,
        **_start_rules(cfg),
    )
    return point(
        cfg.policy,
        workload,
        cfg.model,
        cfg.timing,
        capacity_blocks=cfg.capacity_blocks,
        host_memory_gb=cfg.host_memory_gb or None,
        host_bandwidth_gbs=cfg.host_bandwidth_gbs if cfg.host_memory_gb else None,
        host_kv_share=cfg.host_kv_share if cfg.host_memory_gb else None,
        external_memory_gb=cfg.external_memory_gb or None,
        external_bandwidth_gbs=cfg.external_bandwidth_gbs if cfg.external_memory_gb else None,
        external_store=cfg.external_store if cfg.external_memory_gb else None,
        policy_opts=cfg.policy_opts or None,
        engine_rules=cfg.engine_rules or None,
        admission=cfg.admission,
        **cfg.fleet_shape(),
    )


def manifest_spec(cfg: SimConfig, trace: str | None = None) -> dict[str, Any]:
    """`spec_of` as the manifest stores it (`Manifest.spec`: JSON, no nulls)."""
    return spec_of(cfg, trace).model_dump(mode="json", exclude_none=True)


__all__ = [
    "SweepSpec",
    "band_configs",
    "config_of",
    "manifest_spec",
    "point",
    "spec_of",
    "sweep_workload",
]
