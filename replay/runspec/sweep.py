"""`replay simulate`'s spec: the workload (the same fields and flags as `replay run`'s), the
points it sweeps (policies × session counts × seeds × fleets), the engine model and timing.

A sweep is a list of specs: each point is a `RunSpec` of its own (`SweepSpec.points`, built by
`point`, which `replay.runspec.sim.spec_of` uses too), the spec its run directory's manifest
stores; the simulator runs the config built from it (`replay.runspec.sim.config_of`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from replay.runspec.fields import EngineShape, WorkloadSpec
from replay.runspec.resolve import FLAGS, Layer, build
from replay.runspec.workload import workload
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
    seeds: int = Field(ge=1)
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
            fleets = [(k, r) for k in self.replicas or [1] for r in self.routers or ["round_robin"]]
        workloads = {
            (n, s): build(
                WorkloadSpec,
                [Layer(FLAGS, {"sessions": n}), Layer("replay simulate", self._workload(s))],
            )
            for n in self.sessions
            for s in range(self.seeds)
        }
        return [
            point(
                p,
                workloads[n, s].model_copy(update={"trace": trace, "token_scale": token_scale}),
                self.engine.profile,
                self.timing,
                capacity_blocks=self.engine.capacity_blocks,
                **self.engine.model_dump(include={"host_memory_gb", "host_bandwidth_gbs"}),
                replicas=k,
                router=r,
            )
            for p in self.policies
            for k, r in fleets
            for n in self.sessions
            for s in range(self.seeds)
        ]

    def _workload(self, s: int) -> dict[str, Any]:
        """The workload of seed number `s` (the first is `workload.seed`)."""
        values = self.workload.model_dump(exclude={"sessions"})
        return {**values, "seed": self.workload.seed + s}


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
    from replay.profiles import DEFAULT_MODEL, load_profile
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
    count is checked on its field, as `replay run`'s (`--sessions 0: must be at least 1`)."""
    for n in sessions:
        build(WorkloadSpec, [Layer(FLAGS, {"sessions": n})])
    warmup = TIMED_WARMUP_S if timing == "engine" else W.warmup_s
    base = Layer("replay simulate", {"sessions": max(sessions), "warmup_s": warmup})
    flags = {k: v for k, v in given.items() if k != "sessions"}
    return workload([Layer(FLAGS, flags), base])


__all__ = ["SweepSpec", "point", "sweep_workload"]
