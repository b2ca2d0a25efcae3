"""The largest load that meets an SLO (issue 35, point 3): the search, its objective and its
file.

**The objective.** A load is a number of concurrent sessions (each an agent with its
subagents). It meets the SLO when the share of its measured requests (first token in the
window, finished ok, priming left out: `analysis.metrics.measured_mask`) that met every
request-level threshold (`analysis.slo.request_within`: TTFT from the scheduled time, mean
inter-token latency per full-size token, end-to-end where set) is at least `threshold` —
the same share summary.json reports as `slo_request_share`.

**AA-AgentPerf's tier.** AA-AgentPerf (artificialanalysis.ai/methodology/agentperf) reports
concurrent agents per accelerator under an SLO tier: a bound on each agent's output speed and
one on TTFT. Its tier numbers are not published to us; the tier here is the user's `Slo`:
TTFT ≤ `ttft_s`, output speed ≥ 1 / `itl_s` tokens per second (mean inter-token latency
≤ `itl_s`). Which percentile it is judged at is our choice, stated: a load meets the tier
when at least `threshold` (default 0.9, the 90th percentile) of the requests meet both
bounds together. Agents per GPU = the largest such session count ÷ the engine's GPUs.

**The search** (`search_largest`) assumes the objective is monotone in the load (more
sessions never help a request's latency): from `start` it doubles while the SLO holds (or
halves while it fails) to bracket the edge, then bisects on whole numbers to the largest
count that holds. The answer is then rerun over several seeds (confirmation), whose SLO
shares and hit rates are the answer's seed band (`replay.band`'s `EngineBand`). The search
is seeded: its probes all use the first seed, so near the edge another seed may fall
on the other side, which the confirmation says.

The probes run on the simulator (`replay slo-search --policies`) or through `replay run`
(`--engines`: the built-in emulators; `--endpoint`: live engines), each probe then a run
directory whose summary.json's `slo_request_share` is judged the same way; `executor` in the
file says which.

`slo_search.json` (`SEARCH_FILE`) sits in the search's output folder beside the
confirmation runs; `replay report` on that folder (or on one of its runs) shows it.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.slo import Slo, request_within

SEARCH_FILE = "slo_search.json"
DEFAULT_THRESHOLD = 0.9  # the share of requests that must meet the tier: its 90th percentile
EXECUTOR_WORDS = {
    "sim-engine": "simulated (engine timing)",
    "emulated": "emulated engines (replay run)",
    "live": "live engines (replay run)",
}


class SearchError(ValueError):
    """Bad search bounds; the message names the setting."""


@dataclass(frozen=True)
class Probe:
    """One simulated load: its sessions, seed, the measured requests and the share of them
    within the SLO, and whether that share met the threshold."""

    sessions: int
    seed: int
    requests: int
    share: float
    met: bool


@dataclass
class SearchTrace:
    """The search's answer (0: not even one session met the SLO) and every probe in order.
    `capped`: the limit itself met the SLO, so the true edge may lie above it."""

    answer: int
    probes: list[int] = field(default_factory=list)
    capped: bool = False


def search_largest(meets: Callable[[int], bool], start: int, limit: int) -> SearchTrace:
    """The largest n in 1..limit with `meets(n)`, for a `meets` that holds up to some edge
    and fails above it: bracket from `start` by doubling (or halving), then bisect. Each n is
    asked once."""
    if limit < 1:
        raise SearchError(f"the limit must be at least 1 session (got {limit})")
    if not 1 <= start <= limit:
        raise SearchError(f"the start must lie within 1..{limit} sessions (got {start})")
    seen: dict[int, bool] = {}
    trace = SearchTrace(answer=0)

    def ask(n: int) -> bool:
        if n not in seen:
            seen[n] = bool(meets(n))
            trace.probes.append(n)
        return seen[n]

    if ask(start):
        lo, hi = start, None
        while hi is None:
            if lo == limit:
                trace.answer, trace.capped = lo, True
                return trace
            n = min(2 * lo, limit)
            if ask(n):
                lo = n
            else:
                hi = n
    else:
        hi, lo = start, 0
        n = start // 2
        while n >= 1:
            if ask(n):
                lo = n
                break
            hi, n = n, n // 2
        if lo == 0:
            return trace  # not even one session met it
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ask(mid):
            lo = mid
        else:
            hi = mid
    trace.answer = lo
    return trace


def slo_share(
    records: pd.DataFrame, window: tuple[float, float], slo: Slo, token_scale: float = 1.0
) -> tuple[float, int]:
    """(share of the measured requests within the SLO, how many were measured) of one
    engine's request records, as summary.json's `slo_request_share` counts them."""

    def col(name: str) -> np.ndarray:
        return pd.to_numeric(records[name], errors="coerce").to_numpy(dtype=float)

    first = col("first_token_s")
    start, end = window
    measured = (
        ~records["priming"].fillna(False).astype(bool).to_numpy()
        & (records["status"].fillna("ok").astype(str).to_numpy() == "ok")
        & (first >= start)
        & (first < end)
    )
    n = int(measured.sum())
    if not n:
        return math.nan, 0
    within = request_within(
        slo,
        col("scheduled_s")[measured],
        first[measured],
        col("done_s")[measured],
        col("output_tokens")[measured],
        token_scale,
    )
    return float(within.mean()), n


@dataclass
class EngineAnswer:
    """One engine's answer: the largest load meeting the SLO on the search's seed, as
    sessions and agents per GPU; the probes; and the confirmation seeds at the answer (their
    probes, and their hit rates and TTFTs as a `replay.band` band)."""

    engine: str
    policy: str
    gpus: int
    sessions: int
    capped: bool
    probes: list[Probe]
    confirm: list[Probe] = field(default_factory=list)
    band: dict[str, Any] | None = None  # replay.band.Band.to_json() at the answer

    @property
    def agents_per_gpu(self) -> float:
        return self.sessions / self.gpus

    @property
    def held(self) -> int:
        """Confirmation seeds on which the answer met the SLO."""
        return sum(p.met for p in self.confirm)

    def share_band(self) -> tuple[float, float, float] | None:
        """min, mean, max of the confirmation seeds' SLO shares (None: none finite)."""
        shares = [p.share for p in self.confirm if math.isfinite(p.share)]
        if not shares:
            return None
        return min(shares), statistics.fmean(shares), max(shares)


@dataclass
class SloSearch:
    """A search's inputs and every engine's answer (`slo_search.json`)."""

    slo: dict[str, Any]
    threshold: float
    seed: int
    seeds: list[int]
    start: int
    limit: int
    duration_s: float
    window: tuple[float, float]
    trace: str
    engines: list[EngineAnswer]
    # Which executor probed: "sim-engine" (the simulator, engine timing), "emulated" (the
    # built-in emulators through `replay run`) or "live" (`--endpoint` engines).
    executor: str = "sim-engine"

    @property
    def how(self) -> str:
        """The executor in words, for the printed answer and the report."""
        return EXECUTOR_WORDS.get(self.executor, self.executor)

    @property
    def tier(self) -> str:
        """The tier in words: the thresholds, the output speed, the percentile."""
        s = Slo.model_validate({k: v for k, v in self.slo.items() if k in Slo.model_fields})
        parts = []
        if s.ttft_s is not None:
            parts.append(f"TTFT ≤ {s.ttft_s:g} s")
        if s.itl_s is not None:
            parts.append(f"output ≥ {1 / s.itl_s:.3g} tok/s per agent (ITL ≤ {s.itl_s:g} s)")
        if s.e2e_s is not None:
            parts.append(f"end-to-end ≤ {s.e2e_s:g} s")
        return f"{' and '.join(parts) or 'no bound'} for ≥ {self.threshold:.0%} of requests"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["window"] = list(self.window)
        for e, d in zip(self.engines, data["engines"], strict=True):
            d["agents_per_gpu"] = e.agents_per_gpu
        return _finite(data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SloSearch:
        def probes(rows: list[dict[str, Any]]) -> list[Probe]:
            return [
                Probe(
                    sessions=int(p["sessions"]),
                    seed=int(p["seed"]),
                    requests=int(p["requests"]),
                    share=math.nan if p["share"] is None else float(p["share"]),
                    met=bool(p["met"]),
                )
                for p in rows
            ]

        engines = [
            EngineAnswer(
                engine=str(e["engine"]),
                policy=str(e["policy"]),
                gpus=int(e["gpus"]),
                sessions=int(e["sessions"]),
                capped=bool(e["capped"]),
                probes=probes(e["probes"]),
                confirm=probes(e.get("confirm") or []),
                band=e.get("band"),
            )
            for e in data["engines"]
        ]
        lo, hi = data["window"]
        return cls(
            slo=dict(data["slo"]),
            threshold=float(data["threshold"]),
            seed=int(data["seed"]),
            seeds=[int(s) for s in data["seeds"]],
            start=int(data["start"]),
            limit=int(data["limit"]),
            duration_s=float(data["duration_s"]),
            window=(float(lo), float(hi)),
            trace=str(data["trace"]),
            engines=engines,
            executor=str(data.get("executor") or "sim-engine"),
        )


def _finite(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_search(folder: Path, search: SloSearch) -> Path:
    path = Path(folder) / SEARCH_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(search.to_json(), indent=2))
    tmp.replace(path)
    return path


def read_search(folder: Path) -> SloSearch | None:
    """The search written in `folder`, or None (none there, or unreadable: a companion of
    the runs, never required to read them)."""
    try:
        return SloSearch.from_json(json.loads((Path(folder) / SEARCH_FILE).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def search_rows(search: SloSearch) -> list[dict[str, Any]]:
    """One row per engine for a table: the answer, agents per GPU, the confirmation band."""
    rows = []
    for e in search.engines:
        band = e.share_band()
        row: dict[str, Any] = {
            "engine": e.engine,
            "sessions": e.sessions,
            "gpus": e.gpus,
            "agents_per_gpu": e.agents_per_gpu,
            "capped": e.capped,
            "probes": len(e.probes),
            "held": f"{e.held} of {len(e.confirm)}" if e.confirm else "–",
            "share_min": band[0] if band else math.nan,
            "share_mean": band[1] if band else math.nan,
            "share_max": band[2] if band else math.nan,
        }
        bands = (e.band or {}).get("engines") or [{}]
        points = bands[0].get("points") or []
        hits = [p["hit_rate"] for p in points if p.get("hit_rate") is not None]
        ttft = [p["ttft_p50_s"] for p in points if p.get("ttft_p50_s") is not None]
        row["hit_min"], row["hit_max"] = (min(hits), max(hits)) if hits else (math.nan,) * 2
        row["ttft_min"], row["ttft_max"] = (min(ttft), max(ttft)) if ttft else (math.nan,) * 2
        rows.append(row)
    return rows


__all__ = [
    "DEFAULT_THRESHOLD",
    "EXECUTOR_WORDS",
    "SEARCH_FILE",
    "EngineAnswer",
    "Probe",
    "SearchError",
    "SearchTrace",
    "SloSearch",
    "read_search",
    "search_largest",
    "search_rows",
    "slo_share",
    "write_search",
]
