"""The live client's ceiling in sessions (issue 26), for scripts/bench_client.py --ceiling.

`replay run`'s own executor (replay.client.orchestrate.run_live, with `workers` K client
processes) replays N concurrent sessions with full-size prompts against the zero-delay
nginx stream server of bench_client.py, closed loop (every tool gap 0: each session sends
its next turn the moment the last one ends), so the client is the bottleneck. Figures are
read from the run directory's records like any run's, over the run after its first
`ramp_s` seconds:

- requests/s and prompt tokens/s sent (the ceiling), output tokens/s streamed back;
- TTFT error: the server answers at once, so a request's recorded TTFT from its send
  (`first_token_s − sent_s`) is the client's own error; p50 and p99;
- schedule lateness: `sent_s − scheduled_s`, how far behind its schedule the client sends
  (at the ceiling this is the client's queue; below it, the client's timing error);
- errors and the parent's peak RSS with its workers'.

The trace is synthetic and in memory: `trajectories` conversations whose first prompt is
`prompt_tokens` long (default 105,126 tokens, the median request of the real corpus
../shared/traces/kvct-dev.jsonl.gz, measured here) growing by `step` tokens a turn (1% of
it by default; a session starts 25-75% into its conversation, so the mean prompt sent is
~10% above `prompt_tokens`; the table shows the mean), 200
output tokens a turn (the stream nginx serves). Sessions beyond `trajectories` replay them
again, each time as its own conversation (own token ids), so every body is full size and
distinct.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MEDIAN_PROMPT = 105_126  # kvct-dev median `in` over all 24,669 requests (measured here)
OUTPUT = 200  # bench_client.render_stream's 200 one-token chunks


def synthetic_trace(trajectories: int, prompt_tokens: int, step: int, turns: int) -> Any:
    from replay.traces.model import Trace, Trajectory

    bs = 64
    out = []
    for k in range(trajectories):
        inputs = [prompt_tokens + i * step for i in range(turns)]
        blocks = []
        for i, n in enumerate(inputs):
            nb = -(-n // bs)
            ids = [*range(nb - 1), 10_000_000 + i]  # a partial last block of its own
            blocks.append(np.asarray(ids, dtype=np.int64))
        offs = np.concatenate([[0], np.cumsum([len(b) for b in blocks])]).astype(np.int64)
        out.append(
            Trajectory(
                id=f"c{k}",
                block_size=bs,
                hash_scope="local",
                namespace=f"c{k}",
                t=np.zeros(turns),
                input_tokens=np.asarray(inputs, dtype=np.int64),
                output_tokens=np.full(turns, OUTPUT, dtype=np.int64),
                api_time=np.zeros(turns),
                think_time=np.zeros(turns),
                ttft=np.full(turns, np.nan),
                request_type=np.ones(turns, dtype=np.int8),
                stop=np.zeros(turns, dtype=np.int8),
                hash_offsets=offs,
                hash_ids=np.concatenate(blocks),
            )
        )
    return Trace(out, source="client-ceiling (synthetic)", format="weka", block_size=bs)


def _rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + kids) / 1024.0


async def _run(
    url: str, sessions: int, workers: int, seconds: float, out: Path, ramp_s: float, **kw: Any
) -> Any:
    from replay.client.config import EngineSpec
    from replay.client.orchestrate import RunPlan, run_live
    from replay.engines.preflight import PreflightReport
    from replay.workload import WorkloadConfig

    trace = synthetic_trace(kw["trajectories"], kw["prompt_tokens"], kw["step"], kw["turns"])
    wl = WorkloadConfig(
        sessions=sessions,
        duration_s=seconds,
        window=(0.0, seconds),
        gap_cap_s=0.0,
        # The sessions' first requests spread over the ramp (the replay rules' warm-up),
        # which is not measured: 10K connections opened at one instant overflow any
        # server's accept queue and time out connecting (seen here at 10K sessions).
        warmup_s=ramp_s,
    )
    plan = RunPlan(
        engines=[EngineSpec(name="null", kind="vllm", url=url)],
        trace=trace,
        workload=wl,
        out_dir=out,
        workers=workers,
        retries=0,
        scrape_interval_s=3600.0,
        parquet_interval_s=3600.0,
    )
    # nginx serves one stream for any POST and nothing else: no preflight to pass.
    report = PreflightReport(url=url, kind="vllm", model="tiny")
    return await run_live(plan, reports=[report])


def measure(
    url: str,
    sessions: int,
    workers: int,
    seconds: float = 20.0,
    ramp_s: float = 5.0,
    trajectories: int = 200,
    prompt_tokens: int = MEDIAN_PROMPT,
    step: int | None = None,
    turns: int = 20,
) -> dict[str, Any]:
    """One run of the harness's client against `url`; its figures (module docstring)."""
    from replay.rundir import read_requests

    step = prompt_tokens // 100 if step is None else step  # 1% growth a turn
    with tempfile.TemporaryDirectory(prefix="ceiling-") as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        outcome = asyncio.run(
            _run(url, sessions, workers, seconds, out, ramp_s, trajectories=trajectories,
                 prompt_tokens=prompt_tokens, step=step, turns=turns)
        )  # fmt: skip
        wall = time.perf_counter() - t0
        df = read_requests(out)
    span = seconds - ramp_s
    done = df[(df.first_token_s >= ramp_s) & (df.first_token_s < seconds)]
    ok = done[done.status == "ok"]
    ttft_ms = (ok.first_token_s - ok.sent_s).to_numpy() * 1e3
    late_ms = (ok.sent_s - ok.scheduled_s).to_numpy() * 1e3
    sent = df[df.sent_s.notna()]

    def pct(a: np.ndarray, q: float) -> float | None:
        return float(np.percentile(a, q)) if len(a) else None

    return {
        "sessions": sessions,
        "workers": workers,
        "status": outcome.status,
        "requests": len(ok),
        "rps": len(ok) / span,
        "prompt_tok_s": float(ok.prompt_tokens.sum()) / span,
        "output_tok_s": float(ok.output_tokens.sum()) / span,
        "ttft_err_p50_ms": pct(ttft_ms, 50),
        "ttft_err_p99_ms": pct(ttft_ms, 99),
        "late_p99_ms": pct(late_ms, 99),
        "errors": int((df.status.isin(["error", "timeout"])).sum()),
        "first_error": next(iter(df[df.status.isin(["error", "timeout"])].error.dropna()), None),
        "sessions_sent": int(sent.session.nunique()),
        "mean_prompt_tokens": float(ok.prompt_tokens.mean()) if len(ok) else None,
        "rss_mb": _rss_mb(),
        "wall_s": wall,
    }


def _one(args: dict[str, Any]) -> dict[str, Any]:
    """One measurement in its own process (fresh memory, its own peak RSS)."""
    import subprocess

    p = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if p.returncode != 0:
        sys.exit(f"client_ceiling: {args} failed:\n{p.stderr[-3000:]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def _tree_rss_mb(root: int) -> float:
    """The resident memory of process `root` and every process below it, from /proc."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    kb = 0
    for pid in tree:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    kb += int(line.split()[1])
    return kb / 1024.0


def full_size_run(args: dict[str, Any]) -> dict[str, Any]:
    """One measurement (`measure`'s arguments) in its own process, with the peak resident
    memory of that process and its workers together, sampled every second
    (`peak_tree_rss_mb`; ru_maxrss counts only the largest child)."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_mb(proc.pid))
        time.sleep(1.0)
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"client_ceiling: {args} failed:\n{err[-3000:]}")
    res = dict(json.loads(out.strip().splitlines()[-1]))
    res["peak_tree_rss_mb"] = peak
    return res


def ceiling_table(args: Any, start_nginx: Any, peer: Any) -> list[dict[str, Any]]:
    """Every measurement and the printed table. Ours: 1K sessions with full-size prompts
    and 10K sessions with --ceiling-10k-prompt tokens, each with 1, 2 and 4 workers, and 1K
    sessions at that smaller size with 1 worker beside the peer; vllm bench serve's client
    at concurrency 1K with the smaller prompts (it builds every prompt before it sends:
    ~1.3 s a full-size prompt here, so 1K full-size or 10K prompts do not fit a short run).
    nginx, the clients and the peer share the machine unpinned."""
    import os
    import subprocess

    raise_fd_limit()  # nginx and every client process inherit it
    load = os.getloadavg()
    port = 18000 + os.getpid() % 2000
    url = f"http://127.0.0.1:{port}"
    small = args.ceiling_10k_prompt
    grid = [(1000, MEDIAN_PROMPT, w) for w in (1, 2, 4)]
    grid += [(10_000, small, w) for w in (1, 2, 4)] + [(1000, small, 1)]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        srv = start_nginx(Path(tmp), port, None)
        try:
            for sessions, prompt, workers in grid:
                r = _one(
                    {"url": url, "sessions": sessions, "workers": workers,
                     "seconds": args.ceiling_seconds, "prompt_tokens": prompt}
                )  # fmt: skip
                r.update(client="replay run", prompt=prompt)
                rows.append(r)
                print(json.dumps(r), flush=True)
            if not args.skip_peer:
                work = Path(tmp) / "peer"
                work.mkdir()
                theirs = peer(url, None, 1000, work, prompt=small, concurrency=1000)
                row = {"client": "vllm bench serve", "sessions": 1000, "prompt": small,
                       "workers": 1, **(theirs or {"source": "failed"})}  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            srv.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                srv.wait(10)
    _print(rows, load)
    return rows


def _f(v: Any, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def _print(rows: list[dict[str, Any]], load: tuple[float, float, float]) -> None:
    import os

    print(
        f"\nclient ceiling against the null server (nginx, one stream for every request), "
        f"closed loop, {os.cpu_count()} cores shared with other work (load average "
        f"{load[0]:.1f} at the start): saturated by construction"
    )
    print(
        "| client | sessions | prompt tokens (mean sent) | workers | req/s | prompt Mtok/s "
        "| output tok/s "
        "| TTFT error p50 / p99 (ms) | send lateness p99 (ms) | errors | peak RSS (MB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        mtok = r["rps"] * r["prompt"] / 1e6 if "prompt_tok_s" not in r else r["prompt_tok_s"] / 1e6
        p50 = r.get("ttft_err_p50_ms", r.get("ttft_p50_ms"))
        p99 = r.get("ttft_err_p99_ms", r.get("ttft_p99_ms"))
        print(
            f"| {r['client']} | {r['sessions']:,} | {_f(r.get('mean_prompt_tokens', r['prompt']), ',.0f')} "
            f"| {r['workers']} "
            f"| {_f(r.get('rps'), '.1f')} | {_f(mtok if r.get('rps') else None, '.2f')} "
            f"| {_f(r.get('output_tok_s', r.get('tok_s')), ',.0f')} "
            f"| {_f(p50, ',.0f')} / {_f(p99, ',.0f')} | {_f(r.get('late_p99_ms'), ',.0f')} "
            f"| {r.get('errors', '—')} | {_f(r.get('rss_mb'), ',.0f')} |"
        )


def raise_fd_limit() -> None:
    """10K sessions hold 10K connections: the usual 1,024 open files are not enough (the
    workers inherit the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))


if __name__ == "__main__":  # one measurement in its own process: print its JSON line
    raise_fd_limit()
    args = json.loads(sys.argv[1])
    print(json.dumps(measure(**args)))


# --- memory per session (issue 36 point 7) -----------------------------------------------------
# Measured before the shared-buffer prompts (commit 4953df0, this container, tracemalloc):
# 1.78 MB a session, replay/prompts.py 1.14 MB (each context's last prompt as its own int32
# array, and every block of the namespace remembered as a numpy row in a dict) and
# replay/client/ideal.py 0.55 MB (every 256-token chunk's bytes copied into sets). The issue
# measured 2.3 MB with the process's RSS.
MEMORY_BEFORE_MB = 1.78


def memory_per_session(sessions: int = 50, turns: int = 3) -> dict[str, Any]:
    """Client state per full-size session: `sessions` conversations of the synthetic trace,
    `turns` turns each from turn 3 (as a ceiling session starts into its conversation), built
    the way EngineSessions builds them (prompt, ideal prefix, body, then the 200 generated
    ids), every context kept open. Bytes by tracemalloc after the last turn, per session and
    by file; CPU seconds of the same build (untraced, a second run)."""
    import gc
    import tracemalloc

    from replay.client.ideal import PrefixIndex
    from replay.engines.adapters.vllm import VllmAdapter
    from replay.prompts import PromptBuilder, TokenSpace

    first = 3
    tr = synthetic_trace(sessions, MEDIAN_PROMPT, MEDIAN_PROMPT // 100, first + turns)
    gen = np.arange(OUTPUT, dtype=np.int32) + 7
    adapter = VllmAdapter("http://127.0.0.1:9", "m")  # build_body only: nothing is sent

    def build(keep: list[Any]) -> int:
        builder = PromptBuilder(TokenSpace(151_000, 12345))
        index = PrefixIndex()
        body_bytes = 0
        for t in tr.trajectories:
            ctx = builder.context(t, t.namespace)
            keep.append(ctx)
            for i in range(first, first + turns):
                prompt = ctx.prompt(i)
                ctx.extends_previous(prompt)
                index.longest_prefix(prompt)
                body_bytes = max(body_bytes, len(adapter.build_body(prompt, OUTPUT)))
                ctx.completed(i, prompt, gen)
                index.insert(ctx.computed(prompt, gen))
        keep.append(index)
        keep.append(builder)
        return body_bytes

    gc.collect()
    t0 = time.process_time()
    build([])
    cpu = time.process_time() - t0
    gc.collect()
    tracemalloc.start()
    keep: list[Any] = []
    body = build(keep)
    gc.collect()
    cur, _peak = tracemalloc.get_traced_memory()
    snap = tracemalloc.take_snapshot()
    tracemalloc.stop()
    by_file = {
        Path(st.traceback[0].filename).relative_to(ROOT).as_posix()
        if Path(st.traceback[0].filename).is_relative_to(ROOT)
        else Path(st.traceback[0].filename).name: st.size / sessions / 1e6
        for st in snap.statistics("filename")[:4]
    }
    return {
        "sessions": sessions,
        "turns": turns,
        "mb_per_session": cur / sessions / 1e6,
        "by_file_mb": by_file,
        "cpu_s": cpu,
        "cpu_ms_per_turn": cpu / (sessions * turns) * 1e3,
        "body_mb": body / 1e6,
    }


def print_memory(res: dict[str, Any]) -> None:
    mb = res["mb_per_session"]
    print(
        f"client memory per full-size session ({res['sessions']} sessions x {res['turns']} "
        f"turns, {MEDIAN_PROMPT:,}-token prompts): {mb:.2f} MB (before: {MEMORY_BEFORE_MB} MB; "
        f"target <= 0.6 MB): 10K sessions {mb * 10:.1f} GB"
    )
    for f, v in res["by_file_mb"].items():
        if v >= 0.001:
            print(f"  {f}: {v:.3f} MB")
    print(
        f"  building them: {res['cpu_ms_per_turn']:.2f} ms of CPU a turn (prompt, ideal prefix, "
        f"body, generated ids); each request's body, {res['body_mb']:.2f} MB, lives while it "
        "is sent"
    )
