"""What a simulated fleet's run directory says about the fleet: the engine's flags name it
(`replicas=N`, `router=NAME` and the router's parameters) after the policy's options and the
engine rules. `replay.sim.runner.write_run` writes the directory, reading them through the
fleet's config (`replay.sim.fleet.FleetConfig`), which also counts the engine's GPUs over
every replica (pricing pays for all of them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from replay.fleet import ROUTERS
from replay.sim.runner import SimConfig

if TYPE_CHECKING:
    from replay.sim.fleet import FleetConfig


def fleet_flags(cfg: FleetConfig) -> list[str]:
    """The engine's flags: the policy's options, the engine rules, then the fleet."""
    params = {k: p.default for k, p in ROUTERS[cfg.router].params.items()}
    params.update(cfg.router_opts)
    return (
        SimConfig.engine_flags(cfg)
        + [f"replicas={cfg.replicas}", f"router={cfg.router}"]
        + [f"router.{k}={v}" for k, v in sorted(params.items())]
    )
