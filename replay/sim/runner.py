"""One simulated run: a trace, a policy, a session count and a seed in; request records and
a summary row out (`simulate`), optionally written as a run directory (`write_run`)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from replay.profiles import ModelProfile, load_profile
from replay.records import RequestRecord
from replay.rundir import RunWriter
from replay.sim.cache import ResumeInfo
from replay.sim.driver import EventLoop, Sessions, SimRequest
from replay.sim.executors import EngineExecutor, TraceExecutor
from replay.sim.policies import make_policy
from replay.sim.policy_base import engine_cache_blocks
from replay.sim.summary import Occupancy, summarize
from replay.traces.model import Trace
from replay.workload import Workload, WorkloadConfig

Timing = Literal["trace", "engine"]
TIMINGS: tuple[str, ...] = ("trace", "engine")


@dataclass(frozen=True)
class SimConfig:
    """What one simulated run replays, and how."""

    policy: str
    sessions: int
    seed: int = 0
    model: str = "glm-5.3-flash"
    timing: Timing = "trace"
    duration_s: float = 2700.0
    window: tuple[float, float] = (900.0, 2700.0)
    policy_opts: dict[str, Any] = field(default_factory=dict)
    capacity_blocks: int | None = None  # None: the policy's (the profile's engine cache)

    @property
    def run_name(self) -> str:
        return f"{self.policy}-s{self.sessions}-seed{self.seed}"


@dataclass
class SimResult:
    config: SimConfig
    records: list[RequestRecord]
    summary: dict[str, Any]
    wall_seconds: float


def simulate(trace: Trace, cfg: SimConfig, profile: ModelProfile | None = None) -> SimResult:
    """Replay `trace` under `cfg` on a virtual clock."""
    t0 = time.perf_counter()
    profile = profile or load_profile(cfg.model)
    cache = make_policy(cfg.policy, profile, **cfg.policy_opts).make_cache(
        profile, cfg.capacity_blocks
    )
    wcfg = WorkloadConfig(
        sessions=cfg.sessions, duration_s=cfg.duration_s, window=cfg.window, seed=cfg.seed
    )
    loop = EventLoop()
    occ = Occupancy(cfg.window)
    B, C = profile.block_tokens, profile.checkpoint_blocks
    sessions: Sessions | None = None

    def sample(now: float) -> None:
        assert sessions is not None
        ws = sum(-(-t // B) + C for t in sessions.context_blocks.values())
        occ.add(now, cache.resident_states, cache.used_blocks, ws)

    executor_cls = EngineExecutor if cfg.timing == "engine" else TraceExecutor
    executor = executor_cls(loop, cache, profile, sample)
    sessions = Sessions(loop, executor, Workload(trace, wcfg), cfg.duration_s)
    sessions.start()
    try:
        loop.run(cfg.duration_s)
    finally:
        close = getattr(cache, "close", None)  # a native cache's worker process
        if close is not None:
            close()
    records = [to_record(r, cfg.policy) for r in sessions.requests if r.sent_s is not None]
    wall = time.perf_counter() - t0
    summary = summarize(
        records,
        occ,
        profile,
        policy=cfg.policy,
        sessions=cfg.sessions,
        seed=cfg.seed,
        timing=cfg.timing,
        wall_seconds=wall,
        capacity=cfg.capacity_blocks or engine_cache_blocks(profile),
        evictions=cache.evictions,
        refusals=cache.admission_refusals,
    )
    return SimResult(cfg, records, summary, wall)


def to_record(r: SimRequest, engine: str) -> RequestRecord:
    info = r.info
    rec = RequestRecord(
        engine=engine,
        session=r.slot,
        trajectory=r.trajectory.id,
        agent=r.trajectory.agent_id or "main",
        turn=r.index,
        scheduled_s=r.scheduled_s,
        sent_s=r.sent_s,
        first_token_s=r.first_token_s,
        done_s=r.done_s,
        prompt_tokens=r.n,
        output_tokens=r.out if r.done_s is not None and r.status == "ok" else 0,
        expected_output_tokens=r.out,
        finish_reason="length" if r.status == "ok" and r.done_s is not None else None,
        status="ok" if r.status == "ok" and r.done_s is not None else "overflow",
        error=r.error,
        tool_gap_s=r.gap_s,
        priming=r.priming,
    )
    if r.status == "ok" and r.done_s is None:  # still running at the end of the run
        rec.status, rec.error = "cancelled", "the run ended before it completed"
    if isinstance(info, ResumeInfo):
        rec.cached_tokens = info.resume_pos
        rec.ideal_cached_tokens = info.ideal_pos
        rec.resume_pos = info.resume_pos
        rec.checkpoint_pos = info.checkpoint_pos
        rec.resident_pos = info.resident_pos
        rec.placement_miss = info.placement_miss
        rec.dependency_miss = info.dependency_miss
        rec.capacity_miss = info.capacity_miss
    return rec


def write_run(
    result: SimResult,
    run_dir: Path,
    *,
    command: str = "replay simulate",
    trace_source: str = "",
    trace_sha256: str | None = None,
) -> Path:
    """The run directory (DESIGN.md contract) for one simulated run."""
    cfg = result.config
    profile = load_profile(cfg.model)
    manifest = {
        "command": command,
        "executor": "simulator",
        "config": {**asdict(cfg), "window": list(cfg.window)},
        "trace": {"path": trace_source, "sha256": trace_sha256},
        "seed": cfg.seed,
        "engines": [
            {
                "name": cfg.policy,
                "kind": "sim",
                "url": None,
                "model": profile.model,
                "gpus": profile.gpus,
                "gpu_type": profile.gpu_type,
                "server_version": None,
                "flags": cfg.policy_opts,
            }
        ],
    }
    with RunWriter(run_dir, manifest) as w:
        for rec in result.records:
            w.add(rec)
        w.write_summary({"engines": {cfg.policy: result.summary}, "simulator": result.summary})
    return run_dir
