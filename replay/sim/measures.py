"""What the simulator measures while it runs: cache occupancy samples (`Occupancy`), the
source's working set (`WorkingSet`), and one run's row of the sweep's `summary.csv`
(`summarize`: hit rates, the miss split, occupancy, and in engine timing TTFT, latency and
throughput per GPU). A run directory's summary.json is analysis.summary's, not this row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replay.profiles import ModelProfile
from replay.records import RequestRecord

SUMMARY_COLUMNS: tuple[str, ...] = (
    "policy",
    "sessions",
    "seed",
    "requests",
    "hit_rate",
    "ideal_hit_rate",
    "median_uncached_tokens",
    "redundant_prefill_per_request",
    "placement_miss_per_request",
    "dependency_miss_per_request",
    "capacity_miss_per_request",
    "resident_checkpoints",
    "working_set_ratio",
    "wall_seconds",
)
# The row's figures over the measured requests alone (ratios, medians, means and percentiles
# of them): None where the run measured none, as its summary.json has them null
# (`analysis.metrics.MEASURED_ONLY`), so "nothing measured" never reads as a 0.0 (an empty
# cell in summary.csv). Counts and token rates stay numbers: zero of them is a measurement.
MEASURED_ONLY: tuple[str, ...] = (
    "hit_rate",
    "ideal_hit_rate",
    "median_uncached_tokens",
    "redundant_prefill_per_request",
    "placement_miss_per_request",
    "dependency_miss_per_request",
    "capacity_miss_per_request",
    "ttft_p50_s",
    "ttft_p90_s",
    "latency_p50_s",
    "latency_mean_s",
    "host_hit_rate",
    "host_hit_share",
    "external_hit_rate",
    "external_hit_share",
)


# What "measured no request" means, and what to do, in every note that says it (simulate,
# plan-host, slo-search, run's seed band).
UNMEASURED_WHY = "none finished ok with its first token inside the window"
MEASURE_HINT = "lengthen --duration-min or move --window to measure"


def shown(x: float | None, fmt: str = ".1%") -> str:
    """A figure of a summary row as text: – where the run measured no request (None in its
    row, `MEASURED_ONLY`), never a 0.0."""
    return "–" if x is None else format(x, fmt)


@dataclass(slots=True)
class Occupancy:
    """Samples of the cache taken at each request arrival inside the window."""

    window: tuple[float, float]
    states: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    working_set: list[int] = field(default_factory=list)

    def add(self, t: float, states: int, used: int, working_set: int) -> None:
        if self.window[0] <= t < self.window[1]:
            self.states.append(states)
            self.used.append(used)
            self.working_set.append(working_set)


class WorkingSet:
    """The working set, the one definition every figure of ours uses (`working_set_ratio`,
    docs/policy-table.md):

        W(t) = Σ over the conversations in progress at t of ⌈(Pᵢ + Oᵢ) / B⌉ + C blocks,

    where Pᵢ + Oᵢ are the prompt and output tokens of the conversation's latest completed
    request, B the KV block (`block_tokens`, a partial last block counted in full) and C
    one checkpoint (`checkpoint_blocks`): the KV and the checkpoint a conversation needs
    resident for its next turn to resume exactly, so W is what a cache must hold for every
    conversation to hit. A conversation (one replay of one trajectory) counts from its
    first completed request until its last one ends or the run does; a request in flight
    counts with the context it resumes from. The figure reported is the time average of W
    over the measured window ÷ the cache's capacity in blocks.

    The source reports a "working set, measured the paper's way" ÷ capacity (0.93 at 32 and
    1.34 at 48 sessions) without defining it further; this is our reading of it. Leaving the
    checkpoint out (KV only) gives W − C × the mean number of conversations in progress
    (5 blocks each on GLM-5.3-Flash: 0.095 of the 2,531-block cache per 48 sessions), the
    difference measured by `experiments/lru_ranking.py --working-set`."""

    __slots__ = ("_acc", "_blocks", "_last", "_sum", "block_tokens", "checkpoint_blocks", "window")

    def __init__(self, window: tuple[float, float], block_tokens: int, checkpoint_blocks: int):
        self.window = window
        self.block_tokens = block_tokens
        self.checkpoint_blocks = checkpoint_blocks
        self._blocks: dict[int, int] = {}
        self._sum = 0
        self._acc = 0.0
        self._last = window[0]

    def _advance(self, now: float) -> None:
        hi = min(now, self.window[1])
        if hi > self._last:
            self._acc += self._sum * (hi - self._last)
            self._last = hi

    def update(self, now: float, conv: int, tokens: int | None) -> None:
        """Conversation `conv`'s latest context is now `tokens` long (None: it ended)."""
        self._advance(now)
        self._sum -= self._blocks.pop(conv, 0)
        if tokens is not None:
            b = -(-tokens // self.block_tokens) + self.checkpoint_blocks
            self._blocks[conv] = b
            self._sum += b

    @property
    def blocks(self) -> int:
        """W now: the blocks of the conversations in progress (kept as they change)."""
        return self._sum

    def mean_blocks(self, end: float) -> float:
        """The time average over the window (the run ended at `end`)."""
        self._advance(end)
        a, b = self.window
        span = min(b, max(end, a)) - a
        return self._acc / span if span > 0 else 0.0


def _mean(xs: list[int] | np.ndarray) -> float:
    return float(np.mean(xs)) if len(xs) else 0.0


def summarize(
    records: list[RequestRecord],
    occ: Occupancy,
    profile: ModelProfile,
    *,
    policy: str,
    sessions: int,
    seed: int,
    timing: str,
    wall_seconds: float,
    capacity: int,
    evictions: int = 0,
    refusals: int = 0,
    working_set_blocks: float | None = None,
    token_scale: float = 1.0,
    external: bool = False,
) -> dict[str, Any]:
    """The summary row: measured requests are the non-priming ones whose first token came
    inside the window (rates as fractions, misses in tokens per request); with none measured,
    the figures over them (`MEASURED_ONLY`) are None. The working set is
    `working_set_blocks` (a `WorkingSet` time average) where given, else the mean of the
    occupancy samples."""
    a, b = occ.window
    measured = [
        r
        for r in records
        if not r.priming
        and r.status == "ok"
        and r.first_token_s is not None
        and a <= r.first_token_s < b
    ]
    prompt = np.array([r.prompt_tokens for r in measured], dtype=np.int64)
    cached = np.array([r.cached_tokens or 0 for r in measured], dtype=np.int64)
    ideal = np.array([r.ideal_cached_tokens for r in measured], dtype=np.int64)
    total = int(prompt.sum())

    def per_req(name: str) -> float:
        return _mean(np.array([getattr(r, name) or 0 for r in measured], dtype=np.int64))

    row: dict[str, Any] = {
        "policy": policy,
        "sessions": sessions,
        "seed": seed,
        "requests": len(measured),
        "hit_rate": float(cached.sum() / total) if total else 0.0,
        "ideal_hit_rate": float(ideal.sum() / total) if total else 0.0,
        "median_uncached_tokens": float(np.median(prompt - cached)) if len(measured) else 0.0,
        "redundant_prefill_per_request": _mean(ideal - cached),
        "placement_miss_per_request": per_req("placement_miss"),
        "dependency_miss_per_request": per_req("dependency_miss"),
        "capacity_miss_per_request": per_req("capacity_miss"),
        "resident_checkpoints": _mean(occ.states),
        "working_set_ratio": (
            working_set_blocks if working_set_blocks is not None else _mean(occ.working_set)
        )
        / capacity,
        "wall_seconds": round(wall_seconds, 3),
        "timing": timing,
        "mean_used_blocks": _mean(occ.used),
        "capacity_blocks": capacity,
        "overflow_requests": sum(1 for r in records if r.status == "overflow"),
        "evictions": evictions,
        "admission_refusals": refusals,
        "all_requests": len(records),
        "token_scale": token_scale,
    }
    if timing == "engine":
        row.update(_engine_metrics(measured, records, profile, (a, b), token_scale))
    if any(r.cached_tokens_host is not None for r in records):  # a cache with tiers
        row.update(_tier_metrics(measured, cached, total, external))
    if not measured:
        row.update({k: None for k in MEASURED_ONLY if k in row})
    return row


def _tier_metrics(
    measured: list[RequestRecord], cached: np.ndarray, total: int, external: bool = False
) -> dict[str, float]:
    """Of the measured requests' prompt tokens (`host_hit_rate`) and of their cached tokens
    (`host_hit_share`), those host memory served (issue 34); the GPU's share is the rest.
    With an external store (`external`), the same for the tokens it served."""
    host = int(sum(r.cached_tokens_host or 0 for r in measured))
    hits = int(cached.sum())
    out = {
        "host_hit_rate": host / total if total else 0.0,
        "host_hit_share": host / hits if hits else 0.0,
        "host_hit_requests": sum(1 for r in measured if r.cached_tokens_host),
    }
    if external:
        ext = int(sum(r.cached_tokens_external or 0 for r in measured))
        out["external_hit_rate"] = ext / total if total else 0.0
        out["external_hit_share"] = ext / hits if hits else 0.0
        out["external_hit_requests"] = sum(1 for r in measured if r.cached_tokens_external)
    return out


def _engine_metrics(
    measured: list[RequestRecord],
    records: list[RequestRecord],
    profile: ModelProfile,
    window: tuple[float, float],
    token_scale: float = 1.0,
) -> dict[str, float]:
    """Latencies and token rates (rates at full size: × the trace's token scale)."""
    a, b = window
    minutes = (b - a) / 60.0
    ttft = np.array(
        [
            r.first_token_s - r.sent_s
            for r in measured
            if r.sent_s is not None and r.first_token_s is not None
        ]
    )
    lat = np.array(
        [r.done_s - r.sent_s for r in measured if r.done_s is not None and r.sent_s is not None]
    )
    out_tokens = sum(r.output_tokens for r in records if r.done_s is not None and a <= r.done_s < b)
    prompt_tokens = sum(r.prompt_tokens for r in measured)
    q = lambda x, p: float(np.percentile(x, p)) if len(x) else 0.0  # noqa: E731
    return {
        "ttft_p50_s": q(ttft, 50),
        "ttft_p90_s": q(ttft, 90),
        "latency_p50_s": q(lat, 50),
        "latency_mean_s": float(lat.mean()) if len(lat) else 0.0,
        "prompt_tokens_per_min_per_gpu": prompt_tokens * token_scale / minutes / profile.gpus,
        "output_tokens_per_min_per_gpu": out_tokens * token_scale / minutes / profile.gpus,
        "output_tokens_per_min": out_tokens * token_scale / minutes,
    }
