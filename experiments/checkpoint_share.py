"""What the resident checkpoints are: the experiment behind the checkpoint share of the cache in
docs/policy-research.md ("The checkpoint share").

The source's table gives resident checkpoints at 48 sessions (210 for vLLM-like, 220 dense,
212 +ASC, 161 unit LRU, 169 Eq. 7: 32–43% of 2,531 blocks at five blocks each); ours fill
51–69%. One run per variant (source rules by default, as `policy_table.py`), probing the cache
at every request-lifecycle call inside the measured window, prints:

- resident checkpoints three ways: the mean at request arrivals (what the summary's
  `resident_checkpoints` reports), the time average, and the count at the window's end;
- their share of the cache, and the share live requests pin (their KV, reserved blocks and
  live state buffers);
- what the resident checkpoints are (time averages): usable (every KV block before them
  resident), superseded (a deeper resident checkpoint on their own path), held by a live
  request, and resident checkpoints per distinct resumable path end (a "leaf");
- checkpoints written per request and the KV blocks of a request's prompt.

    .venv/bin/python experiments/checkpoint_share.py [--trace SRC] [--sessions 48] [--seed 0]
        [--variants 'vllm-like,dense'] [--rules source|engine] [--api-scale K]
        [--capacity-blocks 2531] [--checkpoint-blocks C] [--gap-shape M,S,L]
        [--chunk-states all|last]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from policy_experiments import parse_variant, split_variants
from policy_table import (
    DEFAULT_CORPUS,
    SOURCE,
    SOURCE_RULES,
    gaps_reshaped,
    load_corpus,
    parse_gap_shape,
    scale_durations,
)

from replay.profiles import load_profile
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policy_base import Policy
from replay.sim.runner import SimConfig, simulate
from replay.traces.model import Trace

WINDOW = (900.0, 2700.0)


@dataclass
class Probe:
    """Time-weighted occupancy of one run, integrated between lifecycle calls."""

    last_t: float = WINDOW[0]
    acc: dict[str, float] = field(default_factory=dict)
    arrivals: list[int] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    prompt_blocks: list[int] = field(default_factory=list)
    end_states: int = 0
    cur: dict[str, float] = field(default_factory=dict)

    def advance(self, cache: HybridCache, now: float) -> None:
        """Integrate the occupancy seen since the last call, then re-measure it."""
        lo, hi = WINDOW
        t0, t1 = max(self.last_t, lo), min(now, hi)
        if t1 > t0 and self.cur:
            for k, v in self.cur.items():
                self.acc[k] = self.acc.get(k, 0.0) + v * (t1 - t0)
        self.last_t = max(self.last_t, now)
        if now >= lo and now < hi:
            self.cur = measure(cache)
            self.end_states = cache.resident_states

    def mean(self, key: str) -> float:
        return self.acc.get(key, 0.0) / (WINDOW[1] - WINDOW[0])


def measure(cache: HybridCache) -> dict[str, float]:
    """What the cache holds right now."""
    states = list(cache.live_resident.values())
    below: set[int] = set()  # blocks with a resident checkpoint somewhere beneath them
    for s in states:
        b = s.block.parent
        while b is not None and b is not cache.root and id(b) not in below:
            below.add(id(b))
            b = b.parent
    usable = superseded = held = 0
    for s in states:
        if s.live:
            held += 1
        b = s.block
        ok = True
        while b is not None and b is not cache.root:
            if not b.resident:
                ok = False
                break
            b = b.parent
        usable += ok
        deeper = id(s.block) in below or any(o.pos > s.pos for o in s.block.rstates)
        superseded += deeper
    pinned = sum(1 for b in cache.nodes.values() if b.resident and b.live)
    live_states = sum(1 for x in states if x.live) + cache.private_states
    leaves = len(states) - superseded
    return {
        "states": float(len(states)),
        "usable": float(usable),
        "superseded": float(superseded),
        "held": float(held),
        "leaves": float(leaves),
        "live_blocks": float(pinned + cache.private_blocks + cache.C * live_states),
        "used": float(cache.used_blocks),
    }


def run(
    trace: Trace,
    spec: str,
    sessions: int,
    seed: int,
    capacity: int,
    rules: str,
    checkpoint_blocks: int | None,
    latest_only: bool = False,
) -> dict[str, Any]:
    pol, opts = parse_variant(spec)
    if rules == "source":
        opts = {**SOURCE_RULES, **opts}
    probe = Probe()
    names = {"lookup": 2, "begin": 3, "reserve": 2, "prefill_done": 1, "finish": 3, "abort": 1}
    saved = {n: getattr(HybridCache, n) for n in names}

    def wrap(name: str, at: int) -> Any:
        orig = saved[name]

        def f(self: HybridCache, *a: Any) -> Any:
            now = float(a[at])
            probe.advance(self, now)
            out = orig(self, *a)
            if name == "lookup" and WINDOW[0] <= now < WINDOW[1]:
                probe.arrivals.append(self.resident_states)
            if name == "begin" and WINDOW[0] <= now < WINDOW[1]:
                probe.written.append(len(out.placements) + len(out.late_placements))
                probe.prompt_blocks.append(-(-a[1] // self.B))
            return out

        return f

    for n, at in names.items():
        setattr(HybridCache, n, wrap(n, at))
    placed = Policy.prefill_positions
    if latest_only:  # what-if: only the last state a prefill writes is kept

        def last(self: Policy, info: Any, n: int, block: int) -> list[int]:
            return placed(self, info, n, block)[-1:]

        Policy.prefill_positions = last  # type: ignore[method-assign]
    profile = load_profile("glm-5.3-flash")
    if checkpoint_blocks is not None:
        profile = profile.model_copy(update={"checkpoint_blocks": checkpoint_blocks})
    try:
        res = simulate(
            trace,
            SimConfig(pol, sessions, seed=seed, capacity_blocks=capacity, policy_opts=opts),
            profile,
        )
    finally:
        for n, fn in saved.items():
            setattr(HybridCache, n, fn)
        Policy.prefill_positions = placed  # type: ignore[method-assign]
    c = profile.checkpoint_blocks
    st = probe.mean("states")
    return {
        "spec": spec,
        "hit": res.summary["hit_rate"],
        "ws": res.summary["working_set_ratio"],
        "arrivals": float(np.mean(probe.arrivals)) if probe.arrivals else 0.0,
        "time_avg": st,
        "end": probe.end_states,
        "share": st * c / capacity,
        "live_share": probe.mean("live_blocks") / capacity,
        "usable": probe.mean("usable") / st if st else 0.0,
        "superseded": probe.mean("superseded") / st if st else 0.0,
        "held": probe.mean("held") / st if st else 0.0,
        "per_leaf": st / probe.mean("leaves") if probe.mean("leaves") else 0.0,
        "written": float(np.mean(probe.written)) if probe.written else 0.0,
        "prompt_blocks": float(np.mean(probe.prompt_blocks)) if probe.prompt_blocks else 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(DEFAULT_CORPUS))
    ap.add_argument("--capacity-blocks", type=int, default=2531)
    ap.add_argument("--sessions", default="48")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variants", default="vllm-like,dense,asc-lru,asc-unit-lru,flashstate-eq7")
    ap.add_argument("--rules", choices=("source", "engine"), default="source")
    ap.add_argument(
        "--api-scale",
        type=float,
        default=1.0,
        help="multiply every recorded request duration (tool gaps unchanged)",
    )
    ap.add_argument(
        "--checkpoint-blocks",
        type=int,
        default=None,
        help="what-if: blocks one checkpoint occupies (GLM-5.3-Flash: 5)",
    )
    ap.add_argument(
        "--gap-shape",
        default=None,
        metavar="MEDIAN,SIGMA,LONG_SHARE",
        help="reshape the tool gaps rank for rank (as policy_table.py --gap-shape)",
    )
    ap.add_argument(
        "--chunk-states",
        choices=("all", "last"),
        default="all",
        help="what-if: 'last' keeps only the last state each prefill writes (its "
        "chunk-end states before it are not kept, as vLLM 0.32 with retention 0)",
    )
    args = ap.parse_args()

    t0 = time.perf_counter()
    trace = load_corpus(args.trace, "skip")
    if args.api_scale != 1.0:
        trace = scale_durations(trace, args.api_scale)
    if args.gap_shape:
        trace = gaps_reshaped(trace, *parse_gap_shape(args.gap_shape))
    print(
        f"loaded {args.trace} in {time.perf_counter() - t0:.1f} s (subagents left out); "
        f"rules {args.rules}, durations × {args.api_scale:g}, seed {args.seed}, "
        f"{args.capacity_blocks} blocks"
        + (f", {args.checkpoint_blocks}-block checkpoints" if args.checkpoint_blocks else "")
        + (f", gap shape {args.gap_shape}" if args.gap_shape else "")
        + (", only the last state of each prefill kept" if args.chunk_states == "last" else "")
    )
    cols = (
        "hit",
        "ws",
        "arrivals",
        "time_avg",
        "end",
        "share",
        "live_share",
        "usable",
        "superseded",
        "held",
        "per_leaf",
        "written",
        "prompt_blocks",
    )
    print("variant".ljust(44) + "sess " + " ".join(f"{c:>10}" for c in cols) + "     source")
    for n in (int(x) for x in args.sessions.split(",")):
        for spec in split_variants(args.variants):
            r = run(
                trace,
                spec,
                n,
                args.seed,
                args.capacity_blocks,
                args.rules,
                args.checkpoint_blocks,
                args.chunk_states == "last",
            )
            src = SOURCE.get(spec.split("[")[0])
            ref = f"{src.resident48:.0f}" if src and src.resident48 and n == 48 else ""
            vals = []
            for c in cols:
                v = r[c]
                pct = c in ("hit", "share", "live_share", "usable", "superseded", "held")
                vals.append(f"{v:>10.1%}" if pct else f"{v:>10.2f}" if c == "ws" else f"{v:>10.1f}")
            print(spec.ljust(44) + f"{n:>4} " + " ".join(vals) + f"{ref:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
