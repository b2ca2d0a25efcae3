"""Emulator figures: prefix hashing speed, one server's request and chunk throughput, and
(with --default) the embedded default run end to end, with its wall time and hit rates.

    .venv/bin/python scripts/bench_emulator.py            # hashing + server (≈20 s)
    .venv/bin/python scripts/bench_emulator.py --default  # + the embedded default (≈100 s)
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis.summary import summary_of_dir
from replay.emulator.config import EmulatorConfig
from replay.emulator.hashing import PrefixKeys
from replay.emulator.server import running_server
from replay.engines.adapters import make_adapter


def bench_hashing() -> None:
    ids = np.random.default_rng(0).integers(1000, 150_000, 200_000)
    PrefixKeys(ids, 64)  # warm the power tables
    t0 = time.perf_counter()
    n = 50
    for _ in range(n):
        PrefixKeys(ids, 64)
    dt = (time.perf_counter() - t0) / n
    print(f"hashing: 200K-token prompt in {dt * 1e3:.2f} ms ({200_000 / dt / 1e6:.0f}M tokens/s)")


async def _server_load(concurrency: int, requests: int, prompt: int, out: int) -> None:
    cfg = EmulatorConfig(engine="vllm", port=0, time_scale=1000.0, block_tokens=256)
    async with running_server(cfg) as (url, server):
        adapter = make_adapter("vllm", url, None)
        rng = np.random.default_rng(1)
        bodies = [adapter.build_body(rng.integers(1000, 100_000, prompt), out) for _ in range(64)]
        sem = asyncio.Semaphore(concurrency)
        chunks = 0

        async def one(i: int) -> None:
            nonlocal chunks
            async with sem:
                r = await adapter.generate(bodies[i % len(bodies)])
                assert r.status == "ok", r.error
                chunks += len(r.chunk_ns)

        cpu0 = time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(requests)))
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        await adapter.close()
        print(
            f"server (in-process with the client, one core): {requests / wall:.0f} requests/s, "
            f"{chunks / wall:.0f} chunks/s, {requests * out / wall:.0f} tokens/s at concurrency "
            f"{concurrency}, {prompt}-token prompts, {out} tokens each; CPU {cpu / wall:.0%}; "
            f"engine steps {server.core.counters.steps}"
        )


def bench_default() -> None:
    from replay.client.config import EngineSpec
    from replay.client.orchestrate import RunPlan, run_live
    from replay.emulator.defaults import load_default_run
    from replay.emulator.launch import start_emulators
    from replay.traces import load_trace, sample_path
    from replay.workload import WorkloadConfig

    d = load_default_run()
    t0 = time.perf_counter()
    trace = load_trace(sample_path())
    with tempfile.TemporaryDirectory() as tmp, start_emulators(d.emulator_configs()) as urls:
        started = time.perf_counter() - t0
        specs = [
            EngineSpec(name=e, kind=e, url=u, gpus=2, gpu_type="B200", vocab_size=151_552)
            for e, u in urls.items()
        ]
        wc = WorkloadConfig(
            sessions=d.sessions,
            duration_s=d.duration_min * 60,
            window=(d.window[0] * 60, d.window[1] * 60),
            seed=d.seed,
        )
        plan = RunPlan(
            engines=specs,
            trace=trace,
            workload=wc,
            out_dir=Path(tmp) / "run",
            time_scale=d.time_scale,
            clock_scale=d.time_scale,
            summarize=summary_of_dir,
        )
        outcome = asyncio.run(run_live(plan))
    wall = time.perf_counter() - t0
    print(
        f"embedded default: {d.sessions} sessions, {d.duration_min:g} min at time-scale "
        f"{d.time_scale:g}, token scale {d.emulator_configs()[0].token_scale:g}: {wall:.0f} s wall "
        f"(emulators up in {started:.1f} s), {outcome.records} records, status {outcome.status}"
    )
    for name, e in ((outcome.summary or {}).get("engines") or {}).items():
        print(
            f"  {name:<10} hit {e['hit_rate']:.3f} (ideal {e['ideal_hit_rate']:.3f})  "
            f"TTFT p50/p90 {e['ttft_p50']:.1f}/{e['ttft_p90']:.1f} s  "
            f"e2e p50 {e['e2e_p50']:.1f} s  out tok/min/GPU {e['output_tokens_per_min_per_gpu']:.0f}  "
            f"requests {e['requests']}"
        )
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"  largest emulator RSS {rss:.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--default", action="store_true", help="also run the embedded default")
    args = ap.parse_args()
    bench_hashing()
    asyncio.run(_server_load(concurrency=64, requests=2000, prompt=4000, out=50))
    if args.default:
        bench_default()


if __name__ == "__main__":
    main()
