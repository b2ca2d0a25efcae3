"""The synthesizer's cache-pressure calibration, as an experiment to rerun.

Generates the 393-trajectory corpus (token lengths ÷ --scale, which the simulator undoes)
with knob overrides, prints its calibrated statistics, its tool-gap distribution and the
working set the source defines (time average over minutes 15–45 of Σ over sessions of each
one's latest context + one checkpoint, ÷ 2,531 blocks of 4,352 tokens, subagents left out),
measured by `replay.sim` at 32 and 48 sessions over --seeds workload seeds.

    python scripts/calibrate_pressure.py                       # the shipped knobs
    python scripts/calibrate_pressure.py "tool_gap=(2.0,1.3)"  # the knob before calibration
    python scripts/calibrate_pressure.py "p_200k=0.35" "tool_result=(1700.0,1.45)"

Targets (the source document's simulation, "0.93 of capacity at 32 and 1.34 at 48,
averaged over two seeds"; the corpus figures from the published dataset): see README,
"Synthesized corpus".
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.stats import tool_gaps, trace_stats
from replay.traces.synth import Knobs, SynthConfig, write_synth

TARGETS = {"ws32": 0.93, "ws48": 1.34}


def parse_override(text: str) -> tuple[str, object]:
    key, _, value = text.partition("=")
    if key not in {f.name for f in dataclasses.fields(Knobs)}:
        raise SystemExit(f"unknown knob '{key}' (see replay/traces/synth.py: Knobs)")
    return key, ast.literal_eval(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="knob=value, e.g. 'tool_gap=(2.0,1.3)'")
    ap.add_argument("--scale", type=float, default=32.0)
    ap.add_argument("--corpus-seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=2, help="workload seeds per session count")
    args = ap.parse_args()
    knobs = dataclasses.replace(Knobs(), **dict(parse_override(o) for o in args.overrides))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.jsonl"
        t0 = time.perf_counter()
        cfg = SynthConfig(n_trajectories=393, seed=args.corpus_seed, scale=args.scale)
        write_synth(path, cfg, knobs=knobs)
        trace = load_trace(path)
        print(f"corpus: {time.perf_counter() - t0:.0f} s; knobs {args.overrides or 'shipped'}")
    s = trace_stats(trace)
    k = args.scale
    print(
        f"requests {s['requests']:,}  subagent share {s['subagent_request_share']:.3f}  "
        f"prompt mean {s['mean_prompt_tokens'] * k:,.0f} median {s['median_prompt_tokens'] * k:,.0f}"
        f"  output median {s['median_output_tokens'] * k:,.0f} mean {s['mean_output_tokens'] * k:,.0f}"
        f"  continuations {s['continuation_share']:.3f}  edits {s['context_edit_share']:.4f}"
    )
    gaps = np.concatenate([tool_gaps(tr) for tr in trace.walk()])
    print(
        f"tool gaps: capped mean {np.minimum(gaps, 300).mean():.1f} s, uncapped mean "
        f"{gaps.mean():.1f} s, p10/p50/p90/p99 "
        + "/".join(f"{np.percentile(gaps, q):.1f}" for q in (10, 50, 90, 99))
        + f" s, over 300 s {(gaps > 300).mean():.1%}"
    )
    for n in (32, 48):
        ratios = []
        for seed in range(args.seeds):
            row = simulate(
                trace,
                SimConfig(
                    "vllm",
                    n,
                    seed=seed,
                    capacity_blocks=2531,
                    subagents="skip",
                    token_scale=args.scale,
                ),
            ).summary
            ratios.append(row["working_set_ratio"])
        print(
            f"working set at {n} sessions: {np.mean(ratios):.3f} "
            f"(seeds {', '.join(f'{r:.3f}' for r in ratios)}; source {TARGETS[f'ws{n}']})"
        )


if __name__ == "__main__":
    main()
