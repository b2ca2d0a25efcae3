"""Why `dense` cannot replay 48 full-size sessions for 45 minutes in 1 s of CPU (issue 36,
point 8), when every other policy does.

Times `dense` at several checkpoint spacings (`--every`, tokens: the policy's 1,088 first,
the last one past any prompt, so that no checkpoint is written at all). The run with none
is what the replay costs without checkpoints; what a spacing adds over it, divided by the
evictions it adds, is the cost of one checkpoint's life in the cache (written, filed in the
LRU, evicted: nearly every one of dense's checkpoints is evicted, as it writes four per
4,352-token block). Then prints what the 1 s target would leave for each of them, beside
the least that filing and evicting one can cost: a push and a pop of an entry shaped as the
LRU's (`AllocationLRU`: last use, depth, sequence, version, object) on a heap of the cache's
size, timed alone.

    .venv/bin/python experiments/dense_cost.py [--trace SRC] [--sessions 48]
        [--every 1088,4352,17408,1000000000] [--repeat 3]

Without `--trace` it uses the full-size synthesized corpus `scripts/bench_sim.py` times
(`.corpus/synth-full-seed0.jsonl.gz`, synthesized on first use, ~2 min).
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import time
from pathlib import Path

from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.model import Trace
from replay.traces.synth import SynthConfig, write_synth

TARGET_S = 1.0  # issue 36 point 8 (scripts/bench_sim.py's TARGET_S)
DEFAULT_CORPUS = Path(".corpus") / "synth-full-seed0.jsonl.gz"


def timed(trace: Trace, sessions: int, every: int, repeat: int) -> tuple[float, int, float, int]:
    """(best CPU seconds of `repeat` runs, evictions, hit rate, the cache's blocks) of
    `dense` at `every`."""
    cfg = SimConfig("dense", sessions, policy_opts={"every": every})
    best = float("inf")
    for _ in range(max(repeat, 1)):
        c0 = time.process_time()
        res = simulate(trace, cfg)
        best = min(best, time.process_time() - c0)
    s = res.summary
    return best, int(s["evictions"]), float(s["hit_rate"]), int(s["capacity_blocks"])


def heap_floor(size: int, n: int = 200_000) -> float:
    """Seconds per push and pop of LRU-shaped entries on a heap of `size` (stamps rising
    as a replay's do), the entries made beforehand."""
    seq = itertools.count()
    heap = [(float(i), -i, next(seq), 0, None) for i in range(size)]
    heapq.heapify(heap)
    entries = [(float(size + i), -i, next(seq), 0, None) for i in range(n)]
    push, pop = heapq.heappush, heapq.heappop
    c0 = time.process_time()
    for e in entries:
        push(heap, e)
        pop(heap)
    return (time.process_time() - c0) / n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default=None)
    ap.add_argument("--sessions", type=int, default=48)
    ap.add_argument("--every", default="1088,4352,17408,1000000000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    src = Path(args.trace) if args.trace else DEFAULT_CORPUS
    if args.trace is None and not src.exists():
        print(f"synthesizing a full-size corpus into {src} (once; ~2 min)")
        write_synth(src, SynthConfig())
    trace = load_trace(src)
    spacings = [int(x) for x in args.every.split(",")]
    base_every = max(spacings)
    rows = {e: timed(trace, args.sessions, e, args.repeat) for e in spacings}
    base_s, base_ev, _, size = rows[base_every]
    print(f"dense, {args.sessions} sessions, {src}: best of {args.repeat} runs (CPU)")
    for every, (cpu, ev, hit, _) in rows.items():
        extra = ev - base_ev
        each = (cpu - base_s) / extra * 1e6 if extra > 0 else float("nan")
        print(
            f"  every {every:>13,} tokens: {cpu:.2f} s, {ev:,} evictions, hit {hit:.1%}; "
            f"{cpu - base_s:+.2f} s over none for {extra:,} more = {each:.2f} µs each"
        )
    extra = rows[min(spacings)][1] - base_ev
    if extra > 0:
        room = (TARGET_S - base_s) / extra * 1e6
        floor = heap_floor(size) * 1e6
        print(
            f"the {TARGET_S:g} s target leaves {TARGET_S - base_s:.2f} s for {extra:,} "
            f"checkpoints: {room:.2f} µs each; one push and pop on a {size:,}-entry heap "
            f"alone takes {floor:.2f} µs (an interpreted loop over heapq's C functions)"
        )


if __name__ == "__main__":
    main()
