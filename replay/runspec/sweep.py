"""`replay simulate`'s spec: the workload (the same fields and flags as `replay run`'s), the
points it sweeps (policies × session counts × seeds × fleets), the engine model and timing."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from replay.runspec.fields import EngineShape, WorkloadSpec
from replay.runspec.resolve import FLAGS, Layer
from replay.runspec.workload import workload
from replay.workload import DEFAULT_WORKLOAD as W
from replay.workload import TIMED_WARMUP_S


class SweepSpec(BaseModel):
    """A sweep as resolved. `workload.sessions` is the largest count swept."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: WorkloadSpec
    policies: list[str]
    sessions: list[int]
    seeds: int = Field(ge=1)
    timing: str
    engine: EngineShape = Field(default_factory=lambda: EngineShape())
    replicas: list[int] = Field(default_factory=list)
    routers: list[str] = Field(default_factory=list)

    def plan_args(self, token_scale: float) -> dict[str, Any]:
        """The common settings of every point (`replay.sim.sweep.plan`'s keywords)."""
        w = self.workload.config()
        return {
            "model": self.engine.profile,
            "timing": self.timing,
            "duration_s": w.duration_s,
            "window": w.window,
            "capacity_blocks": self.engine.capacity_blocks,
            "subagents": w.subagents,
            "token_scale": token_scale,
            "warmup_s": w.warmup_s,
            "gap_cap_s": w.gap_cap_s,
            "replicas": self.replicas,
            "routers": self.routers,
        }


def sweep_workload(
    given: dict[str, Any], sessions: list[int], timing: str
) -> tuple[WorkloadSpec, str]:
    """The workload of a sweep: the flags over the sweep's base (the largest session count,
    and a timed replay's warm-up with engine timing, none with trace timing)."""
    warmup = TIMED_WARMUP_S if timing == "engine" else W.warmup_s
    base = Layer("replay simulate", {"sessions": max(sessions), "warmup_s": warmup})
    flags = {k: v for k, v in given.items() if k != "sessions"}
    return workload([Layer(FLAGS, flags), base])


__all__ = ["SweepSpec", "sweep_workload"]
