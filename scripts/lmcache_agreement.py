"""Per-request agreement of our external store's `lmcache` rule (replay/sim/cache/tiers.py, rule
5: an `ExternalStore` holding no states behind the `vllm` policy's host tier) with LMCache
0.5.6's own storage code (replay/sim/native/lmcache_oracle.py, lmcache_worker.py): the same
requests one after another, and per request the prompt's prefix tokens whose KV the store
holds. One Markdown table, then each case's first differing request.

"ours": the model's store (a copy of every block on the GPU or in host memory, and what they
dropped while it fits, oldest external-only first out). "ours, write rule": ours read with
LMCache's write rule as vLLM's connector applies it (whole chunks of what earlier prompts wrote,
and their outputs only with `save_decode_cache`), so what it leaves is eviction. "served":
tokens our store served a hybrid resume, with the `lmcache` store (no states) and with a
`mooncake` store of the same room (states too), ours only.

Workloads: `conversations` (4 conversations taking turns) and replay.sim.native.crosscheck's,
run in order one at a time; 16-token blocks, two-block states. Needs the LMCache environment
(`bash scripts/setup_lmcache_cpu.sh`).

    .venv/bin/python scripts/lmcache_agreement.py [--seeds 2]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from replay.sim.native.agreement_table import print_firsts, print_head, print_row, tier_workloads
from replay.sim.native.host_oracle import Req
from replay.sim.native.lmcache_oracle import (
    ENGINE,
    Setup,
    agreement,
    run_engine,
    run_model,
    written,
)
from replay.sim.native.worker import NativeError, Worker

# A 40-block GPU cache (as the host tier's oracle) and LMCache's store: block-sized chunks
# storing outputs too, with room for all (1,024 chunks), 1.6x the GPU (64), about its size
# (44) and less (30); LMCache's defaults (prompts only), in 16- and 64-token chunks (its
# default 256 over vLLM's 16-token blocks is 16 blocks a chunk: 4 here, for prompts of
# 3 to 20 blocks).
CASES = [
    Setup(40, 16, 1024, True),
    Setup(40, 16, 1024, False),
    Setup(40, 64, 256, False),
    Setup(40, 16, 64, True),
    Setup(40, 16, 44, True),
    Setup(40, 16, 30, True),
]

WHY = """
"write rule": LMCache stores what vLLM's connector hands it, each request's full chunks of its
prompt (integration/vllm/vllm_v1_adapter.py:317-360, save_unfull_chunk False, save_decode_cache
False by default), so an earlier turn's output and the partial chunk a prompt ends in are not
in the store; rule 5 holds a copy of every block the GPU keeps, outputs included, in blocks.
"eviction": LMCache's CPU backend evicts its least recently put or hit chunks when an
allocation fails (v1/storage_backend/local_cpu_backend.py:649-745, cache_policy/lru.py:45-80),
copies of blocks still on vLLM's GPU included; rule 5 counts the store's copies of GPU and host
blocks as never evicted and evicts only external-only ones, oldest dropped first."""


class Tally:
    """One row's sums over seeds."""

    def __init__(self) -> None:
        self.n = self.agree = self.agree_rule = 0
        self.tokens = [0, 0, 0]  # ours, ours with the write rule, LMCache
        self.served = [0, 0]  # lmcache, mooncake
        self.cap = 0


def run_case(worker: Worker, s: Setup, reqs: Sequence[Req], t: Tally) -> tuple[int, str] | None:
    """Adds one seed to `t`; the first differing request (index, tag) or None."""
    theirs_h, t.cap = run_engine(worker, reqs, s)
    theirs = [h.store for h in theirs_h]
    ours_h = run_model(reqs, s, t.cap)
    ours = [h.store for h in ours_h]
    wrote = written(reqs, s.chunk, s.decode)
    ruled = [min(o // s.chunk * s.chunk, w) for o, w in zip(ours, wrote, strict=True)]
    a, b = agreement(ours, theirs), agreement(ruled, theirs)
    t.n += a["requests"]
    t.agree += a["requests"] - len(a["differ"])
    t.agree_rule += b["requests"] - len(b["differ"])
    for k, v in enumerate((a["tokens"][0], b["tokens"][0], a["tokens"][1])):
        t.tokens[k] += v
    t.served[0] += sum(h.served for h in ours_h)
    t.served[1] += sum(h.served for h in run_model(reqs, s, t.cap, "mooncake"))
    if not a["differ"]:
        return None
    i = a["differ"][0][0]
    tag = "write rule" if ruled[i] == theirs[i] else "eviction"
    return i, f"ours {ours[i]}, ours with the write rule {ruled[i]}, LMCache {theirs[i]} ({tag})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per workload")
    ap.add_argument("--python", help="the interpreter with LMCache 0.5.6 (default: as found)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        print(f"error: --seeds {args.seeds}: expected at least 1", file=sys.stderr)
        return 2
    try:
        worker = Worker.start(args.python, engine=ENGINE)
    except NativeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    head = [
        "GPU blocks", "chunk", "store chunks", "stores", "workload", "requests",
        "held tokens: ours / ours, write rule / LMCache", "agree", "agree, write rule",
        "served (ours): lmcache / mooncake",
    ]  # fmt: skip
    print_head(head)
    firsts: list[str] = []
    total = [0, 0, 0]
    try:
        for s in CASES:
            for name, gen in tier_workloads().items():
                t = Tally()
                for seed in range(args.seeds):
                    first = run_case(worker, s, gen(np.random.default_rng(seed)), t)
                    if first is not None:
                        firsts.append(
                            f"- {s.chunk}-token chunks, {t.cap} chunks, "
                            f"{'outputs too' if s.decode else 'prompts'}, {name}, seed {seed}, "
                            f"request {first[0]}: {first[1]}"
                        )
                total[0] += t.n
                total[1] += t.agree
                total[2] += t.agree_rule
                print_row([
                    s.capacity, s.chunk, t.cap, "prompt + output" if s.decode else "prompt",
                    name, t.n, " / ".join(f"{v:,}" for v in t.tokens),
                    f"{100 * t.agree / t.n:.1f}%", f"{100 * t.agree_rule / t.n:.1f}%",
                    f"{t.served[0]:,} / {t.served[1]:,}",
                ])  # fmt: skip
    finally:
        worker.close()
    print(
        f"\nAll: {total[0]} requests, {100 * total[1] / total[0]:.1f}% agree "
        f"({100 * total[2] / total[0]:.1f}% with LMCache's write rule)"
    )
    print_firsts(firsts, "held prompt tokens", WHY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
