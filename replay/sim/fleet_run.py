"""A simulated fleet's run directory: `replay.sim.runner.write_run`'s contract, with the
engine's GPUs counted over every replica (pricing pays for all of them) and the fleet named
in the engine's flags (`replicas=N`, `router=NAME` and the router's parameters)."""

from __future__ import annotations

from pathlib import Path

from replay.fleet import ROUTERS
from replay.sim.fleet import FleetConfig
from replay.sim.runner import SimResult, engine_flags, write_run

_NOT_RUN_CONFIG = ("replicas", "router", "router_opts")


def fleet_flags(cfg: FleetConfig) -> list[str]:
    """The engine's flags: the policy's options, the engine rules, then the fleet."""
    params = {k: p.default for k, p in ROUTERS[cfg.router].params.items()}
    params.update(cfg.router_opts)
    return (
        engine_flags(cfg)
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
    return write_run(
        result,
        run_dir,
        command=command,
        trace_source=trace_source,
        trace_sha256=trace_sha256,
        replicas=cfg.replicas,
        flags=fleet_flags(cfg),
        not_config=_NOT_RUN_CONFIG,
    )
