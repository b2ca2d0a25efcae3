"""Simulating a run's seed band (`replay.band` holds the band's data and file): the run's
point replayed by the simulator, engine timing, over `seeds` seeds from the run's own, and the
point's offered load over the demo's from a trace-timing replay of each seed
(`replay.sim.offered`)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from replay.band import Band, EngineBand, SeedPoint
from replay.profiles import DEFAULT_MODEL
from replay.sim.offered import DEMO_PROMPT_PER_GPU, repace
from replay.sim.runner import SimConfig
from replay.sim.sweep import results
from replay.traces.model import Trace


def band_configs(spec: Any, seeds: int) -> list[SimConfig]:
    """The simulator's configs for a run's point (`spec`: the run's `RunSpec`), `seeds` seeds
    from the run's own: one per engine and seed, engine timing. Empty when the point has no
    simulator twin (an engine that is not emulated, or one behind a router)."""
    if seeds < 1 or not spec.engines:
        return []
    if any(e.executor != "emulated" or e.replicas > 1 for e in spec.engines):
        return []
    # The workload exactly as the run replayed it (its window, and its warm-up clamped into a
    # short run), resolved by the same call the run's plan is made with.
    w = spec.workload.config(clamp_warmup=True)
    common: dict[str, Any] = {
        "sessions": w.sessions,
        "timing": "engine",
        "duration_s": w.duration_s,
        "subagents": w.subagents,
        "token_scale": spec.workload.token_scale or 1.0,
        "warmup_s": w.warmup_s,
        "gap_cap_s": w.gap_cap_s,
        "window": w.window,
    }
    return [
        SimConfig(
            policy=e.policy or e.name,
            seed=w.seed + k,
            model=e.profile or DEFAULT_MODEL,
            capacity_blocks=e.capacity_blocks,
            **common,
        )
        for e in spec.engines
        for k in range(seeds)
    ]


def simulate_band(trace: Trace, spec: Any, seeds: int, workers: int | None = None) -> Band | None:
    """The band of `spec`'s point over `seeds` seeds (None: the point has no simulator twin)."""
    configs = band_configs(spec, seeds)
    if not configs:
        return None
    # The offered load of each seed: the same point on the trace's own clock (inputs only).
    paced = [replace(c, timing="trace", policy="flashstate") for c in configs[:seeds]]
    summaries: dict[tuple[str, int], dict[str, Any]] = {}
    offered: dict[int, float] = {}
    for res in results(trace, configs + paced, workers or min(2, os.cpu_count() or 1)):
        c = res.config
        if c.timing == "trace":
            p = repace(res.records, c.window, c.token_scale)
            if p is not None:
                offered[c.seed] = p["prompt_per_gpu"] / DEMO_PROMPT_PER_GPU
        else:
            summaries[(c.policy, c.seed)] = res.summary
    engines = []
    for e in spec.engines:
        policy = e.policy or e.name
        points = []
        for k in range(seeds):
            s = summaries[(policy, spec.workload.seed + k)]
            points.append(
                SeedPoint(
                    seed=spec.workload.seed + k,
                    hit_rate=float(s["hit_rate"]),
                    ideal_hit_rate=float(s["ideal_hit_rate"]),
                    ttft_p50_s=float(s["ttft_p50_s"]),
                    output_tokens_per_min=float(s["output_tokens_per_min"]),
                )
            )
        engines.append(EngineBand(engine=e.name, policy=policy, points=points))
    return Band(
        sessions=spec.workload.sessions,
        seeds=[spec.workload.seed + k for k in range(seeds)],
        timing="engine",
        executor="sim-engine",
        engines=engines,
        offered_vs_demo=[offered[s] for s in sorted(offered)],
    )


__all__ = ["band_configs", "simulate_band"]
