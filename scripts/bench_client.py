"""Benchmark the live client against a zero-delay stream server (the issue's speed targets).

The server is Debian's nginx serving a pre-rendered vLLM stream (200 one-token chunks, the
usage chunk, `[DONE]`) for every POST to /v1/completions, so it is never the bottleneck
(RECIPES.md). Server and client are pinned to different cores with `taskset`, each client
measurement runs in its own process on one core, and the script prints:

- ceiling: requests/s and streamed tokens/s at concurrency 256 with 1,000-token prompts, ours
  and `vllm bench serve`'s client (from `.venv-vllm` when installed; otherwise the reference
  figure recorded in RECIPES.md, labelled as not measured now), and the ratios (target ≥ 1.5×);
- 1,000 concurrent sessions held (every request answered);
- TTFT accuracy: p50/p99 TTFT at an offered load below both ceilings (target p99 ≤ 2 ms, as the
  server answers at once);
- big prompts: the longest event-loop stall while a 200K-token prompt is built and sent
  (target < 5 ms), beside the standard library's `json.dumps` of the same ids.

Usage: .venv/bin/python scripts/bench_client.py [--requests 4000] [--skip-peer]
       .venv/bin/python scripts/bench_client.py --ceiling   # sessions × client workers
         (scripts/client_ceiling.py: 1K and 10K sessions, 1/2/4 workers, beside vllm bench)
       .venv/bin/python scripts/bench_client.py --memory    # client state per full-size
         session (tracemalloc, 50 sessions x 3 turns) and CPU a turn, beside today's figure
nginx: installed with `apt-get install -y nginx` when missing and running as root.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PEER_PY = ROOT / ".venv-vllm" / "bin" / "python"
REFERENCE_PEER = {"rps": 460.0, "tok_s": 92_000.0, "source": "RECIPES.md (vLLM 0.32, one core)"}
PROMPT, OUTPUT = 1000, 200


# --- the server ------------------------------------------------------------------------------
def render_stream(n: int = OUTPUT) -> str:
    out = []
    for k in range(n):
        ch = {
            "index": 0,
            "text": "x",
            "logprobs": None,
            "stop_reason": None,
            "finish_reason": "length" if k == n - 1 else None,
            "token_ids": [1000 + k],
        }
        ev = {
            "id": "cmpl-b",
            "object": "text_completion",
            "created": 1,
            "model": "tiny",
            "choices": [ch],
        }
        out.append("data: " + json.dumps(ev, separators=(",", ":")) + "\n\n")
    usage = {
        "prompt_tokens": PROMPT,
        "completion_tokens": n,
        "total_tokens": PROMPT + n,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    ev = {
        "id": "cmpl-b",
        "object": "text_completion",
        "created": 1,
        "model": "tiny",
        "choices": [],
        "usage": usage,
    }
    out.append("data: " + json.dumps(ev, separators=(",", ":")) + "\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out)


def start_nginx(work: Path, port: int, core: int | None) -> subprocess.Popen[bytes]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        if os.geteuid() == 0:
            subprocess.run(
                ["apt-get", "install", "-y", "nginx"], check=False, stdout=subprocess.DEVNULL
            )
        if not Path(nginx).exists():
            sys.exit("bench_client: nginx is missing; install it with: apt-get install -y nginx")
    work.chmod(0o755)  # nginx's workers run as an unprivileged user and must read the body
    (work / "root" / "v1").mkdir(parents=True)
    (work / "root" / "v1" / "completions").write_text(render_stream())
    # GET /health answers 200 (a static file): the client's engine watch ends a run whose
    # engines all fail it for 30 s (replay.client.health), as every run past 30 s did here.
    (work / "root" / "health").write_text("")
    temps = " ".join(
        f"{k}_temp_path {work}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (work / "nginx.conf").write_text(
        f"worker_processes 1; pid {work}/nginx.pid; error_log {work}/error.log;\n"
        "events { worker_connections 16384; }\n"
        f"http {{ access_log off; {temps} client_max_body_size 64m; "
        "client_body_buffer_size 4m; keepalive_requests 100000000; keepalive_timeout 600s;\n"
        # A deep accept queue (the kernel caps it at net.core.somaxconn): 10K sessions
        # connect within seconds of each other.
        f"  server {{ listen 127.0.0.1:{port} backlog=16384; root {work}/root;\n"
        # A POST to a static file answers 405; the error page turns it into the file.
        "    location /v1/ { default_type text/event-stream; error_page 405 =200 $uri; } } }\n"
    )
    cmd = [nginx, "-c", str(work / "nginx.conf"), "-g", "daemon off;"]
    proc = subprocess.Popen(pin(cmd, core), stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc


def pin(cmd: list[str], core: int | None) -> list[str]:
    return (
        ["taskset", "-c", str(core), *cmd] if core is not None and shutil.which("taskset") else cmd
    )


# --- client workers (run in a pinned subprocess; print one JSON line) ------------------------
def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))


async def w_throughput(url: str, concurrency: int, requests: int) -> dict[str, Any]:
    from replay.engines.adapters import make_adapter

    a = make_adapter("vllm", url, "tiny")
    body = a.build_body(np.arange(1000, 1000 + PROMPT), OUTPUT)
    state = {"left": 0, "done": 0, "tokens": 0, "errors": 0}

    async def worker() -> None:
        while state["left"] > 0:
            state["left"] -= 1
            r = await a.generate(body)
            state["done"] += 1
            state["tokens"] += len(r.output_ids)
            state["errors"] += r.status != "ok" or len(r.output_ids) != OUTPUT

    state["left"] = min(concurrency, 500)  # warm the connection pool
    await asyncio.gather(*(worker() for _ in range(min(concurrency, 500))))
    state.update(left=requests, done=0, tokens=0, errors=0)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    dt = time.perf_counter() - t0
    await a.close()
    return {
        "rps": state["done"] / dt,
        "tok_s": state["tokens"] / dt,
        "errors": state["errors"],
        "requests": state["done"],
        "concurrency": concurrency,
    }


async def w_ttft(url: str, rate: float, seconds: float) -> dict[str, Any]:
    from replay.engines.adapters import StreamResult, make_adapter

    a = make_adapter("vllm", url, "tiny")
    body = a.build_body(np.arange(1000, 1000 + PROMPT), OUTPUT)
    await asyncio.gather(*(a.generate(body) for _ in range(64)))  # open connections
    rng = np.random.default_rng(0)
    gaps = rng.exponential(1.0 / rate, size=int(rate * seconds))
    from_send, from_sched, tasks = [], [], []
    errors: list[str] = []

    async def one(sched_ns: int) -> None:
        r = await a.generate(body, StreamResult())
        if r.status != "ok":
            errors.append(str(r.error))
        if r.first_token_ns is not None:
            from_send.append((r.first_token_ns - r.send_ns) / 1e6)
            from_sched.append((r.first_token_ns - sched_ns) / 1e6)

    t = time.perf_counter_ns()
    for g in gaps:  # open loop: arrivals never wait for answers
        t += int(g * 1e9)
        delay = (t - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(t)))
    await asyncio.gather(*tasks)
    await a.close()
    if not from_send:
        raise SystemExit(f"no request succeeded; first errors: {errors[:3]}")
    s, d = np.array(from_send), np.array(from_sched)
    floor = await idle_lateness(2.0)
    return {
        "idle_p99": floor,
        "rate": rate,
        "n": len(s),
        "send_p50": float(np.percentile(s, 50)),
        "send_p99": float(np.percentile(s, 99)),
        "sched_p50": float(np.percentile(d, 50)),
        "sched_p99": float(np.percentile(d, 99)),
    }


async def idle_lateness(seconds: float) -> float:
    """p99 of how late a 1 ms sleep wakes on an idle loop: the machine's own scheduling noise
    (other processes on this core), below which no client's TTFT can be measured."""
    late = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        await asyncio.sleep(0.001)
        late.append((time.perf_counter() - t0) * 1e3 - 1.0)
    return float(np.percentile(late, 99))


async def w_bigbody(url: str, tokens: int) -> dict[str, Any]:
    from replay.client.session import SessionPolicy
    from replay.engines.adapters import make_adapter
    from replay.prompts import PromptBuilder, TokenSpace
    from replay.traces.model import Trajectory

    bs = 64
    nb = -(-tokens // bs)
    tr = Trajectory(
        id="big",
        block_size=bs,
        hash_scope="local",
        namespace="big",
        t=np.zeros(1),
        input_tokens=np.array([tokens]),
        output_tokens=np.array([OUTPUT]),
        api_time=np.zeros(1),
        think_time=np.zeros(1),
        ttft=np.zeros(1),
        request_type=np.ones(1, dtype=np.int8),
        stop=np.zeros(1, dtype=np.int8),
        hash_offsets=np.array([0, nb]),
        hash_ids=np.arange(nb, dtype=np.int64),
    )
    a = make_adapter("vllm", url, "tiny")
    ids = np.random.default_rng(1).integers(300, 30000, size=tokens)
    t = time.perf_counter()
    a.build_body(ids, OUTPUT)
    orjson_ms = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    json.dumps({"model": "tiny", "prompt": ids.tolist(), "max_tokens": OUTPUT})
    stdlib_ms = (time.perf_counter() - t) * 1e3
    lags: list[float] = []
    busy: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:  # another session's timestamps: how late does a 1 ms tick fire?
        while not stop.is_set():
            t0, c0 = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - t0) * 1e3 - 1.0)
            # CPU the loop's thread spent in that tick: what our own code held it for, free of
            # the time other processes on this core took (wall lateness includes that).
            busy.append((time.thread_time() - c0) * 1e3)

    sys.setswitchinterval(0.001)  # as run_live does: the loop thread waits ≤ 1 ms for the GIL
    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.2)
    lags.clear()
    busy.clear()
    policy = SessionPolicy()
    for rep in range(3):  # as the session does: prompt in a worker thread, body, send
        ctx = PromptBuilder(TokenSpace(32000, rep)).context(tr)
        if tokens > policy.offload_tokens:
            prompt = await asyncio.to_thread(ctx.prompt, 0)
        else:
            prompt = ctx.prompt(0)
        body = a.build_body(prompt, OUTPUT)
        res = await a.generate(body)
        assert res.status == "ok", res.error
    await asyncio.sleep(0.05)
    stop.set()
    await tick
    await a.close()
    floor = await idle_lateness(1.0)
    return {
        "tokens": tokens,
        "orjson_build_ms": orjson_ms,
        "stdlib_json_ms": stdlib_ms,
        "max_loop_busy_ms": max(busy),
        "max_loop_lag_ms": max(lags),
        "idle_p99": floor,
    }


def run_worker(args: argparse.Namespace) -> None:
    raise_fd_limit()
    sys.path.insert(0, str(ROOT))
    if args.worker == "throughput":
        out = asyncio.run(w_throughput(args.url, args.concurrency, args.requests))
    elif args.worker == "ttft":
        out = asyncio.run(w_ttft(args.url, args.rate, args.seconds))
    elif args.worker == "noise":
        out = {"idle_p99": asyncio.run(idle_lateness(args.seconds))}
    else:
        out = asyncio.run(w_bigbody(args.url, args.tokens))
    print(json.dumps(out))


def worker(core: int | None, *extra: str, timeout: float = 600) -> dict[str, Any]:
    cmd = pin([sys.executable, str(Path(__file__).resolve()), *extra], core)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        err = "\n".join(ln for ln in p.stderr.splitlines() if "Handler object" not in ln)
        sys.exit(f"bench_client: worker {' '.join(extra)} failed:\n{err[:3000]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


# --- the peer: vllm bench serve --------------------------------------------------------------
PEER_MAIN = (
    "import argparse, sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = argparse.ArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n"
)


def peer(
    url: str,
    core: int | None,
    requests: int,
    work: Path,
    prompt: int = PROMPT,
    concurrency: int = 256,
) -> dict[str, Any] | None:
    if not PEER_PY.exists():
        return None
    tok = work / "tokenizer"
    tok.mkdir(exist_ok=True)
    make_tok = (
        "import sys, json\n"
        "from tokenizers import Tokenizer, models, pre_tokenizers\n"
        "vocab = {'[UNK]': 0, **{f'w{i}': i + 1 for i in range(31999)}}\n"
        "t = Tokenizer(models.WordLevel(vocab, unk_token='[UNK]'))\n"
        "t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()\n"
        "t.save(sys.argv[1] + '/tokenizer.json')\n"
        "json.dump({'tokenizer_class': 'PreTrainedTokenizerFast', 'unk_token': '[UNK]',"
        " 'model_max_length': 1000000}, open(sys.argv[1] + '/tokenizer_config.json', 'w'))\n"
    )
    subprocess.run([str(PEER_PY), "-c", make_tok, str(tok)], check=True)
    cmd = [
        str(PEER_PY),
        "-c",
        PEER_MAIN,
        "--backend",
        "openai",
        "--base-url",
        url,
        "--endpoint",
        "/v1/completions",
        "--model",
        "tiny",
        "--tokenizer",
        str(tok),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(prompt),
        "--random-output-len",
        str(OUTPUT),
        "--num-prompts",
        str(requests),
        "--max-concurrency",
        str(concurrency),
        "--percentile-metrics",
        "ttft",
        "--metric-percentiles",
        "50,99",
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--disable-tqdm",
    ]
    env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR")
    t0 = time.perf_counter()
    p = subprocess.run(pin(cmd, core), capture_output=True, text=True, timeout=1800, env=env)
    wall = time.perf_counter() - t0
    text = p.stdout + p.stderr

    def grab(label: str) -> float | None:
        m = re.search(re.escape(label) + r"\s*:?\s*([0-9.]+)", text)
        return float(m.group(1)) if m else None

    rps, tok_s = grab("Request throughput (req/s)"), grab("Output token throughput (tok/s)")
    ok = grab("Successful requests")
    if p.returncode != 0 or not rps or not tok_s or (ok is not None and ok < requests):
        print(f"peer run failed (exit {p.returncode}); its output ends with:\n{text[-1500:]}")
        return None
    return {
        "rps": rps,
        "tok_s": tok_s,
        "ttft_p50_ms": grab("Median TTFT (ms)") or grab("P50 TTFT (ms)"),
        "ttft_p99_ms": grab("P99 TTFT (ms)"),
        "requests": ok,
        "wall_s": wall,
        "source": "vllm bench serve, measured now",
    }


def full_size(args: argparse.Namespace) -> None:
    """`--full-size N`: one run of N full-size sessions against nginx, and its figures."""
    from client_ceiling import MEDIAN_PROMPT, full_size_run, raise_fd_limit

    raise_fd_limit()
    port = 18000 + os.getpid() % 2000
    seconds = args.ceiling_seconds
    with tempfile.TemporaryDirectory(prefix="bench-full-size-") as tmp:
        srv = start_nginx(Path(tmp), port, None)
        try:
            r = full_size_run(
                {"url": f"http://127.0.0.1:{port}", "sessions": args.full_size,
                 "workers": args.workers, "seconds": seconds, "ramp_s": seconds / 2,
                 "prompt_tokens": MEDIAN_PROMPT}
            )  # fmt: skip
        finally:
            srv.terminate()
            srv.wait(10)
    print(json.dumps(r))
    mb = r["peak_tree_rss_mb"]
    print(
        f"{r['sessions']:,} full-size sessions ({MEDIAN_PROMPT:,}-token prompts), "
        f"{r['workers']} workers, {seconds:g} s (ramp {seconds / 2:g} s): {r['status']}, "
        f"{r['rps']:.0f} requests/s measured, {r['errors']:,} errors, TTFT error p50 "
        f"{r['ttft_err_p50_ms'] or 0:.0f} ms; the client's peak memory {mb / 1024:.1f} GB "
        f"({mb / r['sessions']:.2f} MB a session, the processes' baseline included)"
    )


# --- main ----------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--worker", choices=["throughput", "ttft", "bigbody", "noise"], help=argparse.SUPPRESS
    )
    ap.add_argument("--url", default="")
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--tokens", type=int, default=200_000)
    ap.add_argument("--skip-peer", action="store_true", help="do not run vllm bench serve")
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="instead: the client's ceiling in sessions with 1, 2 and 4 worker processes "
        "(scripts/client_ceiling.py), beside vllm bench serve's client",
    )
    ap.add_argument(
        "--memory",
        action="store_true",
        help="instead: client memory per full-size session and CPU a turn to build it "
        "(scripts/client_ceiling.py memory_per_session), beside the figure before (1.78 MB)",
    )
    ap.add_argument(
        "--full-size",
        type=int,
        metavar="N",
        help="instead: N full-size sessions (105K-token prompts) against nginx for "
        "--ceiling-seconds (after a ramp of half of it) with --workers processes: requests/s, "
        "errors and the client's peak memory (issue 36: 10K from one machine)",
    )
    ap.add_argument("--workers", type=int, default=2, help="with --full-size (2)")
    ap.add_argument("--ceiling-seconds", type=float, default=20.0)
    ap.add_argument(
        "--ceiling-10k-prompt",
        type=int,
        default=10_000,
        help="prompt tokens at 10K sessions (full size needs ~0.5 MB of client state a "
        "session, --memory; bodies are sent in parts)",
    )
    args = ap.parse_args()
    if args.worker:
        run_worker(args)
        return
    if args.memory:
        from client_ceiling import memory_per_session, print_memory

        print_memory(memory_per_session())
        return
    if args.full_size:
        full_size(args)
        return
    if args.ceiling:
        from client_ceiling import ceiling_table

        ceiling_table(args, start_nginx, peer)
        return
    cores = os.cpu_count() or 1
    client_core, server_core = (0, 1) if cores >= 2 else (None, None)
    port = 18000 + os.getpid() % 2000
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="bench-client-") as tmp:
        work = Path(tmp)
        srv = start_nginx(work, port, server_core)
        try:
            print(f"nginx on core {server_core}, clients on core {client_core}; {url}")
            ours = worker(
                client_core,
                "--worker",
                "throughput",
                "--url",
                url,
                "--concurrency",
                "256",
                "--requests",
                str(args.requests),
            )
            held = worker(
                client_core,
                "--worker",
                "throughput",
                "--url",
                url,
                "--concurrency",
                "1000",
                "--requests",
                str(max(args.requests, 5000)),
            )
            theirs = None if args.skip_peer else peer(url, client_core, args.requests, work)
            ref = theirs or REFERENCE_PEER
            rate = 0.5 * min(ours["rps"], ref["rps"])
            acc = worker(
                client_core,
                "--worker",
                "ttft",
                "--url",
                url,
                "--rate",
                f"{rate:.1f}",
                "--seconds",
                "8",
            )
            # How often other processes take the server's core: nginx then answers a time
            # slice late, which every client measures as TTFT.
            server_noise = worker(server_core, "--worker", "noise", "--seconds", "3")
            big = worker(
                client_core, "--worker", "bigbody", "--url", url, "--tokens", str(args.tokens)
            )
        finally:
            srv.terminate()
            srv.wait(10)
    label = str(ref["source"]) + ("" if theirs else "; NOT measured now")
    print(f"\nceiling at concurrency 256 ({PROMPT}-token prompts, {OUTPUT} one-token chunks):")
    print(f"  ours : {ours['rps']:8.0f} req/s {ours['tok_s']:10.0f} tok/s  errors {ours['errors']}")
    print(f"  peer : {ref['rps']:8.0f} req/s {ref['tok_s']:10.0f} tok/s  ({label})")
    print(
        f"  ratio: {ours['rps'] / ref['rps']:8.2f}x req/s {ours['tok_s'] / ref['tok_s']:9.2f}x "
        "tok/s  (target >= 1.5x)"
    )
    print(
        f"1,000 concurrent sessions: {held['rps']:.0f} req/s, {held['requests']} requests, "
        f"errors {held['errors']}"
    )
    print(
        f"TTFT at {acc['rate']:.0f} req/s offered (open loop, {acc['n']} requests): "
        f"from send p50 {acc['send_p50']:.2f} ms p99 {acc['send_p99']:.2f} ms; "
        f"from schedule p50 {acc['sched_p50']:.2f} ms p99 {acc['sched_p99']:.2f} ms "
        "(target p99 <= 2 ms)"
    )
    print(
        f"  core noise (an idle 1 ms sleep's p99 lateness): client core {acc['idle_p99']:.2f} ms, "
        f"server core {server_noise['idle_p99']:.2f} ms; other processes on the server's core "
        "delay nginx's answer by a time slice, and every client measures that as TTFT"
    )
    print(
        f"{big['tokens']:,}-token prompt: body built in {big['orjson_build_ms']:.1f} ms "
        f"(stdlib json.dumps {big['stdlib_json_ms']:.1f} ms); while it was built and sent "
        f"the event loop's thread was busy at most {big['max_loop_busy_ms']:.2f} ms at a stretch "
        f"(target < 5 ms; wall lateness {big['max_loop_lag_ms']:.2f} ms, this core's idle "
        f"p99 noise {big['idle_p99']:.2f} ms)"
    )


if __name__ == "__main__":
    main()
