"""Per-workload agreement with vLLM's own KV cache manager: cached tokens of `vllm-native`
beside our `vllm` (the model after issue 13's fixes) and `vllm-like` (the chunk-end model it
replaced, kept for the source's table), and how many requests differ from vLLM's.

Workloads are `replay.sim.native.crosscheck`'s (16-token blocks, two-block states), seeds
0..N-1, in vLLM's default scheduler settings and in the paper's benchmark settings. Needs the
vLLM environment (`bash scripts/setup_vllm_cpu.sh`).

    .venv/bin/python scripts/native_agreement.py [--seeds 5] [--markdown]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from replay.profiles import ModelProfile
from replay.sim.native.crosscheck import WORKLOADS, compare, drive
from replay.sim.native.worker import NativeError, Worker
from replay.sim.policies import make_policy

B = 16
SETTINGS = {  # as in tests/unit/replay/sim/test_sim_native_vllm.py
    "default": {"long_prefill_threshold": 0, "token_budget": 2048},
    "paper": {"long_prefill_threshold": 2 * B, "token_budget": 60},
}
CAPACITY = {"tight": 40}  # blocks; the others 400 (no eviction)


def profile(blocks: int) -> ModelProfile:
    return ModelProfile(
        name="tiny",
        model="tiny hybrid",
        gpus=1,
        block_tokens=B,
        blocks_per_engine=blocks,
        checkpoint_blocks=2,
        prefill_cost_d=1.862e-5,
        prefill_cost_e=3.33e-6,
        cost_unit_tokens=100,
        chunk_tokens=2 * B,
        context_tokens=4096,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    try:
        worker = Worker.start()
    except NativeError as e:
        print(e, file=sys.stderr)
        return 1
    print(f"vLLM {worker.version} from {worker.found.python} ({worker.found.how})")
    head = (
        "setting",
        "workload",
        "requests",
        "vLLM (native)",
        "ours before (vllm-like)",
        "differ before",
        "ours after (vllm)",
        "differ after",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    try:
        for setting, opts in SETTINGS.items():
            for name, gen in WORKLOADS.items():
                prof = profile(CAPACITY.get(name, 400))
                tot = np.zeros(6, dtype=np.int64)
                for seed in range(args.seeds):
                    reqs = gen(np.random.default_rng(seed), B)
                    nat = make_policy("vllm-native", prof, **opts).make_cache(prof, worker=worker)
                    theirs = drive(nat, reqs)
                    old = drive(make_policy("vllm-like", prof).make_cache(prof), reqs)
                    new = drive(make_policy("vllm", prof).make_cache(prof), reqs)
                    _, t, d_old = compare(old, theirs)
                    o, _, _ = compare(old, theirs)
                    a, _, d_new = compare(new, theirs)
                    tot += (len(reqs), t, o, d_old, a, d_new)
                print(
                    f"| {setting} | {name} | {tot[0]} | {tot[1]:,} | {tot[2]:,} | {tot[3]} | "
                    f"{tot[4]:,} | {tot[5]} |",
                    flush=True,
                )
    finally:
        worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
