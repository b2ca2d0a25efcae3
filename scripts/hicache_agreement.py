"""Per-request agreement of our host tier's "tree" rule (replay/sim/cache/tiers.py: the `sglang`
policy's cache with a two-pool host tier) with SGLang 0.5.22's own HiCache (its radix cache
with a host KV pool and a host Mamba pool, replay/sim/native/hicache_oracle.py and
sglang_host_worker.py): the same requests one after another, and per request the prefix
tokens each found on the GPU and in host memory. One Markdown table per corpus, then each
case's first differing request.

Each case is also run with no host tier on either side (`--hicache-ratio 0`, the model
without a tier) so a difference the GPU tier already has is told apart from one the host
tier adds: the "GPU only" column.

Synthetic: `conversations` (4 conversations taking turns) and replay.sim.native.crosscheck's
workloads, 16-token blocks, two-block states, SGLang's grid, track interval and chunk 16, 16
and 64 tokens (as the GPU tier's oracle). Trace (`--trace`, e.g. kvct-dev): the first
`--sessions` top-level sessions, their first `--turns` requests each, taking turns (a, b, c,
a, b, c, ...), each request continuing its lineage predecessor as the simulator links them
(replay.traces.lineage, replay.sim.driver.shared_with); the trace's 64-token blocks, SGLang's
own grid, track interval and chunk (256, 256, 16,384). Needs the SGLang environment
(`bash scripts/setup_vllm_cpu.sh --with-sglang`).

    .venv/bin/python scripts/hicache_agreement.py [--seeds 2] [--trace PATH --sessions 4]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from replay.sim.driver import shared_with
from replay.sim.native.agreement_table import print_firsts, print_head, print_row
from replay.sim.native.crosscheck import WORKLOADS
from replay.sim.native.hicache_oracle import ENGINE, TRACE_OPTS, Setup, run_engine, run_model
from replay.sim.native.host_oracle import B, Req, Turn, agreement, conversations
from replay.sim.native.worker import NativeError, Worker
from replay.traces.lineage import Lineage
from replay.traces.loader import TraceError, load_trace

# (GPU blocks, --hicache-ratio): a host 4x and 2x the device pools, about their size, half.
SYNTH_CASES = [(60, 4.0), (60, 2.0), (60, 1.0), (60, 0.5), (40, 2.0)]
# The trace: a GPU cache that holds about two sessions' prompts (its KV pool 270K tokens).
TRACE_CASES = [(8000, 4.0), (8000, 2.0), (8000, 1.0)]

WHY = """
"host tier": the first request that differs only with a host tier; "also without host": the
GPU tier's own residue (the same request differs with no host tier)."""

Gen = Callable[[np.random.Generator], Sequence[Req]]


def synthetic() -> dict[str, Gen]:
    out: dict[str, Gen] = {"conversations": conversations}
    for name, gen in WORKLOADS.items():
        out[name] = (lambda g: lambda rng: g(rng, B))(gen)
    return out


def trace_requests(path: str, sessions: int, turns: int) -> list[Turn]:
    """The trace's first `sessions` top-level sessions, `turns` requests each, taking turns;
    each request continues its lineage predecessor (in its session) as the simulator does."""
    trace = load_trace(path)
    trs = trace.trajectories[:sessions]
    out: list[Turn] = []
    where: dict[tuple[int, int], int] = {}  # (session, request) -> index in out
    for i in range(turns):
        for s, tr in enumerate(trs):
            if i >= tr.num_requests:
                continue
            j, m = Lineage(tr).predecessor(i)
            parent = where.get((s, j), -1) if j >= 0 else -1
            prev = None
            if parent >= 0:
                p = out[parent]
                prev = SimpleNamespace(n=p.n, out=p.out, trajectory=tr, index=j)
            shared = shared_with(prev, tr, i, m) if prev is not None else 0  # type: ignore[arg-type]
            where[(s, i)] = len(out)
            out.append(Turn(int(tr.input_tokens[i]), int(tr.output_tokens[i]), parent, shared))
    return out


def _head() -> None:
    head = [
        "GPU blocks", "host (KV tokens / state slots)", "workload", "requests",
        "GPU-hit tokens (ours / SGLang)", "host-hit tokens (ours / SGLang)", "agree",
        "GPU only: agree",
    ]  # fmt: skip
    print_head(head)


def _case(
    worker: Worker,
    setup: Setup,
    name: str,
    runs: list[tuple[int, Sequence[Req]]],
    firsts: list[str],
) -> list[int]:
    """One table row over `runs` (seed, requests): totals, and the first difference each."""
    n = agree = base = 0
    gpu, host = [0, 0], [0, 0]
    pools = (0, 0)
    for seed, reqs in runs:
        theirs, pools = run_engine(worker, reqs, setup)
        a = agreement(run_model(reqs, setup, pools), theirs)
        b = agreement(run_model(reqs, setup, (0, 0)), run_engine(worker, reqs, setup.bare())[0])
        n += a["requests"]
        agree += a["requests"] - len(a["differ"])
        base += b["requests"] - len(b["differ"])
        for k in (0, 1):
            gpu[k] += a["gpu"][k]
            host[k] += a["host"][k]
        if a["differ"]:
            i, ours, th = a["differ"][0]
            gpu_first = b["differ"][0][0] if b["differ"] else len(reqs)
            tag = "also without host" if gpu_first <= i else "host tier"
            firsts.append(
                f"- {setup.capacity} blocks, ratio {setup.ratio:g}, {name}, seed {seed}: "
                f"{len(a['differ'])} differ, first request {i}: ours GPU {ours.gpu} + host "
                f"{ours.host}, SGLang GPU {th.gpu} + host {th.host} ({tag})"
            )
    print_row([
        setup.capacity, f"{pools[0]:,} / {pools[1]:,}", name, n, f"{gpu[0]:,} / {gpu[1]:,}",
        f"{host[0]:,} / {host[1]:,}", f"{100 * agree / n:.1f}%", f"{100 * base / n:.1f}%",
    ])  # fmt: skip
    return [n, agree, base]


def _check(args: argparse.Namespace) -> str | None:
    """The first bad argument, as a one-line message naming the flag (None: all good)."""
    for flag, v in (
        ("--seeds", args.seeds),
        ("--sessions", args.sessions),
        ("--turns", args.turns),
    ):
        if v < 1:
            return f"{flag} {v}: expected at least 1"
    if args.trace and not Path(args.trace).is_file():
        return f"--trace {args.trace}: no such file (e.g. ../shared/traces/kvct-dev.jsonl.gz)"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per synthetic workload")
    ap.add_argument("--trace", help="a trace file (e.g. kvct-dev.jsonl.gz); none: synthetic only")
    ap.add_argument("--sessions", type=int, default=4, help="the trace's sessions")
    ap.add_argument("--turns", type=int, default=12, help="requests per session")
    ap.add_argument("--python", help="the interpreter with SGLang 0.5.22 (default: as found)")
    args = ap.parse_args(argv)
    bad = _check(args)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    try:
        worker = Worker.start(args.python, engine=ENGINE)
    except NativeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    firsts: list[str] = []
    total = np.zeros(3, dtype=np.int64)
    try:
        print(f"SGLang {worker.version} (HiCache), synthetic workloads\n")
        _head()
        for cap, ratio in SYNTH_CASES:
            for name, gen in synthetic().items():
                runs = [(s, gen(np.random.default_rng(s))) for s in range(args.seeds)]
                total += _case(worker, Setup(cap, ratio), name, runs, firsts)
        if args.trace:
            reqs = trace_requests(args.trace, args.sessions, args.turns)
            label = f"trace, {args.sessions} sessions x {args.turns}"
            print(f"\n{args.trace}: {len(reqs)} requests\n")
            _head()
            for cap, ratio in TRACE_CASES:
                setup = Setup(cap, ratio, 64, TRACE_OPTS)
                total += _case(worker, setup, label, [(0, reqs)], firsts)
    except (NativeError, RuntimeError, TraceError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        worker.close()
    n, agree, base = (int(x) for x in total)
    print(f"\nAll: {n} requests, {100 * agree / n:.1f}% agree (GPU only: {100 * base / n:.1f}%)")
    print_firsts(firsts, "GPU-hit + host-hit tokens", WHY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
