"""The run specification: every setting of a run, each field declaring its flag, its default
and its validation once.

`replay run`, `replay simulate` and `replay serve-sim` take their shared flags from these
fields (`replay.runspec.flags`), one layered resolution builds a `RunSpec` from flags, a config
file and the command's base layer (`replay.runspec.resolve`), and the manifest stores the spec
as resolved (`Manifest.spec`), which `replay run --resume` validates back. `replay simulate`
resolves one per point of its sweep (`replay.runspec.sweep`): a simulated engine's policy,
timing, capacity, replicas and router are its `EngineRun`'s fields.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from replay.client.config import EngineSpec
from replay.runspec.fields import EngineShape, LimitsSpec, WorkloadSpec
from replay.strict_numbers import Whole

Executor = Literal["live", "emulated", "simulated"]


class EngineRun(EngineShape):
    """One engine of the run: how the client reaches it and, for an emulated or simulated
    one, what models it (the profile, capacity, replicas and router of `EngineShape`)."""

    engine: EngineSpec = Field(description="name, adapter kind, URL, model id, GPUs")
    executor: Executor = Field(description="live (a real server), emulated or simulated")
    policy: str | None = Field(default=None, description="cache policy; None: the engine's own")
    # A simulated engine's (`replay simulate`); None elsewhere, so a live manifest's spec
    # (written without nulls) does not change.
    timing: Literal["trace", "engine"] | None = Field(
        default=None,
        description="simulated: trace (recorded durations) or engine (the engine model's clock)",
    )
    policy_opts: dict[str, Any] | None = Field(
        default=None, description="simulated: the policy's options over its own"
    )
    engine_rules: str | None = Field(
        default=None, description="simulated: changes to the engine's memory rules, NAME=VALUE,..."
    )
    admission: str | None = Field(
        default=None, description="simulated: park | schedule; None: the engine's own"
    )
    router_opts: dict[str, Any] | None = Field(
        default=None, description="simulated: the router's parameters over its defaults"
    )

    @property
    def name(self) -> str:
        return self.engine.name


class RunSpec(BaseModel):
    """A run as resolved: the workload, the engines, the limits and the SLO. The price sheet
    is each engine's `gpus`/`gpu_type` (rates in configs/pricing, read by `replay price`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: WorkloadSpec = Field(default_factory=lambda: WorkloadSpec())
    engines: list[EngineRun] = Field(default_factory=list)
    limits: LimitsSpec = Field(default_factory=lambda: LimitsSpec())
    slo: dict[str, float | None] | None = Field(
        default=None, description="analysis.slo.Slo as a dict (the defaults at least)"
    )
    sample: bool = Field(default=True, description="the trace is the bundled sample")
    workers: Whole = Field(
        default=1, ge=1, description="client processes, each owning every K-th session slot"
    )
    ray: str | None = Field(
        default=None, description="a Ray cluster the client workers run on ('local': here)"
    )

    @property
    def emulated(self) -> bool:
        return bool(self.engines) and all(e.executor == "emulated" for e in self.engines)

    @property
    def simulated(self) -> bool:
        return bool(self.engines) and all(e.executor == "simulated" for e in self.engines)


__all__ = ["EngineRun", "EngineShape", "LimitsSpec", "RunSpec", "WorkloadSpec"]
