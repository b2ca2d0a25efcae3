"""Experiments behind the policy table: one modelling rule toggled at a time.

Each variant is `POLICY` or `POLICY[KEY=VALUE,...]` (a policy option or one of the rule
switches in `replay.sim.policy_base.RULES`); every variant runs on the same corpus, loads and
seeds, and the script prints hit rate and the Eq. 5 miss split per variant, so the effect of
one rule is one row against another. The default list is the set of experiments the README's
policy-table section reports.

    .venv/bin/python scripts/policy_experiments.py [--trace SRC] [--capacity-blocks 2531]
        [--sessions 26,37] [--seeds 0] [--variants 'vllm-like,vllm-like[hold_chunk_state=False]']
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from policy_table import DEFAULT_CORPUS, load_corpus, parse_opts, run_configs

from replay.sim.runner import SimConfig

DEFAULT_VARIANTS = ",".join(
    [
        "vllm-like",
        "asc-unit-lru",
    ]
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
    args = ap.parse_args()

    t0 = time.perf_counter()
    trace = load_corpus(args.trace, "skip")
    print(f"loaded {args.trace} in {time.perf_counter() - t0:.1f} s (subagents left out)")
    specs = split_variants(args.variants)
    sessions = [int(x) for x in args.sessions.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
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
