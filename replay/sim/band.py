"""Simulating a run's seed band (`replay.band` holds the band's data and file): the run's
point replayed by the simulator, engine timing, over `seeds` seeds from the run's own, and the
point's offered load over the demo's from a trace-timing replay of each seed
(`replay.sim.offered`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from replay.band import Band, EngineBand, SeedPoint
from replay.sim.offered import DEMO_PROMPT_PER_GPU, repace
from replay.sim.runner import SimConfig
from replay.sim.sweep import results
from replay.traces.model import Trace


def simulate_band(
    trace: Trace, points: Mapping[str, Sequence[SimConfig]], workers: int | None = None
) -> Band | None:
    """The band of a run's point: `points` holds each engine's configs, one per seed (built
    from the run's spec by `replay.runspec.sweep.band_configs`); None: no engine has any."""
    configs = [c for engine in points.values() for c in engine]
    if not configs:
        return None
    first = next(iter(points.values()))
    # The offered load of each seed: the same point on the trace's own clock (inputs only).
    paced = [replace(c, timing="trace", policy="flashstate") for c in first]
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
    for name, engine in points.items():
        seeds = []
        for c in engine:
            s = summaries[(c.policy, c.seed)]
            seeds.append(
                SeedPoint(
                    seed=c.seed,
                    hit_rate=float(s["hit_rate"]),
                    ideal_hit_rate=float(s["ideal_hit_rate"]),
                    ttft_p50_s=float(s["ttft_p50_s"]),
                    output_tokens_per_min=float(s["output_tokens_per_min"]),
                )
            )
        engines.append(EngineBand(engine=name, policy=engine[0].policy, points=seeds))
    return Band(
        sessions=first[0].sessions,
        seeds=[c.seed for c in first],
        timing="engine",
        executor="sim-engine",
        engines=engines,
        offered_vs_demo=[offered[s] for s in sorted(offered)],
    )


__all__ = ["simulate_band"]
