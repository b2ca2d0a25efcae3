"""Experiment: our `sglang` model against SGLang 0.5.22's own hybrid radix cache
(`sglang-native`) request by request under pressure, one rule toggled at a time (issue 22,
the pressure clause; docs/native-policies.md "SGLang under the demo's pressure").

    .venv/bin/python scripts/sglang_native_pressure.py --trace ../shared/traces/kvct-dev.jsonl.gz
    .venv/bin/python scripts/sglang_native_pressure.py --minutes 15    # full-size synth, 48 sessions

Trace timing, seed 0. SGLang's cache runs in its own process with page size 1 (one KV slot
per token), so the full-size synthesized corpus (`.corpus/synth-full-seed0.jsonl.gz`, the one
`scripts/vllm_native_pressure.py` uses; written on first use) at 48 sessions takes it tens
of minutes; `--minutes` replays a shorter run (window: its last two thirds). kvct-dev at 48
sessions takes a few minutes. Each of our runs takes seconds.

Printed per variant: the window's hit rate, cached tokens over the whole run beside
SGLang's, and how many requests get a different number of cached tokens than SGLang gives
them. The variants are the shipped rules and each holding rule of `replay/sim/sglang_policy.py`
set to its other value (rule 6: what a running request locks).
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
VARIANTS: dict[str, dict[str, Any]] = {
    "sglang (shipped)": {},
    "rule 6: the state resumed from not locked": {"pin_resumed_state": False},
    "rule 6: the latest prefill state not locked to the end": {"hold_chunk_state": False},
}

Key = tuple[int, str, str, int, int]


def _cached(records: list[RequestRecord]) -> dict[Key, int]:
    return {
        (r.session, r.trajectory, r.agent, r.turn, r.attempt): r.cached_tokens or 0
        for r in records
        if r.status == "ok" and not r.priming
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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

    def run(policy: str, opts: dict[str, Any]) -> tuple[float, dict[Key, int], float]:
        cfg = SimConfig(
            policy=policy,
            sessions=args.sessions,
            timing="trace",
            capacity_blocks=args.blocks,
            policy_opts=opts,
            **extra,
        )
        t0 = time.perf_counter()
        res = simulate(trace, cfg)
        return res.summary["hit_rate"], _cached(res.records), time.perf_counter() - t0

    try:
        native_hit, native, wall = run("sglang-native", {})
    except NativeError as e:
        print(f"sglang-native: {e}", file=sys.stderr)
        return 1
    total = sum(native.values())
    blocks = args.blocks or "2,531"
    span = f"{args.minutes:g} min" if args.minutes is not None else "45 min"
    print(f"{path}, {args.sessions} sessions, {blocks} blocks, trace timing, seed 0, {span}")
    print(f"(sglang-native took {wall:.0f} s)")
    print()
    print("| variant | hit rate (window) | cached tokens, of SGLang's own | requests that differ |")
    print("|---|---|---|---|")
    print(f"| sglang-native (SGLang's own cache) | {native_hit:.1%} | {total / 1e6:,.1f}M | – |")
    for label, opts in VARIANTS.items():
        hit, ours, _ = run("sglang", opts)
        differ = sum(1 for k, v in ours.items() if k in native and v != native[k])
        ratio = sum(ours.values()) / total if total else 0.0
        print(f"| {label} | {hit:.1%} | {ratio:.3f}× | {differ} of {len(native):,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
