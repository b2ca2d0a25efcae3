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


def seed_point(seed: int, summary: Mapping[str, Any]) -> SeedPoint | None:
    """One seed's point of a band from its run's summary row (`replay.sim.measures`); None
    where the run measured no request: its hit rates and TTFT are unknown (None in the row),
    and a point of 0.0 (or NaN) would read as a seed that fell off the cliff."""
    keys = ("hit_rate", "ideal_hit_rate", "ttft_p50_s", "output_tokens_per_min")
    figures = [summary[k] for k in keys]
    if any(x is None for x in figures):
        return None
    return SeedPoint(seed, *(float(x) for x in figures))


def simulate_band(
    trace: Trace, points: Mapping[str, Sequence[SimConfig]], workers: int | None = None
) -> Band | None:
    """The band of a run's point: `points` holds each engine's configs, one per seed (built
    from the run's spec by `replay.runspec.sweep.band_configs`). A seed on which any engine
    measured no request (`seed_point`) is left out for every engine, so the band's seeds and
    each engine's points stay one list; None: no engine has any config, or no seed is left."""
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
    seeds = {
        name: [(c.seed, seed_point(c.seed, summaries[(c.policy, c.seed)])) for c in engine]
        for name, engine in points.items()
    }
    empty = {s for got in seeds.values() for s, p in got if p is None}
    kept = [c.seed for c in first if c.seed not in empty]
    if not kept:
        return None
    engines = [
        EngineBand(
            engine=name,
            policy=engine[0].policy,
            points=[p for s, p in seeds[name] if p is not None and s not in empty],
        )
        for name, engine in points.items()
    ]
    return Band(
        sessions=first[0].sessions,
        seeds=kept,
        timing="engine",
        executor="sim-engine",
        engines=engines,
        offered_vs_demo=[offered[s] for s in sorted(offered) if s not in empty],
    )


__all__ = ["seed_point", "simulate_band"]
