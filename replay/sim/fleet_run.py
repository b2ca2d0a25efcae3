"""A simulated fleet's run directory: `replay.sim.runner.write_run`'s contract, with the
engine's GPUs counted over every replica (pricing pays for all of them) and the fleet named
in the engine's flags (`replicas=N`, `router=NAME` and the router's parameters)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import replay
from replay.fleet import ROUTERS
from replay.profiles import load_profile
from replay.rundir import RunWriter
from replay.rundir_models import EngineEntry, Manifest, RunConfig, TraceInfo, WorkloadCounts
from replay.sim.fleet import FleetConfig
from replay.sim.runner import SimResult

_NOT_RUN_CONFIG = ("engine_rules", "admission", "replicas", "router", "router_opts")


def fleet_flags(cfg: FleetConfig) -> list[str]:
    """The engine's flags: the policy's options, the engine rules, then the fleet."""
    params = {k: p.default for k, p in ROUTERS[cfg.router].params.items()}
    params.update(cfg.router_opts)
    return (
        [f"{k}={v}" for k, v in sorted(cfg.policy_opts.items())]
        + [f"{k}={getattr(cfg, k)}" for k in ("engine_rules", "admission") if getattr(cfg, k)]
        + [f"replicas={cfg.replicas}", f"router={cfg.router}"]
        + [f"router.{k}={v}" for k, v in sorted(params.items())]
    )


def write_fleet_run(
    result: SimResult,
    run_dir: Path,
    *,
    command: str = "replay simulate",
    trace_source: str = "",
    trace_sha256: str | None = None,
) -> Path:
    cfg = result.config
    assert isinstance(cfg, FleetConfig)
    profile = load_profile(cfg.model)
    s = result.summary
    manifest = Manifest(
        command=command,
        executor="simulator",
        harness_version=replay.__version__,
        config=RunConfig.model_validate(
            {
                **{k: v for k, v in asdict(cfg).items() if k not in _NOT_RUN_CONFIG},
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
            working_set_ratio=s["working_set_ratio"],
        ),
        trace=TraceInfo(path=trace_source, sha256=trace_sha256, token_scale=cfg.token_scale),
        seed=cfg.seed,
        engines=[
            EngineEntry(
                name=cfg.policy,
                kind="sim",
                model=profile.model,
                gpus=profile.gpus * cfg.replicas,
                gpu_type=profile.gpu_type,
                flags=fleet_flags(cfg),
            )
        ],
    )
    with RunWriter(run_dir, manifest) as w:
        for rec in result.records:
            w.add(rec)
    return run_dir
