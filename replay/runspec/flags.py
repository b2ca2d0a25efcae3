"""The command-line flags of the spec's fields, declared once: `replay run`, `replay simulate`
and `replay serve-sim` (and `replay price` and `replay report`, for the window) annotate their
parameters with these (`sessions: flags.Sessions = None`), so a flag's name and help are the
field's (`replay.runspec.model`) and every command that takes a setting takes it under one name.

Every flag defaults to None ("not given"): the layered resolution (`replay.runspec.resolve`)
fills in the config file's value or the command's base layer, and validates the result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from replay.runspec.fields import EngineShape, LimitsSpec, WorkloadSpec, aliases_of, flag_of


def option(model: type[BaseModel], key: str, help: str | None = None) -> Any:
    """The typer option of `model.key`: its flag (and the field's older names) and its help."""
    info = model.model_fields[key]
    flag = flag_of(info)
    assert flag is not None, f"{model.__name__}.{key} declares no flag"
    return typer.Option(flag, *aliases_of(info), help=help or info.description)


def option_default(model: type[BaseModel], key: str) -> Any:
    """`option` as a parameter's default (`x: int | None = option_default(...)`, not given:
    None), for a command whose parameters another layer declares: serve-sim's, the
    emulator's (`replay.emulator.cli.SharedOptions`)."""
    info = model.model_fields[key]
    flag = flag_of(info)
    assert flag is not None, f"{model.__name__}.{key} declares no flag"
    return typer.Option(None, flag, *aliases_of(info), help=info.description)


def workload_flags(**given: Any) -> dict[str, Any]:
    """The workload fields the flags gave (the flags layer), keyed by field."""
    return {k: v for k, v in given.items() if k in WorkloadSpec.model_fields}


# The workload: `replay run` and `replay simulate` (simulate's --sessions is a list).
Trace = Annotated[str | None, option(WorkloadSpec, "trace")]
Sessions = Annotated[int | None, option(WorkloadSpec, "sessions")]
SessionsList = Annotated[
    str | None,
    option(WorkloadSpec, "sessions", help="Concurrent sessions: a comma list, e.g. 16,32,48."),
]
DurationMin = Annotated[float | None, option(WorkloadSpec, "duration_min")]
Window = Annotated[str | None, option(WorkloadSpec, "window")]
# The same flag on a run that exists (`replay price RUN_DIR`, `replay report`).
RunWindow = Annotated[
    str | None,
    option(WorkloadSpec, "window", help="Measured minutes A-B (default: each run's own window)."),
]
TimeScale = Annotated[float | None, option(WorkloadSpec, "time_scale")]
Seed = Annotated[int | None, option(WorkloadSpec, "seed")]
GapCapS = Annotated[float | None, option(WorkloadSpec, "gap_cap_s")]
WarmupS = Annotated[float | None, option(WorkloadSpec, "warmup_s")]
Subagents = Annotated[str | None, option(WorkloadSpec, "subagents")]
TokenScale = Annotated[float | None, option(WorkloadSpec, "token_scale")]
Preset = Annotated[str | None, option(WorkloadSpec, "preset")]
StartRange = Annotated[str | None, option(WorkloadSpec, "start_range")]
StartAt = Annotated[str | None, option(WorkloadSpec, "start_at")]
RecycleStart = Annotated[str | None, option(WorkloadSpec, "recycle_start")]

# A live run's limits.
Retries = Annotated[int | None, option(LimitsSpec, "retries")]
StallTimeoutS = Annotated[float | None, option(LimitsSpec, "stall_timeout_s")]
RequestTimeoutS = Annotated[float | None, option(LimitsSpec, "request_timeout_s")]

# What models an engine (simulate, serve-sim), and fleets: N replicas behind a router.
Model = Annotated[str | None, option(EngineShape, "profile")]
CapacityBlocks = Annotated[int | None, option(EngineShape, "capacity_blocks")]
HostMemoryGb = Annotated[float | None, option(EngineShape, "host_memory_gb")]
HostBandwidthGbs = Annotated[float | None, option(EngineShape, "host_bandwidth_gbs")]
ExternalMemoryGb = Annotated[float | None, option(EngineShape, "external_memory_gb")]
ExternalBandwidthGbs = Annotated[float | None, option(EngineShape, "external_bandwidth_gbs")]
ExternalStore = Annotated[str | None, option(EngineShape, "external_store")]
Replicas = Annotated[int | None, option(EngineShape, "replicas")]
Router = Annotated[str | None, option(EngineShape, "router")]
# `replay simulate` sweeps comma lists of them.
ReplicasList = Annotated[
    str | None,
    option(
        EngineShape,
        "replicas",
        "Copies of each engine behind --router, on one clock (a comma list sweeps).",
    ),
]
RouterList = Annotated[
    str | None, option(EngineShape, "router", "Router over the replicas (a comma list sweeps).")
]

Out = Annotated[Path | None, typer.Option("--out", help="Run directory (runs/<run-id>).")]

__all__ = [
    "CapacityBlocks",
    "DurationMin",
    "GapCapS",
    "Model",
    "Out",
    "Preset",
    "RecycleStart",
    "Replicas",
    "ReplicasList",
    "RequestTimeoutS",
    "Retries",
    "Router",
    "RouterList",
    "RunWindow",
    "Seed",
    "Sessions",
    "SessionsList",
    "StallTimeoutS",
    "StartAt",
    "StartRange",
    "Subagents",
    "TimeScale",
    "TokenScale",
    "Trace",
    "WarmupS",
    "Window",
    "option",
    "option_default",
    "workload_flags",
]


def given_flags(values: dict[str, Any], model: type[BaseModel] = WorkloadSpec) -> dict[str, Any]:
    """`{field: value}` of a command's flags for one spec model's fields (the workload's by
    default) as `{flag: value}` (for messages)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        flag = flag_of(model.model_fields[key])
        out[flag or key] = value
    return out
