"""Per-request agreement of our host tier (replay/sim/cache/tiers.py, the `vllm` policy's
cache with a one-pool host tier, rule "connector") with vLLM 0.32's own scheduler, KV offloading
connector and CPU LRU manager (replay/sim/native/host_oracle.py, vllm_host_worker.py): the same
requests one after another, and per request the prefix tokens each found on the GPU and in host
memory. One Markdown table, then each case's first differing request.

Each case is also run with no host tier (vLLM with no connector, the model without a tier)
so a difference the GPU tier already has (docs/cache-tiers.md, "The oracle") is told apart
from one the host tier adds: the "GPU only" column.

Workloads: `conversations` (4 conversations taking turns: their prefixes leave a small GPU
cache between turns) and replay.sim.native.crosscheck's, run in order one at a time; 16-token
blocks, two-block states. Needs the vLLM environment (`bash scripts/setup_vllm_cpu.sh`).

    .venv/bin/python scripts/tier_agreement.py [--seeds 2]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from replay.sim.native.agreement_table import print_firsts, print_head, print_row, tier_workloads
from replay.sim.native.host_oracle import (
    ENGINE,
    agreement,
    run_engine,
    run_model,
)
from replay.sim.native.worker import NativeError, Worker

# (GPU blocks, host bytes for vLLM's CPU manager): hosts larger than the GPU (128 and 75
# chunks over 40 blocks), about its size (40 and 30 chunks) and smaller (37 chunks over 60
# blocks). One chunk (a KV block, or one state group's block): 8 KiB here.
CASES = [(40, 1 << 20), (40, 600 << 10), (40, 320 << 10), (40, 240 << 10), (60, 300 << 10)]
NO_HOST = 0  # no connector: vLLM's scheduler as the GPU tier's oracle runs it

WHY = """
"host tier": vLLM's CPU manager evicts its least recently used idle chunks when a store needs
room (v1/kv_offload/cpu/manager.py:311-330, policies/lru.py:115-160), copies of blocks still on
the GPU included, so its host holds the latest stores; tiers.py (HostTier._fit, :106-126) keeps
the host's copies of GPU-resident entries and evicts only host-only ones, so a host no larger
than the GPU cache leaves ours no room. "also without host": the GPU tier's own residue (the
same request differs with no host tier; docs/cache-tiers.md, "The oracle")."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per workload")
    ap.add_argument("--python", help="the interpreter with vLLM 0.32 (default: as found)")
    args = ap.parse_args(argv)
    try:
        worker = Worker.start(args.python, engine=ENGINE)
    except NativeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    head = [
        "GPU blocks", "host chunks", "workload", "requests", "GPU-hit tokens (ours / vLLM)",
        "host-hit tokens (ours / vLLM)", "agree", "GPU only: agree",
    ]  # fmt: skip
    print_head(head)
    firsts: list[str] = []
    total = [0, 0, 0]  # requests, agreeing, agreeing with no host
    try:
        for cap, cpu in CASES:
            for name, gen in tier_workloads().items():
                n = agree = base = 0
                gpu, host = [0, 0], [0, 0]
                chunks = 0
                for seed in range(args.seeds):
                    reqs = gen(np.random.default_rng(seed))
                    theirs, chunks = run_engine(worker, reqs, cap, cpu)
                    a = agreement(run_model(reqs, cap, chunks), theirs)
                    b = agreement(
                        run_model(reqs, cap, 0), run_engine(worker, reqs, cap, NO_HOST)[0]
                    )
                    n += a["requests"]
                    agree += a["requests"] - len(a["differ"])
                    base += b["requests"] - len(b["differ"])
                    for k in (0, 1):
                        gpu[k] += a["gpu"][k]
                        host[k] += a["host"][k]
                    if a["differ"] and len(firsts) < 40:
                        i, ours, th = a["differ"][0]
                        gpu_first = b["differ"][0][0] if b["differ"] else len(reqs)
                        tag = "also without host" if gpu_first <= i else "host tier"
                        firsts.append(
                            f"- {cap} blocks / {chunks} chunks, {name}, seed {seed}, request {i}: "
                            f"ours GPU {ours.gpu} + host {ours.host}, vLLM GPU {th.gpu} + host "
                            f"{th.host} ({tag})"
                        )
                total[0] += n
                total[1] += agree
                total[2] += base
                print_row([
                    cap, chunks, name, n, f"{gpu[0]} / {gpu[1]}", f"{host[0]} / {host[1]}",
                    f"{100 * agree / n:.1f}%", f"{100 * base / n:.1f}%",
                ])  # fmt: skip
    finally:
        worker.close()
    print(
        f"\nAll: {total[0]} requests, {100 * total[1] / total[0]:.1f}% agree "
        f"(GPU only: {100 * total[2] / total[0]:.1f}%)"
    )
    print_firsts(firsts, "GPU-hit + host-hit tokens", WHY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
