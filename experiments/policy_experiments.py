"""Experiments behind the policy table: one modelling rule toggled at a time.

Each variant is `POLICY` or `POLICY[KEY=VALUE,...]` (a policy option or one of the rule
switches in `replay.sim.cache.policy_base.RULES`); every variant runs on the same corpus, loads and
seeds, and the script prints hit rate and the Eq. 5 miss split per variant, so the effect of
one rule is one row against another. The default list is the set of experiments docs/policy-research.md's
policy-table section reports.

    .venv/bin/python experiments/policy_experiments.py [--trace SRC] [--capacity-blocks 2531]
        [--sessions 26,37] [--seeds 0] [--variants 'vllm-like,vllm-like[hold_chunk_state=False]']
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# live_share wraps HybridCache.drop_unit and drop_state, which the compiled eviction calls
# directly (a wrapper on the class would miss those calls): the interpreted modules, then.
os.environ["REPLAY_SIM_INTERPRETED"] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from policy_table import (
    DEFAULT_CORPUS,
    load_corpus,
    parse_opts,
    run_configs,
    scale_durations,
)

from replay.sim.cache.hybrid import HybridCache
from replay.sim.runner import SimConfig, simulate
from replay.traces.model import Trace

_SRC = "block_stamp=start,prefill_state_stamp=write,resume_stamp=start"
# The toggles of docs/policy-research.md, one rule at a time.
DEFAULT_VARIANTS = ",".join(
    [
        "vllm-like",
        "vllm-like[hold_chunk_state=false]",
        f"vllm-like[{_SRC}]",
        "asc-lru",
        f"asc-lru[{_SRC}]",
        "asc-unit-lru",
        f"asc-unit-lru[{_SRC}]",
        f"dense[{_SRC}]",
        f"dense[{_SRC},hold_chunk_state=false]",
    ]
)


def live_share(trace: Trace, spec: str, sessions: int, capacity: int) -> str:
    """One run, sampling at each arrival inside the window the blocks live requests hold
    (their pinned KV, the KV reserved for their output, their live state buffer) and the
    age of each unit or allocation evicted: how much of the cache is left for idle
    conversations, and how long an idle one survives there."""
    held: list[float] = []
    ages: list[float] = []
    lookup, drop_unit, drop_state = (
        HybridCache.lookup,
        HybridCache.drop_unit,
        HybridCache.drop_state,
    )

    def probe_lookup(self: HybridCache, prefix: Any, n: int, now: float, hint: int = 0) -> Any:
        if 900.0 <= now < 2700.0:
            pinned = sum(1 for b in self.nodes.values() if b.resident and b.live)
            live_states = sum(1 for x in self.live_resident.values() if x.live)
            states = live_states + self.private_states
            held.append(pinned + self.private_blocks + self.C * states)
        return lookup(self, prefix, n, now, hint)

    def probe_unit(self: HybridCache, st: Any) -> int:
        ages.append(self.clock - st.last_use)
        return drop_unit(self, st)

    def probe_state(self: HybridCache, st: Any) -> None:
        if st.resident:
            ages.append(self.clock - st.last_use)
        drop_state(self, st)

    pol, opts = parse_variant(spec)
    probes = {"lookup": probe_lookup, "drop_unit": probe_unit, "drop_state": probe_state}
    saved = {name: getattr(HybridCache, name) for name in probes}
    for name, fn in probes.items():
        setattr(HybridCache, name, fn)
    try:
        res = simulate(trace, SimConfig(pol, sessions, capacity_blocks=capacity, policy_opts=opts))
    finally:
        for name, fn in saved.items():
            setattr(HybridCache, name, fn)
    q = np.percentile(ages, [10, 50, 90]) if ages else [0.0, 0.0, 0.0]
    return (
        f"{spec} at {sessions} sessions: hit {res.summary['hit_rate']:.1%}; live requests hold "
        f"{np.mean(held):,.0f} of {capacity} blocks ({np.mean(held) / capacity:.0%}); "
        f"evicted at age p10/p50/p90 {q[0]:.1f}/{q[1]:.1f}/{q[2]:.1f} s"
    )


def parse_variant(spec: str) -> tuple[str, dict[str, Any]]:
    if "[" not in spec:
        return spec, {}
    pol, rest = spec.split("[", 1)
    items = [f"{pol}:{kv}" for kv in rest.rstrip("]").split(";") if kv]
    return pol, parse_opts(items).get(pol, {})


def split_variants(text: str) -> list[str]:
    """Comma-separated variants; commas inside [...] separate options, not variants."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        cur += ";" if ch == "," and depth else ch
    if cur:
        out.append(cur)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(DEFAULT_CORPUS))
    ap.add_argument("--capacity-blocks", type=int, default=2531)
    ap.add_argument("--sessions", default="26,37")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--api-scale",
        type=float,
        default=1.0,
        help="multiply every recorded request duration (tool gaps unchanged): how much of the "
        "cache live requests pin, the corpus property the high-load results hinge on",
    )
    ap.add_argument(
        "--live-share",
        action="store_true",
        help="instead: per variant, one run at the highest load measuring the blocks live "
        "requests hold and the age at eviction",
    )
    args = ap.parse_args()

    t0 = time.perf_counter()
    trace = load_corpus(args.trace, "skip")
    print(f"loaded {args.trace} in {time.perf_counter() - t0:.1f} s (subagents left out)")
    if args.api_scale != 1.0:
        trace = scale_durations(trace, args.api_scale)
        print(f"request durations × {args.api_scale:g}")
    specs = split_variants(args.variants)
    sessions = [int(x) for x in args.sessions.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    if args.live_share:
        for spec in specs:
            print(live_share(trace, spec, max(sessions), args.capacity_blocks))
        return 0
    configs = []
    for spec in specs:
        pol, opts = parse_variant(spec)
        for n in sessions:
            for s in seeds:
                configs.append(
                    SimConfig(
                        pol, n, seed=s, capacity_blocks=args.capacity_blocks, policy_opts=opts
                    )
                )
    rows = run_configs(trace, configs, args.workers)
    per = len(sessions) * len(seeds)
    cols = [
        ("hit", "hit_rate", "{:.1%}"),
        ("redund", "redundant_prefill_per_request", "{:,.0f}"),
        ("place", "placement_miss_per_request", "{:,.0f}"),
        ("cap", "capacity_miss_per_request", "{:,.0f}"),
        ("dep", "dependency_miss_per_request", "{:,.0f}"),
        ("ckpts", "resident_checkpoints", "{:.0f}"),
        ("ws", "working_set_ratio", "{:.2f}"),
    ]
    print(f"capacity {args.capacity_blocks} blocks, seeds {args.seeds}, trace timing")
    head = "variant".ljust(56) + "".join(
        f"{name + '@' + str(n):>14}" for n in sessions for name, _, _ in cols[:2]
    )
    print(head)
    for i, spec in enumerate(specs):
        mine = rows[i * per : (i + 1) * per]
        line = spec.ljust(56)
        for n in sessions:
            sel = [r for r in mine if r["sessions"] == n]
            for _, col, fmt in cols[:2]:
                line += f"{fmt.format(float(np.mean([r[col] for r in sel]))):>14}"
        print(line)
    print()
    hi = max(sessions)
    print(f"at {hi} sessions: " + " | ".join(c[0] for c in cols))
    for i, spec in enumerate(specs):
        sel = [r for r in rows[i * per : (i + 1) * per] if r["sessions"] == hi]
        vals = [fmt.format(float(np.mean([r[col] for r in sel]))) for _, col, fmt in cols]
        print(spec.ljust(56) + " | ".join(vals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
