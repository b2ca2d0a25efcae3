"""Experiment (issue 26): the routers side by side on a simulated fleet.

For each corpus × engine × replica count × router, `replay.sim.fleet.simulate_fleet` replays
the corpus with `sessions_per_replica × replicas` sessions on `replicas` copies of the
engine model (engine timing, the profile's step clock) behind the router, and prints one
Markdown row: hit rate, ideal hit rate, TTFT p50 / p90, the requests measured, the
placement misses per request (turns routed away from their history), the busiest replica's
share of requests ÷ the mean (imbalance, analysis.replicas) and whether the replicas were
saturated (a queue of at least one request on average per replica over the window, as
experiments/pressure_sweep.py defines it; `busy` is the busiest replica's stepped share of the
window).

    .venv/bin/python experiments/fleet_routers.py --corpus sample --replicas 8 \\
        --sessions-per-replica 32 --engines flashstate,vllm,sglang --json runs/fleet/sample8.jsonl

`--corpus sample` is the bundled sample (replay/data, token scale 16); any other value is a
trace path (e.g. ../shared/traces/kvct-dev.jsonl.gz). `--workers N` runs N points at once
in forked processes. Every row is appended to `--json` as it finishes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.manifest import Window
from analysis.replicas import replica_figures
from replay.fleet import router_names
from replay.sim.fleet import FleetConfig, simulate_fleet
from replay.sim.measures import shown
from replay.traces import load_trace, sample_path
from replay.traces.model import Trace
from replay.traces.scale import resolve_token_scale
from replay.workload import TIMED_WARMUP_S

_TRACE: Trace | None = None


def _point(cfg: FleetConfig) -> dict[str, Any]:
    assert _TRACE is not None
    t0 = time.perf_counter()
    res = simulate_fleet(_TRACE, cfg)
    s, e = res.summary, res.engine
    df = pd.DataFrame([r.as_dict() for r in res.records])
    df = df[~df["priming"].astype(bool)]
    fig = (replica_figures(df, Window(*cfg.window)) or {}).get("fleet", {})
    waiting = e.get("waiting_mean", 0.0) / cfg.replicas
    return {
        "engine": cfg.policy,
        "replicas": cfg.replicas,
        "sessions": cfg.sessions,
        "router": cfg.router + "".join(f" {k}={v}" for k, v in cfg.router_opts.items()),
        "requests": s["requests"],
        "hit_rate": s["hit_rate"],
        "ideal_hit_rate": s["ideal_hit_rate"],
        "ttft_p50_s": s.get("ttft_p50_s"),
        "ttft_p90_s": s.get("ttft_p90_s"),
        "placement_miss_per_request": s["placement_miss_per_request"],
        "redundant_prefill_per_request": s["redundant_prefill_per_request"],
        "imbalance": fig.get("imbalance"),
        "predicted_over_cached": fig.get("predicted_over_cached"),
        "branches": s.get("route_branches"),
        "waiting_per_replica": waiting,
        "busy_max": e.get("busy_share_max"),
        "saturated": waiting >= 1.0,
        "working_set_ratio": s["working_set_ratio"],
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def _row(r: dict[str, Any]) -> str:
    sat = "yes" if r["saturated"] else "no"
    imb = f"{r['imbalance']:.2f}" if r.get("imbalance") is not None else "–"
    return (
        f"| {r['engine']} | {r['replicas']} | {r['sessions']} | {r['router']} | {r['requests']:,} "
        f"| {shown(r['hit_rate'])} | {shown(r['ideal_hit_rate'])} | {shown(r['ttft_p50_s'], '.2f')} "
        f"| {shown(r['ttft_p90_s'], '.2f')} | {shown(r['placement_miss_per_request'], ',.0f')} | {imb} "
        f"| {r['busy_max']:.2f} | {sat} |"
    )


HEADER = (
    "| engine | replicas | sessions | router | requests | hit | ideal | TTFT p50 s | TTFT p90 s "
    "| placement miss/req | imbalance | busy max | saturated |\n"
    "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)


def main(argv: list[str] | None = None) -> int:
    global _TRACE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="sample", help="'sample' or a trace path")
    ap.add_argument("--engines", default="flashstate,vllm,sglang")
    ap.add_argument("--routers", default=",".join(router_names()))
    ap.add_argument("--replicas", default="8", help="comma list, e.g. 4,8")
    ap.add_argument("--sessions-per-replica", type=int, default=48)
    ap.add_argument("--duration-min", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument(
        "--router-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a router parameter (replay.fleet registry), e.g. queue_model=fcfs",
    )
    ap.add_argument("--json", type=Path, default=None, help="append each row here (JSON lines)")
    a = ap.parse_args(argv)
    routers = [r for r in a.routers.split(",") if r]
    bad = [r for r in routers if r not in router_names()]
    if bad:
        ap.error(f"--routers: unknown {', '.join(bad)} (choose from {', '.join(router_names())})")
    try:
        reps = [int(x) for x in a.replicas.split(",")]
    except ValueError:
        ap.error(f"--replicas: '{a.replicas}' is not a comma list of whole numbers")
    opts: dict[str, str] = {}
    for item in a.router_opt:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--router-opt: '{item}' is not KEY=VALUE")
        opts[key] = value
    _TRACE = load_trace(sample_path() if a.corpus == "sample" else a.corpus)
    scale = resolve_token_scale(_TRACE, None)
    dur = a.duration_min * 60.0
    configs = [
        FleetConfig(
            policy=eng,
            sessions=n * a.sessions_per_replica,
            seed=a.seed,
            timing="engine",
            duration_s=dur,
            window=(dur / 3, dur),
            token_scale=scale,
            warmup_s=TIMED_WARMUP_S,
            replicas=n,
            router=r,
            router_opts=opts,
        )
        for n in reps
        for eng in a.engines.split(",")
        for r in routers
    ]
    print(f"corpus {a.corpus} (token scale {scale:g}), {a.duration_min:g} min, window the last "
          f"two thirds, {a.sessions_per_replica} sessions per replica, seed {a.seed}")  # fmt: skip
    print(HEADER, flush=True)
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)

    def emit(row: dict[str, Any]) -> None:
        row["corpus"] = a.corpus
        print(_row(row), flush=True)
        if a.json is not None:
            with a.json.open("a") as fh:
                fh.write(json.dumps(row) + "\n")

    if a.workers <= 1:
        for cfg in configs:
            emit(_point(cfg))
        return 0
    with ProcessPoolExecutor(a.workers, mp_context=mp.get_context("fork")) as pool:
        for fut in as_completed([pool.submit(_point, c) for c in configs]):
            emit(fut.result())
    return 0


if __name__ == "__main__":
    sys.exit(main())
