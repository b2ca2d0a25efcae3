"""The run directory's typed files: `Manifest` (manifest.json) and `RunSummary` (summary.json).

Every producer writes through these models and every reader validates through them
(`replay.rundir.read_manifest` / `read_summary`); the field tables of docs/run-directory.md
are tested against them (tests/unit/replay/test_rundir_models.py).

Unknown keys: **forbidden on write** (a producer that adds a key adds a described field here
first), **ignored on read** (a run directory written by an older or newer harness still
opens; the keys this version does not know are dropped, never an error). Shapes older runs of
this version wrote are read as well and normalised (`Manifest._upgrade`): engine `flags` as
a dict (the simulator's policy options) or a string, engines as plain names, `trace` as a
string, `trace_path`/`trace_sha256`, top-level `window`/`sessions`/`working_set_ratio` and
`config.window_s`.
"""

from __future__ import annotations

import math
import unicodedata
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from replay.metric_registry import METRICS as METRIC_REGISTRY
from replay.strict_numbers import refuse_bool
from replay.tier_limits import tier_size_problem

MANIFEST_SCHEMA_VERSION = 1
SUMMARY_SCHEMA_VERSION = 1

# `degraded`: the run ended on time but an engine's error share in the window passed the
# summary's threshold (analysis.summary.ERROR_FLAG); its numbers do not stand for the engine.
RunStatus = Literal["running", "completed", "degraded", "interrupted", "failed"]
# Context key that makes validation tolerate (drop) unknown keys: the read rule above.
READ = "read"
JsonScalar = str | int | float | bool | None


class _Record(BaseModel):
    """extra="forbid" on write; on read (context {READ: True}) unknown keys are dropped."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _before(cls, data: Any, info: ValidationInfo) -> Any:
        data = cls._upgrade(data)
        if isinstance(data, dict) and info.context and info.context.get(READ):
            names = set(cls.model_fields)
            return {k: v for k, v in data.items() if k in names}
        return data

    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """Older shapes of this record, rewritten into the current one (none by default)."""
        return data


def _window(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f"a window is [start_s, end_s], got {value!r}")
    try:
        start, end = float(value[0]), float(value[1])
    except (TypeError, ValueError):
        raise ValueError(f"window bounds must be numbers, got {value!r}") from None
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start or start < 0:
        raise ValueError(f"a window must have 0 <= start < end, got {value!r}")
    return (start, end)


def _token_scale(value: float | None) -> float | None:
    """A stored token scale takes the run spec's range (replay.traces.scale): a scale past
    it ended `replay price` in a decimal traceback, and 0 or a negative priced as 1."""
    from replay.traces.scale import scale_problem  # numpy: loaded only when a scale is read

    if value is not None and (problem := scale_problem(value)) is not None:
        raise ValueError(problem)
    return value


# A window's end may pass the run's duration by float rounding only.
WINDOW_END_SLACK_S = 1e-6


def _window_within(window: tuple[float, float] | None, duration_s: float | None) -> None:
    """A measured window that ends after the run did measured nothing the run ran."""
    if window is None or duration_s is None:
        return
    if window[1] > duration_s + max(WINDOW_END_SLACK_S, 1e-9 * duration_s):
        raise ValueError(
            f"the measured window config.window [{window[0]:g}, {window[1]:g}] s ends after "
            f"the run's length config.duration_s {duration_s:g} s (a window lies within "
            "0..duration_s)"
        )


def run_id_problem(value: str) -> str | None:
    """What is wrong with a run id (None: nothing): it is printed in tables, on the terminal
    and as report.md's heading, so a control character (a newline, an ESC) is refused."""
    for ch in value:
        if unicodedata.category(ch).startswith("C"):
            return (
                f"holds {ch!r}, a control character; a run id is printed on the terminal and "
                "as report headings"
            )
    return None


class _TokenScaled(_Record):
    """A record with a `token_scale` field (declared by each, where it reads best): checked
    as the run spec checks it (`_token_scale`), a true/false refused."""

    @field_validator("token_scale", mode="before", check_fields=False)
    @classmethod
    def _scale_not_a_bool(cls, value: Any) -> Any:
        # typed float, not `Number` (the contract page shows its type): true read as 1
        return refuse_bool(value, "a number")

    @field_validator("token_scale", check_fields=False)
    @classmethod
    def _check_scale(cls, value: float | None) -> float | None:
        return _token_scale(value)


class TraceInfo(_TokenScaled):
    path: str | None = Field(default=None, description="the trace's source: file, folder or HF id")
    sha256: str | None = Field(default=None, description="checksum of the trace's contents")
    format: str | None = Field(default=None, description="weka | mooncake (live runs)")
    trajectories: int | None = Field(
        default=None, description="trajectories in the trace (live runs)"
    )
    token_scale: float | None = Field(
        default=None, description="the trace's token lengths were divided by this (1: full size)"
    )


class EngineEntry(_Record):
    name: str = Field(description="the engine's name in the records' `engine` column")
    kind: str | None = Field(default=None, description="vllm | sglang | flashstate | openai | sim")
    url: str | None = Field(default=None, description="the endpoint, any user:password@ masked")
    model: str | None = Field(
        default=None, description="the served model (or the simulated profile)"
    )
    gpus: int | None = Field(
        default=None, ge=1, strict=True, description="GPUs the engine uses; missing: 1, with a note"
    )
    gpu_type: str | None = Field(
        default=None, description="GPU kind, e.g. h200 (pricing's GPU rate)"
    )
    server_version: str | None = Field(default=None, description="the engine's /version")
    flags: list[str] = Field(
        default_factory=list,
        description="server flags from /get_server_info (key=value), or the simulated "
        "policy's options",
    )
    engine_model: dict[str, Any] | None = Field(
        default=None, description="an emulator's engine model (clock, budgets, capacity, scale)"
    )
    block_size: int | None = Field(default=None, description="the KV block size from /metrics")
    hybrid: dict[str, Any] | None = Field(
        default=None,
        description="a hybrid engine's prefix cache as preflight read it: mamba_cache_mode, "
        "attention / Mamba / engine block sizes, the pool in blocks, and the align-rule probe "
        "(replay.engines.hybrid); null for an engine without recurrent layers",
    )
    replicas: int | None = Field(
        default=None, ge=1, description="replicas behind the engine (gpus counts all of them)"
    )
    fleet: dict[str, Any] | None = Field(
        default=None,
        description="who routes the replicas: the router, its version and parameters, the "
        "replica URLs (replay.client.fleet)",
    )
    context_tokens: int | None = Field(default=None, description="the context length used")
    vocab_size: int | None = Field(
        default=None, description="vocabulary the prompts are drawn from"
    )
    cache_reset: dict[str, Any] | None = Field(
        default=None,
        description="`--reset-cache`: the prefix-cache reset after preflight (route, ok, "
        "attempts, the engine's answer; per replica for a routed fleet); null: not reset",
    )
    preflight: dict[str, bool | None] | None = Field(
        default=None, description="each preflight check and whether it passed"
    )
    preflight_warnings: list[str] = Field(
        default_factory=list, description="failed optional checks (the warm-cache guard)"
    )

    @field_validator("flags", mode="before")
    @classmethod
    def _flags(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return value.split()
        if isinstance(value, dict):  # older simulator runs: the policy's options
            return [f"{k}={v}" for k, v in sorted(value.items())]
        return value


class Limits(_Record):
    request_timeout_s: float | None = Field(
        default=None, description="one request's limit, seconds"
    )
    first_token_timeout_s: float | None = Field(
        default=None, description="limit to the first token"
    )
    stall_timeout_s: float | None = Field(default=None, description="limit between two tokens")


class RunConfig(_TokenScaled):
    """The resolved configuration. Times are seconds in the records' clock."""

    window: tuple[float, float] | None = Field(
        default=None, description="the measured window [start_s, end_s]; missing: the whole run"
    )
    duration_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="the run's length"
    )
    sessions: int | None = Field(default=None, description="concurrent sessions")
    seed: int | None = Field(default=None, description="the workload's seed")
    subagents: str | None = Field(default=None, description="concurrent | inline | skip")
    warmup_s: float | None = Field(default=None, description="first requests spread over this")
    token_scale: float | None = Field(
        default=None, description="token lengths were divided by this; throughputs × it (default 1)"
    )
    time_scale: float | None = Field(default=None, description="the workload ran this much faster")
    clock_scale: float | None = Field(
        default=None, description="records' seconds per wall second (emulators: their --time-scale)"
    )
    gap_cap_s: float | None = Field(default=None, description="tool gaps capped at this")
    start_range: tuple[float, float] | None = Field(
        default=None, description="where in a trajectory sessions start (fractions)"
    )
    start_at: str | None = Field(
        default=None, description="start drawn by request | time (replay.workload)"
    )
    recycle_start: str | None = Field(
        default=None, description="later trajectories start random | first (replay.workload)"
    )
    replayed_duration_s: float | None = Field(
        default=None, description="duration in the trace's clock"
    )
    replayed_window: tuple[float, float] | None = Field(
        default=None, description="the window in the trace's clock"
    )
    salt: int | None = Field(default=None, description="the prompt builder's token salt")
    retries: int | None = Field(default=None, description="retries of a failed request")
    backoff_s: float | None = Field(default=None, description="wait before a retry")
    limits: Limits | None = Field(default=None, description="request time limits")
    scrape_interval_s: float | None = Field(default=None, description="/metrics scrape period")
    slo: dict[str, float | None] | None = Field(
        default=None, description="the SLO the summary judges against (analysis.slo.Slo)"
    )
    # the simulator's
    policy: str | None = Field(default=None, description="simulated cache policy")
    model: str | None = Field(default=None, description="simulated model profile")
    timing: str | None = Field(default=None, description="simulator timing: trace | engine")
    policy_opts: dict[str, JsonScalar] | None = Field(
        default=None, description="the simulated policy's options"
    )
    capacity_blocks: int | None = Field(default=None, description="cache blocks as simulated")
    requested_capacity_blocks: int | None = Field(
        default=None, description="--capacity-blocks as given (null: the profile's)"
    )
    block_tokens: int | None = Field(default=None, description="block size in the trace's tokens")
    full_size_block_tokens: int | None = Field(default=None, description="the full-size block")
    working_set_ratio: float | dict[str, float] | None = Field(
        default=None, description="working set ÷ cache capacity (a number or per engine)"
    )

    @field_validator("window", mode="before")
    @classmethod
    def _check_window(cls, value: Any) -> tuple[float, float] | None:
        return _window(value)

    @field_validator("duration_s")
    @classmethod
    def _check_duration(cls, value: float | None, info: ValidationInfo) -> float | None:
        # `window` is declared (so validated) before `duration_s`: the error names this field
        _window_within(info.data.get("window"), value)
        return value


class EngineEvent(_Record):
    event: str = Field(description="engine_down")
    engine: str = Field(description="the engine's name")
    url: str | None = Field(default=None, description="the URL watched (masked)")
    start_s: float | None = Field(default=None, description="when it went down (records' clock)")
    end_s: float | None = Field(default=None, description="when it served again; null: never")
    detail: str | None = Field(default=None, description="what failed")
    engine_error: str | None = Field(
        default=None, description="the engine's last error line, from its log (--engine-log)"
    )


class Segment(_Record):
    start: str | None = Field(default=None, description="when this segment (a --resume) started")
    salt: int | None = Field(default=None, description="its token salt")


class WorkloadCounts(_Record):
    """How the trace was used: per engine for live runs, one number for a simulated one."""

    trajectories: int | None = Field(default=None, description="trajectories in the trace")
    assignments: int | dict[str, int] | None = Field(
        default=None, description="trajectories started"
    )
    reused_assignments: int | dict[str, int] | None = Field(
        default=None, description="starts that replayed a trajectory again"
    )
    trajectories_replayed: int | None = Field(
        default=None, description="distinct trajectories used"
    )
    subagents: str | None = Field(default=None, description="how subagents were replayed")
    working_set_ratio: float | None = Field(
        default=None, description="the simulator's working set ÷ capacity (window time average)"
    )


class FidelityEntry(_Record):
    drift: dict[str, Any] | None = Field(
        default=None, description="analysis.fidelity's drift check"
    )
    warm_start_hit_rate: float | None = Field(
        default=None, description="hit rate of the first minutes"
    )
    warm_start_excess_hit_rate: float | None = Field(
        default=None, description="hits on prefixes the run had not computed"
    )
    warm_start_flagged: bool | None = Field(default=None, description="the cache was warm at start")


class Manifest(_Record):
    """manifest.json: what ran, with what, and how it ended."""

    schema_version: int = Field(default=MANIFEST_SCHEMA_VERSION, description="this file's schema")
    run_id: str | None = Field(
        default=None, description="the run's id (default: the folder's name)"
    )
    executor: Literal["live", "simulator"] | None = Field(
        default=None,
        description="who wrote the run: the live client (engines or emulators over HTTP) or the simulator",
    )
    command: str | None = Field(default=None, description="the command line, credentials masked")
    harness_version: str | None = Field(default=None, description="replay's version")
    status: RunStatus | None = Field(
        default=None,
        description="how the run ended (`running` while it goes; `degraded`: an engine's "
        "window error share passed 5%, or an engine was down at the end; `interrupted`: "
        "stopped by a signal, or every engine down for 30 s: resumable)",
    )
    start: str | None = Field(default=None, description="UTC start, ISO 8601")
    end: str | None = Field(default=None, description="UTC end, ISO 8601")
    heartbeat: str | None = Field(default=None, description="UTC time of the last heartbeat")
    heartbeat_s: float | None = Field(default=None, description="run seconds at the last heartbeat")
    seed: int | None = Field(default=None, description="the workload's seed")
    trace: TraceInfo | None = Field(default=None, description="the trace replayed")
    config: RunConfig = Field(
        default_factory=lambda: RunConfig(), description="resolved configuration"
    )
    engines: list[EngineEntry] = Field(default_factory=list, description="the engines")
    workload: WorkloadCounts | None = Field(default=None, description="how the trace was used")
    events: list[EngineEvent] = Field(
        default_factory=list, description="engine_down events, with times"
    )
    emulator_restarts: dict[str, int] = Field(
        default_factory=dict, description="emulators the harness restarted, per engine"
    )
    notes: list[str] = Field(default_factory=list, description="lines the writer left")
    error: str | None = Field(default=None, description="the crash that ended the run")
    segments: list[Segment] = Field(default_factory=list, description="resumed segments")
    replay_fidelity: dict[str, FidelityEntry] = Field(
        default_factory=dict, description="per engine: drift counts and the warm-start check"
    )
    emulated: bool | None = Field(default=None, description="every engine was an emulator")
    spec: dict[str, Any] | None = Field(
        default=None,
        description="the run's specification as resolved (replay.runspec.RunSpec, URLs without "
        "credentials): what `replay run --resume` continues; a simulated run's is its sweep "
        "point's (executor `simulated`), which `--resume` refuses",
    )
    dashboard_members: list[str] | None = Field(
        default=None, description="a combined run's member directories (in memory, never written)"
    )

    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        cfg = data.get("config")
        cfg = dict(cfg) if isinstance(cfg, dict) else cfg
        if isinstance(cfg, dict) or cfg is None:
            cfg = cfg or {}
            if "window" not in cfg and "window_s" in cfg:
                cfg["window"] = cfg.pop("window_s")
            for key in ("window", "sessions", "working_set_ratio"):
                if cfg.get(key) is None and data.get(key) is not None:
                    cfg[key] = data.pop(key)
                else:
                    data.pop(key, None)
            if cfg or "config" in data:
                data["config"] = cfg
        trace = data.get("trace")
        if isinstance(trace, str) or (trace is None and "trace_path" in data):
            data["trace"] = {
                "path": trace if isinstance(trace, str) else data.get("trace_path"),
                "sha256": data.get("trace_sha256"),
            }
        elif isinstance(trace, dict) and "path" not in trace and "source" in trace:
            data["trace"] = {k: v for k, v in trace.items() if k != "source"}
            data["trace"]["path"] = trace["source"]
        data.pop("trace_path", None)
        data.pop("trace_sha256", None)
        engines = data.get("engines")
        if isinstance(engines, list):
            data["engines"] = [_old_engine(e) for e in engines]
        return data

    @field_validator("run_id")
    @classmethod
    def _check_run_id(cls, value: str | None) -> str | None:
        if value is not None and (problem := run_id_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("spec")
    @classmethod
    def _check_tiers(cls, spec: dict[str, Any] | None) -> dict[str, Any] | None:
        # The tier sizes that price a run (analysis.manifest): a value past any machine's
        # ended `replay price` in a decimal traceback, a bool or a string passed as 1 or 0.
        engines = (spec or {}).get("engines")
        for i, e in enumerate(engines if isinstance(engines, list) else []):
            for key in ("host_memory_gb", "external_memory_gb"):
                value = e.get(key) if isinstance(e, dict) else None
                if value is not None and (why := tier_size_problem(value)):
                    raise ValueError(f"engines.{i}.{key}: {why}")
        return spec


def _old_engine(item: Any) -> Any:
    if isinstance(item, str):
        return {"name": item}
    if isinstance(item, dict) and "server_flags" in item:
        item = dict(item)
        flags = item.pop("server_flags")
        item.setdefault("flags", flags)
    return item


_VALUE_TYPES: dict[str, Any] = {
    "int": int | None,
    "float": float | None,
    "bool": bool | None,
    "str": str | None,
    "json": dict[str, Any] | None,
}


def _summary_fields() -> dict[str, Any]:
    """One typed field per summary.json metric of the registry (replay.metric_registry), and
    a float for each standard error (`<metric>_se`)."""
    fields: dict[str, Any] = {}
    for m in METRIC_REGISTRY:
        if not m.summary:
            continue
        about = f"{m.description} ({m.unit})" if m.unit and m.fmt != "pct" else m.description
        fields[m.key] = (_VALUE_TYPES[m.value], Field(default=None, description=about))
    for m in METRIC_REGISTRY:
        if m.summary and m.se:
            fields[f"{m.key}_se"] = (
                float | None,
                Field(default=None, description=f"standard error of {m.key} (time bins)"),
            )
    return fields


if TYPE_CHECKING:
    _EngineSummaryFields = BaseModel
else:
    _EngineSummaryFields = create_model(
        "_EngineSummaryFields", __config__=ConfigDict(extra="allow"), **_summary_fields()
    )


class EngineSummary(_EngineSummaryFields):
    """One engine's window metrics: a typed field per metric of the registry
    (replay.metric_registry, which says what each is), each `<metric>_se` its time-bin
    standard error. Keys an executor or an older harness wrote beyond the registry's are
    kept as they are (JSON values); NaN is null. Only the keys a producer set are written."""

    model_config = ConfigDict(extra="allow")

    if TYPE_CHECKING:  # the fields come from the registry at run time

        def __getattr__(self, name: str) -> Any: ...

    @model_serializer(mode="wrap")
    def _only_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        keep = self.model_fields_set | set(self.model_extra or {})
        return {k: v for k, v in data.items() if k in keep}

    def __getitem__(self, key: str) -> Any:
        """A metric by name (a field or an extra key); KeyError when absent."""
        if key in type(self).model_fields and key in self.model_fields_set:
            return getattr(self, key)
        return (self.model_extra or {})[key]

    def get(self, key: str, default: Any = None) -> Any:
        """A metric by name, `default` when absent (the row reads like a mapping)."""
        try:
            return self[key]
        except KeyError:
            return default


class RunSummary(_Record):
    """summary.json: per-engine window metrics, written by analysis.summary only."""

    schema_version: int = Field(default=SUMMARY_SCHEMA_VERSION, description="this file's schema")
    run_id: str | None = Field(default=None, description="the run's id")
    window: tuple[float, float] | None = Field(default=None, description="the measured window")
    window_source: str | None = Field(default=None, description="where the window came from")
    bin_s: float | None = Field(default=None, description="time-bin width of the standard errors")
    notes: list[str] = Field(default_factory=list, description="the run's notes and flags")
    engines: dict[str, EngineSummary] = Field(
        default_factory=dict, description="metrics per engine"
    )
    error: str | None = Field(default=None, description="why the summary could not be built")


__all__ = [
    "MANIFEST_SCHEMA_VERSION",
    "READ",
    "SUMMARY_SCHEMA_VERSION",
    "EngineEntry",
    "EngineEvent",
    "EngineSummary",
    "FidelityEntry",
    "Limits",
    "Manifest",
    "RunConfig",
    "RunStatus",
    "RunSummary",
    "Segment",
    "TraceInfo",
    "WorkloadCounts",
]
