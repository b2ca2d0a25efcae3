"""The synthesizer's figures beside the published ones (the calibration, as a rerunnable
experiment).

Generates the corpus (`--sessions`, token lengths ÷ `--scale`; seed `--seed`) with the
shipped `Knobs` or overrides, computes every figure of the reference file the way
`replay traces stats --compare` does (at full size) and prints it beside the published
value with the ratio. The knobs in `replay/traces/synth.py` were set with this script
(docs/corpus.md records the run): each knob is named after the figure that sets it.

    .venv/bin/python experiments/calibrate_synth.py                     # shipped knobs
    .venv/bin/python experiments/calibrate_synth.py "p_human=0.1" --scale 4

New-prefill figures are quantised by a scaled trace's blocks (a block stands for
64 × scale tokens, and the partial last block is recomputed each turn): read them at
--scale ≤ 2.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from replay.traces import load_trace
from replay.traces.figures import corpus_figures
from replay.traces.reference import compare, load_reference
from replay.traces.synth import Knobs, SynthConfig, write_synth


def parse_override(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    if key not in {f.name for f in dataclasses.fields(Knobs)}:
        raise SystemExit(f"unknown knob '{key}' (see replay/traces/synth.py: Knobs)")
    return key, ast.literal_eval(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="knob=value, e.g. 'p_human=0.1'")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--sessions", type=int, default=393)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference", default="cc-traces-062126")
    args = ap.parse_args()
    knobs = dataclasses.replace(Knobs(), **dict(parse_override(o) for o in args.overrides))
    ref = load_reference(args.reference)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.jsonl"
        t0 = time.perf_counter()
        cfg = SynthConfig(n_trajectories=args.sessions, seed=args.seed, scale=args.scale)
        write_synth(path, cfg, knobs=knobs)
        t1 = time.perf_counter()
        trace = load_trace(path)
        figures = corpus_figures(trace)
    t2 = time.perf_counter()
    print(
        f"{args.sessions} sessions, seed {args.seed}, scale {args.scale:g}; knobs "
        f"{' '.join(args.overrides) or 'shipped'}; generated in {t1 - t0:.1f} s, "
        f"loaded and measured in {t2 - t1:.1f} s"
    )
    worst = 0.0
    for r in compare(figures, ref):
        flag = "" if r["within_tolerance"] else "  <-- outside"
        check = next(f.check for f in ref.figures if f.key == r["figure"])
        if check:
            worst = max(worst, abs(r["ratio"] - 1))
        print(
            f"{r['figure']:34s} {r['trace']:>14,.4g} {r['reference']:>14,.4g} {r['ratio']:7.3f}{flag}"
        )
    print(f"largest deviation of a checked figure: {worst:.1%} (tolerance {ref.tolerance:.0%})")


if __name__ == "__main__":
    main()
