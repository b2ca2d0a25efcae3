"""The seed band of a run's point: the same point simulated over several seeds.

This module is the band's data and its file (`band.json` in the run directory), read by the
final table, the report and the dashboard; `replay.sim.band` simulates it.

Near a cache cliff one seed misleads: at the embedded default's load the same engine model
keeps FlashState's hit rate near 80% on one seed and drops it to 33% on the next (issue 32,
docs/embedded-default.md). So an emulated run is followed by the simulator on the same point
(trace, sessions, duration, window, subagents, warm-up, each engine's policy, profile and
cache, engine timing) over `seeds` seeds starting at the run's own; the emulators and the
simulator share the engine model (docs/twin-check.md), so the band is the run's twin over
seeds. It is written beside the run as `band.json` and read by the final table, the report
and the dashboard.

**Held or fell.** A seed *held* an engine when its hit rate is at least half its ideal hit
rate (`HELD_SHARE`), the rule `scripts/hybrid_twin.py` uses for the real hybrid engine's
cliff. On the sample at 24 / 37 / 48 sessions, seeds 0-9, the rule splits all 90 seeds where
their TTFT p50 splits (held ≤ 3.9 s, fell ≥ 4.2 s); the figures are in
docs/embedded-default.md. An engine is **on the cliff** when its band spans it: some seeds
held, some fell.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BAND_FILE = "band.json"
HELD_SHARE = 0.5  # held: hit rate ≥ this share of the ideal hit rate (the cliff rule)
DEFAULT_SEEDS = 10  # ~1 s of CPU per engine and seed at the default's point (2 workers)


@dataclass(frozen=True)
class SeedPoint:
    """One seed of one engine: its window figures (full-size token throughput)."""

    seed: int
    hit_rate: float
    ideal_hit_rate: float
    ttft_p50_s: float
    output_tokens_per_min: float

    @property
    def held(self) -> bool:
        return self.hit_rate >= HELD_SHARE * self.ideal_hit_rate


@dataclass
class EngineBand:
    engine: str
    policy: str
    points: list[SeedPoint] = field(default_factory=list)

    @property
    def held(self) -> int:
        return sum(p.held for p in self.points)

    @property
    def on_cliff(self) -> bool:
        return 0 < self.held < len(self.points)

    def span(self, key: str) -> tuple[float, float, float]:
        """min, mean, max of one figure over the seeds."""
        values = [float(getattr(p, key)) for p in self.points]
        return min(values), statistics.fmean(values), max(values)


@dataclass
class Band:
    """The band of one point: what was simulated and each engine's seeds."""

    sessions: int
    seeds: list[int]
    timing: str
    executor: str
    engines: list[EngineBand]
    # The point's offered load over the demo's, per seed (`replay.sim.offered`: inputs only).
    offered_vs_demo: list[float] = field(default_factory=list)

    @property
    def load(self) -> float | None:
        """The offered load over the demo's, mean over the seeds (None: not measured)."""
        return statistics.fmean(self.offered_vs_demo) if self.offered_vs_demo else None

    def engine(self, name: str) -> EngineBand | None:
        return next((e for e in self.engines if e.engine == name), None)

    def verdict(self) -> str:
        """In words: which engines the band puts on the cliff, or that it puts none there."""
        n = len(self.seeds)
        on = [e for e in self.engines if e.on_cliff]
        if not on:
            sides = ", ".join(
                f"{e.engine} {'held' if e.held == n else 'fell'} in every seed"
                for e in self.engines
            )
            return f"off the cliff over {n} seeds: {sides}"
        return "; ".join(f"on the cliff: {e.engine} held in {e.held} of {n} seeds" for e in on)

    def to_json(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "seeds": self.seeds,
            "timing": self.timing,
            "executor": self.executor,
            "held_share": HELD_SHARE,
            "offered_vs_demo": self.offered_vs_demo,
            "engines": [
                {"engine": e.engine, "policy": e.policy, "points": [asdict(p) for p in e.points]}
                for e in self.engines
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Band:
        return cls(
            sessions=int(data["sessions"]),
            seeds=[int(s) for s in data["seeds"]],
            timing=str(data["timing"]),
            executor=str(data["executor"]),
            offered_vs_demo=[float(x) for x in data.get("offered_vs_demo") or []],
            engines=[
                EngineBand(
                    engine=str(e["engine"]),
                    policy=str(e["policy"]),
                    points=[SeedPoint(**p) for p in e["points"]],
                )
                for e in data["engines"]
            ],
        )


def write_band(run_dir: Path, band: Band) -> Path:
    path = run_dir / BAND_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(band.to_json(), indent=2))
    tmp.replace(path)
    return path


def read_band(run_dir: Path) -> Band | None:
    """The run's band, or None when it has none (or an unreadable one: the band is a
    companion of the run, never required to read it)."""
    path = Path(run_dir) / BAND_FILE
    try:
        return Band.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


__all__ = [
    "BAND_FILE",
    "DEFAULT_SEEDS",
    "HELD_SHARE",
    "Band",
    "EngineBand",
    "SeedPoint",
    "read_band",
    "write_band",
]
