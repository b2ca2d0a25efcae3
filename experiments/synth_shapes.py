"""The shapes the published figures leave open, toggled one at a time (reference file,
`choices:`): what each choice does to the figures, and to the working set the simulator
measures afterwards (an output, never a target).

Each variant regenerates the corpus (--sessions, token lengths ÷ --scale, seed --seed)
with one knob changed, prints the figures it moves beside the published ones, and with
--ws the working set (vllm, subagents skipped, 2,531 blocks, seed 0) at 32 and 48 sessions.

    .venv/bin/python experiments/synth_shapes.py [--scale 4] [--sessions 393] [--ws]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from replay.traces import load_trace
from replay.traces.figures import corpus_figures
from replay.traces.reference import load_reference
from replay.traces.synth import Knobs, SynthConfig, write_synth

BASE = Knobs()
VARIANTS: dict[str, dict[str, Any]] = {
    "shipped": {},
    # gaps_by_what_ended_the_turn: one lognormal for every gap (no end_turn component, no
    # tool timeout), its median and spread those of the shipped mixture's p50 and p90.
    "gaps: one lognormal": {
        "p_human": 0.0,
        "tool_gap": (4.9, 2.5),
        "p_long_timeout": 1.0,
        "tool_timeout": (1e7, 1e7),
    },
    "gaps: no Bash timeout": {"tool_timeout": (1e7, 1e7)},
    "gaps: every call 600 s": {"p_long_timeout": 1.0},
    # request_time_with_context: ttft constant at its value for a 150K prompt.
    "ttft: constant": {"ttft": (2.53, 0.0, 0.0)},
    # subagent_fan_out: one group per batch (no parallel subagents).
    "subagents: one per batch": {"batch_poisson": 0.0},
    # side_calls: none (the non-continuations the source counts disappear).
    "side calls: none": {"p_side": 0.0},
    # resumed sessions (kvct-dev's 45%): none.
    "resumed: none": {"p_resumed": 0.0},
}
SHOWN = (
    "main_prompt_p50",
    "main_prompt_p90",
    "new_prefill_mean",
    "gap_p50_s",
    "gap_p90_s",
    "gap_over_300s_share",
    "gap_mean_s",
    "waiting_share",
    "subagent_peak_concurrent_p50",
    "continuation_share",
    "ideal_prefix_hit",
)


def working_set(path: Path, scale: float) -> str:
    from replay.sim.runner import SimConfig, simulate

    trace = load_trace(path)
    out = []
    for n in (32, 48):
        cfg = SimConfig(
            "vllm", n, seed=0, capacity_blocks=2531, subagents="skip", token_scale=scale
        )
        out.append(f"{simulate(trace, cfg).summary['working_set_ratio']:.2f}")
    return " / ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", type=float, default=4.0)
    ap.add_argument("--sessions", type=int, default=393)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ws", action="store_true", help="also the working set at 32 / 48")
    args = ap.parse_args()
    ref = {f.key: f.value for f in load_reference("cc-traces-062126").figures}
    print(f"{args.sessions} sessions, seed {args.seed}, scale {args.scale:g}; ratio to published")
    head = "variant".ljust(26) + "".join(k[:14].rjust(15) for k in SHOWN)
    print(head + ("   WS 32 / 48" if args.ws else ""))
    print(
        " " * 26
        + "".join(f"{ref[k]:>15,.4g}" for k in SHOWN)
        + ("   0.93 / 1.34" if args.ws else "")
    )
    for name, change in VARIANTS.items():
        knobs = dataclasses.replace(BASE, **change)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "c.jsonl"
            cfg = SynthConfig(n_trajectories=args.sessions, seed=args.seed, scale=args.scale)
            write_synth(path, cfg, knobs=knobs)
            f = corpus_figures(load_trace(path))
            ws = working_set(path, args.scale) if args.ws else ""
        row = "".join(f"{f[k] / ref[k]:>15.2f}" for k in SHOWN)
        print(name.ljust(26) + row + (f"   {ws}" if ws else ""))


if __name__ == "__main__":
    main()
