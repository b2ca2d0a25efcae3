"""Our `vllm` model's memory rules under eviction pressure, one switch at a time, against
vLLM's own KV cache manager (`vllm-native`): when a prefill state is stamped (rule
`prefill_state_stamp`), whether the resumed-from state is held (`pin_resumed_state`) and
whether a recomputed block's old copy is kept (option `cached_copies`).

1. The agreement workloads' tight case (40 blocks, 5 seeds, the paper's scheduler settings):
   requests that differ and cached tokens, per variant.
2. A held-out trace at 300 blocks and 8 sessions (45 min, window 15-45): the window's hit
   rate and redundant prefill per request, per variant and for vllm-native. The trace:
   `--trace`, or a full-size synthesized corpus with seed 11 (not the calibration's seed),
   written to `.corpus/` on first use (about 4 minutes).

    .venv/bin/python experiments/vllm_tight_experiment.py [--trace SRC] [--blocks 300] [--sessions 8]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from replay.sim.cache.policies import make_policy
from replay.sim.native.crosscheck import WORKLOADS, compare, drive
from replay.sim.native.worker import NativeError, Worker
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.synth import SynthConfig, write_synth

# native_agreement is a tool of scripts/ (the agreement workloads and their settings).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from native_agreement import SETTINGS, B, profile

HELD_OUT = Path(".corpus") / "synth-full-seed11.jsonl.gz"
VARIANTS: dict[str, dict[str, Any]] = {
    "vllm (shipped)": {},
    "prefill state stamped at the request's end": {"prefill_state_stamp": "end"},
    "resumed-from state pinned": {"pin_resumed_state": True},
    "both copies kept (cached_copies)": {"cached_copies": True},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace")
    ap.add_argument("--blocks", type=int, default=300)
    ap.add_argument("--sessions", type=int, default=8)
    args = ap.parse_args()
    try:
        worker = Worker.start()
    except NativeError as e:
        print(e, file=sys.stderr)
        return 1
    print("| variant | tight: requests that differ (of 150) | cached tokens (vLLM's own: ", end="")
    try:
        prof = profile(40)
        rows, native = [], 0
        for label, opts in VARIANTS.items():
            diff = ours = 0
            for seed in range(5):
                reqs = WORKLOADS["tight"](np.random.default_rng(seed), B)
                nat = make_policy("vllm-native", prof, **SETTINGS["paper"])
                theirs = drive(nat.make_cache(prof, worker=worker), reqs)
                a, t, d = compare(
                    drive(make_policy("vllm", prof, **opts).make_cache(prof), reqs), theirs
                )
                diff, ours, native = diff + d, ours + a, native + t if label == "both" else native
            rows.append((label, diff, ours))
        print(f"{native:,}) |\n|---|---|---|")
        for label, diff, ours in rows:
            print(f"| {label} | {diff} | {ours:,} |", flush=True)
    finally:
        worker.close()
    src = args.trace
    if not src:
        if not HELD_OUT.exists():
            print(f"synthesizing a held-out corpus into {HELD_OUT} (once; ~4 min)", flush=True)
            write_synth(HELD_OUT, SynthConfig(seed=11))
        src = str(HELD_OUT)
    trace = load_trace(src)
    print(f"\n{src}, {args.blocks} blocks, {args.sessions} sessions\n")
    print("| policy | hit rate | redundant prefill / request |\n|---|---|---|")
    runs = [(label, "vllm", opts) for label, opts in VARIANTS.items()]
    for label, policy, opts in [*runs, ("vllm-native", "vllm-native", {})]:
        cfg = SimConfig(policy, args.sessions, capacity_blocks=args.blocks, policy_opts=opts)
        s = simulate(trace, cfg).summary
        print(
            f"| {label} | {s['hit_rate']:.3f} | {s['redundant_prefill_per_request']:,.0f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
