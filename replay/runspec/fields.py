"""The settings every command shares, each field declaring its flag, default and check once:
the workload, a live run's limits, and what models one engine. `replay.runspec.flags` makes the
command-line options of these fields; this module imports nothing of the client or emulator,
so the emulator's own command line (a child process) reads it cheaply.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.fields import FieldInfo

from replay.fleet.base import MAX_REPLICAS
from replay.presets import PRESETS
from replay.strict_numbers import Number, Whole
from replay.tier_limits import MAX_LINK_GBS, MAX_TIER_GB
from replay.windows import Minutes
from replay.workload import DEFAULT_WORKLOAD as W
from replay.workload import (
    TIMED_WARMUP_S,
    RecycleStart,
    StartAt,
    SubagentMode,
    WorkloadConfig,
)

# Whole numbers a run writes (manifest.json, the parquet) must fit 64 bits: JSON and Arrow
# writers refuse bigger ones, which used to surface as a traceback after the run had started.
INT64_MAX = 2**63 - 1


def seed_span_error(seed: int, count: int, flag: str) -> str | None:
    """Why `count` seeds from `seed` (`seed`, +1, ...) do not fit a run's 64-bit whole
    numbers, naming `flag` (the count's flag), or None."""
    last = seed + count - 1
    if last <= INT64_MAX:
        return None
    return (
        f"{flag} {count}: from --seed {seed} the last seed would be {last}, past 2^63 - 1 "
        f"(a run's files hold 64-bit whole numbers); lower --seed or {flag}"
    )


# A year of the trace's clock: a longer run overflows the clocks that time it (nanosecond
# deadlines) long before it could end; no recorded agent trace comes near it (the traces'
# loader holds their times to the same year, `replay.traces.fields.MAX_TRACE_S`, without
# importing this layer).
MAX_DURATION_MIN = 525_600.0


def flagged(default: Any, flag: str, help: str, *aliases: str, **rules: Any) -> Any:
    """A field with its command-line flag (and older names of it), read back by `flag_of`
    and `replay.runspec.flags`."""
    extra: dict[str, Any] = {"flag": flag, "aliases": list(aliases)}
    return Field(default, description=help, json_schema_extra=extra, **rules)


def flag_of(field: FieldInfo) -> str | None:
    extra = field.json_schema_extra
    value = extra.get("flag") if isinstance(extra, dict) else None
    return value if isinstance(value, str) else None


def aliases_of(field: FieldInfo) -> list[str]:
    extra = field.json_schema_extra
    value = extra.get("aliases") if isinstance(extra, dict) else None
    return [str(v) for v in value] if isinstance(value, list) else []


def fraction_pair(value: object) -> tuple[float, float] | None:
    """`A-B` in fractions of a trajectory (`0.25-0.75`), or a pair: the check of
    `WorkloadSpec.start_range` (None: not given)."""
    if value is None:
        return None
    try:
        if isinstance(value, list | tuple) and len(value) == 2:
            lo, hi = float(value[0]), float(value[1])
        else:
            a, sep, b = str(value).strip().partition("-")
            if not sep:
                raise ValueError
            lo, hi = float(a), float(b)
    except (TypeError, ValueError):
        raise ValueError("expected A-B in fractions of a trajectory, e.g. 0.25-0.75") from None
    if not 0 <= lo <= hi <= 1:
        raise ValueError("need 0 ≤ A ≤ B ≤ 1, e.g. 0.25-0.75")
    return lo, hi


def known_preset(name: str | None) -> str | None:
    """A preset of `replay.presets`: the one check of a preset's name."""
    if name is not None and name not in PRESETS:
        raise ValueError(f"unknown preset; choose one of {', '.join(PRESETS)}")
    return name


class WorkloadSpec(BaseModel):
    """What is replayed (seconds and minutes of the replayed, unscaled clock)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    trace: str | None = flagged(
        None, "--trace", "Trace file, folder or hf:owner/name (default: the bundled sample)."
    )
    sessions: Whole = flagged(
        W.sessions, "--sessions", f"Concurrent sessions ({W.sessions}).", ge=1
    )
    duration_min: Number = flagged(
        W.duration_s / 60,
        "--duration-min",
        f"Run length in minutes of the trace's clock ({W.duration_s / 60:g}).",
        gt=0,
        le=MAX_DURATION_MIN,
    )
    window: Minutes | None = flagged(
        None,
        "--window",
        f"Measured minutes A-B ({W.window[0] / 60:g}-{W.window[1] / 60:g}: the last two "
        "thirds of the run).",
    )
    time_scale: Number = flagged(
        1.0,
        "--time-scale",
        "Run X times faster than real time: the modelled engines' steps, the trace's gaps and "
        "the duration divided by X.",
        gt=0,
    )
    seed: Whole = flagged(W.seed, "--seed", f"Workload seed ({W.seed}).", ge=0, le=INT64_MAX)
    gap_cap_s: Number = flagged(
        W.gap_cap_s, "--gap-cap-s", f"Tool-gap cap ({W.gap_cap_s:g}).", ge=0
    )
    warmup_s: Number = flagged(
        TIMED_WARMUP_S,
        "--warmup-s",
        "Spread the sessions' first requests over this many seconds "
        f"({TIMED_WARMUP_S:g} for a timed replay; {W.warmup_s:g} with trace timing).",
        ge=0,
    )
    # A string here: the replay rules name a bad mode (WorkloadError, field 'subagents').
    subagents: str = flagged(
        W.subagents,
        "--subagents",
        "concurrent (default: child sessions beside the parent) | inline (in the parent's "
        "slot, the parent waiting) | skip (left out, as the source's simulation).",
    )
    preset: Annotated[str | None, AfterValidator(known_preset)] = flagged(
        None,
        "--preset",
        f"A peer benchmark's replay rules for the workload fields not given ({', '.join(PRESETS)}"
        ": aiperf's AgentX scenario; docs/field-numbers.md).",
    )
    # The start rules (None: the replay's own, WorkloadConfig's); presets set them.
    start_range: Annotated[tuple[float, float] | None, BeforeValidator(fraction_pair)] = flagged(
        None,
        "--start-range",
        f"Where a trajectory starts, A-B in fractions of it ({W.start_lo:g}-{W.start_hi:g}).",
    )
    start_at: str | None = flagged(
        None,
        "--start-at",
        "request (default: a random request of the start range) | time (the first request "
        "after a random instant of it, as aiperf's agentic replay).",
    )
    recycle_start: str | None = flagged(
        None,
        "--recycle-start",
        "random (default: a session's later trajectories start in the start range, primed) | "
        "first (at their first request, as aiperf's lanes).",
    )
    token_scale: Number | None = flagged(
        None,
        "--token-scale",
        "The divisor of the trace's token lengths, for a trace that does not declare it (a "
        "trace's own token_scale is used; a different value is an error).",
    )

    def config(self, sessions: int | None = None, clamp_warmup: bool = False) -> WorkloadConfig:
        """The replay rules' config (`replay.workload`); `clamp_warmup`: a warm-up longer than
        half the run is cut to half (a timed replay's default on a short run)."""
        duration_s = self.duration_min * 60
        lo, hi = self.window or (0.0, self.duration_min)
        warmup = min(self.warmup_s, duration_s / 2) if clamp_warmup else self.warmup_s
        start_lo, start_hi = self.start_range or (W.start_lo, W.start_hi)
        return WorkloadConfig(
            sessions=self.sessions if sessions is None else sessions,
            duration_s=duration_s,
            window=(lo * 60, hi * 60),
            gap_cap_s=self.gap_cap_s,
            start_lo=start_lo,
            start_hi=start_hi,
            seed=self.seed,
            subagents=cast(SubagentMode, self.subagents),
            warmup_s=warmup,
            start_at=cast(StartAt, self.start_at or W.start_at),
            recycle_start=cast(RecycleStart, self.recycle_start or W.recycle_start),
        )


# A live run's limits (the client's defaults until this spec held them).
_RETRIES, _STALL_S, _REQUEST_S = 3, 120.0, 3600.0


class LimitsSpec(BaseModel):
    """How long a live run waits on an engine, and how often it retries."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    retries: Whole = flagged(_RETRIES, "--retries", f"Retries of a failed turn ({_RETRIES}).", ge=0)
    stall_timeout_s: Number = flagged(
        _STALL_S, "--stall-timeout-s", f"No-token stall limit, seconds ({_STALL_S:g}).", gt=0
    )
    request_timeout_s: Number = flagged(
        _REQUEST_S, "--request-timeout-s", f"Whole-request limit, seconds ({_REQUEST_S:g}).", gt=0
    )


def known_store(name: str | None) -> str | None:
    """An external store the engine model knows (`replay.sim.cache.tiers`, rule 5)."""
    if name is None:
        return None
    from replay.sim.cache.tiers import STORE_HOLDS_STATES

    if name not in STORE_HOLDS_STATES:
        raise ValueError(f"unknown external store; choose one of {', '.join(STORE_HOLDS_STATES)}")
    return name


def known_router(name: str | None) -> str | None:
    """A router of `replay.fleet`, or `external` (a real one in front of the replicas): the
    one check of a router's name, whichever command or file gives it."""
    if name is None:
        return None
    from replay.fleet.registry import EXTERNAL, router_names

    if name not in (*router_names(), EXTERNAL):
        raise ValueError(
            f"unknown router; choose one of {', '.join(router_names())}, or {EXTERNAL} "
            "(replay run: a real router in front of the replicas)"
        )
    return name


class EngineShape(BaseModel):
    """What models one engine (an emulator's or a simulated one's), and room for a fleet:
    `replicas` copies behind `router`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str | None = flagged(
        None, "--model", "Model profile: a name in configs/models or a YAML path."
    )
    capacity_blocks: Whole | None = flagged(
        None,
        "--capacity-blocks",
        "Cache size in blocks per engine (default: the profile's blocks_per_engine).",
        "--blocks",
        gt=0,
        le=INT64_MAX,
    )
    # A host-memory tier (issue 34, replay.sim.cache.tiers); None (or 0): the GPU's cache only.
    host_memory_gb: Number | None = flagged(
        None,
        "--host-memory-gb",
        "Host memory (GiB) per engine as a second cache tier (default 0: none; docs/cache-tiers.md).",
        ge=0,
        le=MAX_TIER_GB,
    )
    host_bandwidth_gbs: Number | None = flagged(
        None,
        "--host-bandwidth-gbs",
        "Host-to-GPU bandwidth per GPU, GB/s, that loads from host memory take (default 54: PCIe "
        "Gen5 x16 as measured; an assumption for the profile's GPUs).",
        gt=0,
        le=MAX_LINK_GBS,
    )
    # An external store behind host memory (issue 34, replay.sim.cache.tiers rule 5).
    external_memory_gb: Number | None = flagged(
        None,
        "--external-memory-gb",
        "External store (GiB) per engine behind host memory, a third cache tier (default 0: "
        "none; needs --host-memory-gb; docs/cache-tiers.md).",
        ge=0,
        le=MAX_TIER_GB,
    )
    external_bandwidth_gbs: Number | None = flagged(
        None,
        "--external-bandwidth-gbs",
        "Bandwidth per GPU, GB/s, of loads from the external store into host memory (default "
        "54, as the host link: an assumption, a store in local host memory).",
        gt=0,
        le=MAX_LINK_GBS,
    )
    external_store: Annotated[str | None, AfterValidator(known_store)] = flagged(
        None,
        "--external-store",
        "What the external store is: mooncake (KV and Mamba states; the default) or lmcache "
        "(KV only: a hybrid model's resume finds no state there).",
    )
    # SGLang HiCache's split of host memory: the share of its bytes the host KV pool gets
    # (the rest: the host Mamba pool); None: the engine's own rule (`replay.sim.cache.tiers`).
    host_kv_share: Number | None = flagged(
        None,
        "--kv-share",
        "Share of host memory for the host KV pool, the rest for the state pool (SGLang "
        "HiCache only; default: the engine's own split, as its device pools).",
        ge=0,
        le=1,
    )
    replicas: Whole = flagged(
        1, "--replicas", "Copies of each engine behind a router.", ge=1, le=MAX_REPLICAS
    )
    router: Annotated[str | None, AfterValidator(known_router)] = flagged(
        None, "--router", "Routing policy over the replicas."
    )
