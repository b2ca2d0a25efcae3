"""Per-request agreement of our external store's `mooncake` rule (replay/sim/cache/tiers.py,
rule 5: an `ExternalStore` holding KV and states behind the `vllm` policy's host tier) with
Mooncake 0.3.13's own store, master and client (replay/sim/native/mooncake_oracle.py,
mooncake_worker.py): the same requests one after another, the model's writes put into both,
and per request the prompt's prefix tokens whose KV the store holds ("held") and the deepest
of them with a state in the store ("with a state": a hybrid resume's reach from the store).
One Markdown table, then each case's first differing request.

Workloads: `conversations` (4 conversations taking turns) and replay.sim.native.crosscheck's,
run in order one at a time; 16-token blocks, two-block states, a 40-block GPU cache. Needs
the Mooncake environment (`bash scripts/setup_mooncake_cpu.sh`).

    .venv/bin/python scripts/mooncake_agreement.py [--seeds 2]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from replay.sim.native.agreement_table import print_firsts, print_head, print_row, tier_workloads
from replay.sim.native.host_oracle import Req
from replay.sim.native.lmcache_oracle import agreement
from replay.sim.native.mooncake_oracle import ENGINE, Setup, measure, run_engine, run_model
from replay.sim.native.worker import NativeError, Worker

# A 40-block GPU cache (as the other tiers' oracles) and Mooncake stores with room for all
# (1,024 blocks), 3.2x the GPU (128), 1.6x (64), about its size (44) and less (30).
CASES = [Setup(40, 1024), Setup(40, 128), Setup(40, 64), Setup(40, 44), Setup(40, 30)]

WHY = """
Mooncake's store keeps what its master's eviction leaves: the eviction thread (every 10 ms)
runs BatchEvict once the segment is over its high watermark (90%, eviction_high_watermark_ratio)
or a put found no room, and takes about 5% of the objects (eviction_ratio), those whose lease
ran out longest ago first (a put or a lookup, batch_is_exist, renews it): LRU over every key,
copies of blocks and states still on the GPU included, and a prefix whose first block went is
lost whole. Rule 5 counts the store's copies of GPU and host entries as never evicted and drops
only external-only ones, in the order the GPU dropped them, up to the whole capacity."""


class Tally:
    """One row's sums over seeds."""

    def __init__(self) -> None:
        self.n = self.agree = self.agree_usable = self.refused = self.cap = 0
        self.tokens = [0, 0, 0, 0]  # held ours, held Mooncake, usable ours, usable Mooncake


def run_case(worker: Worker, s: Setup, reqs: Sequence[Req], t: Tally) -> tuple[int, str] | None:
    """Adds one seed to `t`; the first differing request (index, what each holds) or None."""
    t.cap = measure(worker, s)
    steps = run_model(reqs, s, t.cap)
    theirs, refused = run_engine(worker, reqs, steps)
    ours = [st.held for st in steps]
    a = agreement([h.store for h in ours], [h.store for h in theirs])
    u = agreement([h.usable for h in ours], [h.usable for h in theirs])
    t.n += a["requests"]
    t.agree += a["requests"] - len(a["differ"])
    t.agree_usable += u["requests"] - len(u["differ"])
    t.refused += refused
    for k, v in enumerate((*a["tokens"], *u["tokens"])):
        t.tokens[k] += v
    differ = sorted({d[0] for d in a["differ"]} | {d[0] for d in u["differ"]})
    if not differ:
        return None
    i = differ[0]
    return i, (
        f"held ours {ours[i].store}, Mooncake {theirs[i].store}; "
        f"with a state ours {ours[i].usable}, Mooncake {theirs[i].usable}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per workload")
    ap.add_argument(
        "--watermark",
        type=float,
        default=0.9,
        help="a what-if: the master's eviction_high_watermark_ratio (Mooncake's default 0.9)",
    )
    ap.add_argument("--python", help="the interpreter with Mooncake 0.3.13 (default: as found)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        print(f"error: --seeds {args.seeds}: expected at least 1", file=sys.stderr)
        return 2
    if not 0 < args.watermark <= 1:
        print(
            f"error: --watermark {args.watermark}: expected above 0 and at most 1", file=sys.stderr
        )
        return 2
    try:
        worker = Worker.start(args.python, engine=ENGINE)
    except NativeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    head = [
        "GPU blocks", "store blocks", "workload", "requests", "held tokens: ours / Mooncake",
        "agree", "with a state: ours / Mooncake", "agree", "puts refused",
    ]  # fmt: skip
    print_head(head)
    firsts: list[str] = []
    total = [0, 0, 0]
    try:
        for case in CASES:
            s = replace(case, watermark=args.watermark)
            for name, gen in tier_workloads().items():
                t = Tally()
                for seed in range(args.seeds):
                    first = run_case(worker, s, gen(np.random.default_rng(seed)), t)
                    if first is not None:
                        firsts.append(
                            f"- {t.cap} blocks, {name}, seed {seed}, request {first[0]}: {first[1]}"
                        )
                total[0] += t.n
                total[1] += t.agree
                total[2] += t.agree_usable
                print_row([
                    s.capacity, t.cap, name, t.n, f"{t.tokens[0]:,} / {t.tokens[1]:,}",
                    f"{100 * t.agree / t.n:.1f}%", f"{t.tokens[2]:,} / {t.tokens[3]:,}",
                    f"{100 * t.agree_usable / t.n:.1f}%", t.refused,
                ])  # fmt: skip
    finally:
        worker.close()
    print(
        f"\nAll: {total[0]:,} requests, {100 * total[1] / total[0]:.1f}% agree on the held KV, "
        f"{100 * total[2] / total[0]:.1f}% on the prefix with a state"
    )
    print_firsts(firsts, "prompt tokens", WHY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
