"""The driver behind experiments/vllm_native_pressure.py and experiments/sglang_native_pressure.py:
one of our cache models against its engine's own cache code (`vllm-native`,
`sglang-native`) request by request under pressure, trace timing, seed 0, one rule set to
its other value per row.

Printed per variant: the window's hit rate, cached tokens over the whole run beside the
engine's own, and how many requests get a different number of cached tokens than the
engine's code gives them. The default corpus is the full-size synthesized one
(`.corpus/synth-full-seed0.jsonl.gz`, written on first use, about 2 minutes); at 48
sessions its working set is 1.42 of the 2,531-block cache, the demo's pressure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from replay.records import RequestRecord
from replay.sim.native.worker import NativeError
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.synth import SynthConfig, write_synth

DEFAULT_CORPUS = Path(".corpus") / "synth-full-seed0.jsonl.gz"
ENGINE_NAMES = {"vllm": "vLLM's own manager", "sglang": "SGLang's own cache"}

Key = tuple[int, str, str, int, int]


def _cached(records: list[RequestRecord]) -> dict[Key, int]:
    return {
        (r.session, r.trajectory, r.agent, r.turn, r.attempt): r.cached_tokens or 0
        for r in records
        if r.status == "ok" and not r.priming
    }


def main(
    policy: str, variants: dict[str, dict[str, Any]], doc: str, argv: list[str] | None = None
) -> int:
    """Compare `policy` with `<policy>-native` under each of `variants` (label → options)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--trace", help=f"a trace file (default: {DEFAULT_CORPUS})")
    ap.add_argument("--sessions", type=int, default=48)
    ap.add_argument("--blocks", type=int, help="cache memory in blocks (default: the profile's)")
    ap.add_argument("--minutes", type=float, help="replay this long (default: the full 45)")
    args = ap.parse_args(argv)
    if args.sessions < 1:
        print(f"--sessions {args.sessions}: must be at least 1", file=sys.stderr)
        return 2
    if args.minutes is not None and args.minutes <= 0:
        print(f"--minutes {args.minutes}: must be positive", file=sys.stderr)
        return 2
    if args.trace is None:
        if not DEFAULT_CORPUS.exists():
            print(f"writing {DEFAULT_CORPUS} (full-size synthesized corpus, seed 0)")
            DEFAULT_CORPUS.parent.mkdir(exist_ok=True)
            write_synth(DEFAULT_CORPUS, SynthConfig())
        path = DEFAULT_CORPUS
    else:
        path = Path(args.trace)
        if not path.exists():
            print(f"--trace {path}: no such file", file=sys.stderr)
            return 2
    trace = load_trace(path)
    extra: dict[str, Any] = {}
    if args.minutes is not None:
        d = args.minutes * 60.0
        extra = {"duration_s": d, "window": (d / 3, d)}

    def run(name: str, opts: dict[str, Any]) -> tuple[float, dict[Key, int], float]:
        cfg = SimConfig(
            policy=name,
            sessions=args.sessions,
            timing="trace",
            capacity_blocks=args.blocks,
            policy_opts=opts,
            **extra,
        )
        t0 = time.perf_counter()
        res = simulate(trace, cfg)
        return res.summary["hit_rate"], _cached(res.records), time.perf_counter() - t0

    native_name = f"{policy}-native"
    try:
        native_hit, native, wall = run(native_name, {})
    except NativeError as e:
        print(f"{native_name}: {e}", file=sys.stderr)
        return 1
    total = sum(native.values())
    own = ENGINE_NAMES.get(policy, "the engine's own code")
    blocks = args.blocks or "2,531"
    span = f"{args.minutes:g} min" if args.minutes is not None else "45 min"
    print(f"{path}, {args.sessions} sessions, {blocks} blocks, trace timing, seed 0, {span}")
    print(f"({native_name} took {wall:.0f} s)")
    print()
    print(f"| variant | hit rate (window) | cached tokens, of {own} | requests that differ |")
    print("|---|---|---|---|")
    print(f"| {native_name} ({own}) | {native_hit:.1%} | {total / 1e6:,.1f}M | – |")
    for label, opts in variants.items():
        hit, ours, _ = run(policy, opts)
        differ = sum(1 for k, v in ours.items() if k in native and v != native[k])
        ratio = sum(ours.values()) / total if total else 0.0
        print(f"| {label} | {hit:.1%} | {ratio:.3f}× | {differ} of {len(native):,} |")
    return 0
