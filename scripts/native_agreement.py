"""Per-workload agreement of our engine models with the engines' own cache code, request by
request: `vllm` (and `vllm-like`, the chunk-end model it replaced, kept for the source's table)
against vLLM 0.32's KVCacheManager (`vllm-native`), and `sglang` against SGLang 0.5.22's
UnifiedRadixCache (`sglang-native`). Prints one Markdown table per engine (cached tokens and
requests that differ) and then every differing request (seed, index, ours, the engine's).

Workloads are `replay.sim.native.crosscheck`'s (16-token blocks, two-block states), seeds
0..N-1; vLLM in its default scheduler settings and in the paper's benchmark settings, SGLang
with its grid, track interval and chunk scaled to the blocks (16, 16, 64 tokens: 256, 256 and
16,384 over 16). Needs the vLLM environment with SGLang
(`bash scripts/setup_vllm_cpu.sh --with-sglang`).

    .venv/bin/python scripts/native_agreement.py [--seeds 5] [--engines vllm,sglang]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from replay.profiles import ModelProfile
from replay.sim.cache.policies import make_policy
from replay.sim.native.agreement_table import print_head, print_row
from replay.sim.native.crosscheck import WORKLOADS, compare, drive
from replay.sim.native.worker import NativeError, Worker

B = 16
SETTINGS = {  # as in tests/unit/replay/sim/test_sim_native_vllm.py
    "default": {"long_prefill_threshold": 0, "token_budget": 2048},
    "paper": {"long_prefill_threshold": 2 * B, "token_budget": 60},
}
CAPACITY = {"vllm": {"tight": 40}, "sglang": {"tight": 60}}  # blocks; the others 400
SGLANG = {"grid": B, "track_interval": B, "chunk": 4 * B}  # tests/.../test_sim_native_sglang.py


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


def vllm_table(worker: Worker, seeds: int, differ: list[str]) -> None:
    head = ["setting", "workload", "requests", "vLLM (native)", "vllm-like", "differ", "vllm"]
    print_head([*head, "differ"])
    for setting, opts in SETTINGS.items():
        for name, gen in WORKLOADS.items():
            prof = profile(CAPACITY["vllm"].get(name, 400))
            tot = np.zeros(6, dtype=np.int64)
            for seed in range(seeds):
                reqs = gen(np.random.default_rng(seed), B)
                nat = make_policy("vllm-native", prof, **opts).make_cache(prof, worker=worker)
                theirs = drive(nat, reqs)
                old = drive(make_policy("vllm-like", prof).make_cache(prof), reqs)
                new = drive(make_policy("vllm", prof).make_cache(prof), reqs)
                o, t, d_old = compare(old, theirs)
                a, _, d_new = compare(new, theirs)
                tot += (len(reqs), t, o, d_old, a, d_new)
                differ += _listed(f"vllm {setting} {name} seed {seed}", new, theirs)
            print_row(
                [setting, name, tot[0], f"{tot[1]:,}", f"{tot[2]:,}", tot[3], f"{tot[4]:,}", tot[5]]
            )


def sglang_table(worker: Worker, seeds: int, differ: list[str]) -> None:
    print_head(["workload", "requests", "SGLang (native)", "sglang", "differ"])
    for name, gen in WORKLOADS.items():
        prof = profile(CAPACITY["sglang"].get(name, 400))
        tot = np.zeros(4, dtype=np.int64)
        for seed in range(seeds):
            reqs = gen(np.random.default_rng(seed), B)
            nat = make_policy("sglang-native", prof, **SGLANG).make_cache(prof, worker=worker)
            theirs = drive(nat, reqs)
            ours = drive(make_policy("sglang", prof, **SGLANG).make_cache(prof), reqs)
            a, t, d = compare(ours, theirs)
            tot += (len(reqs), t, a, d)
            differ += _listed(f"sglang {name} seed {seed}", ours, theirs)
        print_row([name, tot[0], f"{tot[1]:,}", f"{tot[2]:,}", tot[3]])


def _listed(what: str, ours: list[int], theirs: list[int]) -> list[str]:
    return [
        f"{what} request {i}: ours {a}, engine {b}"
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
        if a != b
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--engines", default="vllm,sglang")
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    bad = sorted(set(engines) - {"vllm", "sglang"})
    if bad:
        print(f"--engines: unknown {', '.join(bad)} (known: vllm, sglang)", file=sys.stderr)
        return 2
    differ: list[str] = []
    for engine in engines:
        try:
            worker = Worker.start(engine=engine)
        except NativeError as e:
            print(e, file=sys.stderr)
            return 1
        print(f"\n{worker._label} {worker.version} from {worker.found.python} ({worker.found.how})")
        try:
            (vllm_table if engine == "vllm" else sglang_table)(worker, args.seeds, differ)
        finally:
            worker.close()
    print(f"\n{len(differ)} differing requests" + (":" if differ else ""))
    for line in differ:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
