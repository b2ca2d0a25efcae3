"""A simulated point's spec and the simulator's config, each built from the other.

The command line resolves one spec per point (`replay.runspec.sweep.SweepSpec.points`) and
hands the simulator the config it runs (`config_of`: a fleet's,
`replay.sim.fleet.FleetConfig`, where the spec names a router); a config says its spec back (`spec_of`), which its run
directory's manifest stores (`manifest_spec`, given to `replay.sim.runner.write_run`). The
simulator never imports the spec: this layer is above it."""

from __future__ import annotations

from typing import Any

from replay.profiles import DEFAULT_MODEL
from replay.runspec.fields import WorkloadSpec
from replay.runspec.model import RunSpec
from replay.runspec.sweep import point
from replay.sim.fleet import FleetConfig
from replay.sim.runner import SimConfig
from replay.workload import DEFAULT_WORKLOAD


def config_of(spec: RunSpec) -> SimConfig:
    """The simulator's config of one point's spec: a fleet's (`FleetConfig`) where the spec
    names a router, else one engine's."""
    (e,) = spec.engines
    w = spec.workload.config()
    assert e.policy is not None and e.timing is not None, "not a simulated engine's spec"
    common: dict[str, Any] = {
        "policy": e.policy,
        "sessions": w.sessions,
        "seed": w.seed,
        "model": e.profile or DEFAULT_MODEL,
        "timing": e.timing,
        "duration_s": w.duration_s,
        "window": w.window,
        "policy_opts": dict(e.policy_opts or {}),
        "capacity_blocks": e.capacity_blocks,
        "host_memory_gb": e.host_memory_gb or 0.0,
        "host_bandwidth_gbs": e.host_bandwidth_gbs,
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


def _start_rules(cfg: SimConfig) -> dict[str, Any]:
    """The start rules as the spec's fields: None where they are the replay's own (so a
    spec without them reads the same)."""
    w = DEFAULT_WORKLOAD
    return {
        "start_range": None if cfg.start_range == (w.start_lo, w.start_hi) else cfg.start_range,
        "start_at": None if cfg.start_at == w.start_at else cfg.start_at,
        "recycle_start": None if cfg.recycle_start == w.recycle_start else cfg.recycle_start,
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
        policy_opts=cfg.policy_opts or None,
        engine_rules=cfg.engine_rules or None,
        admission=cfg.admission,
        **cfg.fleet_shape(),
    )


def manifest_spec(cfg: SimConfig, trace: str | None = None) -> dict[str, Any]:
    """`spec_of` as the manifest stores it (`Manifest.spec`: JSON, no nulls)."""
    return spec_of(cfg, trace).model_dump(mode="json", exclude_none=True)


__all__ = ["config_of", "manifest_spec", "spec_of"]
