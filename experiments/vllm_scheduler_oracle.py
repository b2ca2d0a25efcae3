"""Oracle: vLLM 0.32's own v1 Scheduler, stepped on our step clock, beside our engine model.

Issue 22: does vLLM's own scheduler + cache collapse at the demo's load the way our engine
model does? `replay.sim.native.sched_oracle` runs vLLM's real `Scheduler` (a worker in
`.venv-vllm`, replay/sim/native/vllm_sched_worker.py) where `EngineCore` stands, driven by
the simulator's sessions on the virtual clock; our engine model (policy `vllm`) runs through
the same wiring. docs/engine-model.md, "vLLM's own scheduler as the oracle", has the results.

    .venv/bin/python experiments/vllm_scheduler_oracle.py --sessions 48 --seeds 0,1
    .venv/bin/python experiments/vllm_scheduler_oracle.py --sessions 8 --duration 300 --json out.json
    .venv/bin/python experiments/vllm_scheduler_oracle.py --seeds 0 \
        --model-opts prefill_state_stamp=write,pin_resumed_state=false

Prints, per seed, the summary of the oracle and of our model (hit rate over the window as
the simulator's summary measures it, the oracle's KV-only hit, TTFT p50, E2E mean,
preemptions), then a per-minute series of both (hit and KV hit of the requests admitted that
minute, running, waiting, blocks held, preemptions, ms per real step: a scaled step stands
for `token_scale` real ones). Experiments, each a departure from the demo's setting and
labelled so: `--capacity` (blocks, both engines), `--retention none` (the oracle keeps every
Mamba state), `--model-opts` (our model's policy options and rule switches).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from replay.profiles import DEFAULT_MODEL, ProfileError, load_profile
from replay.sim.measures import shown
from replay.sim.native.sched_oracle import replay
from replay.sim.native.worker import NativeError
from replay.sim.runner import SimConfig
from replay.traces import load_trace, sample_path
from replay.traces.scale import resolve_token_scale
from replay.workload import TIMED_WARMUP_S


def _ints(text: str, flag: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"{flag}: expected comma-separated integers, got '{text}'") from None
    if not out:
        raise SystemExit(f"{flag}: expected at least one integer, got '{text}'")
    return out


def parse_opts(text: str) -> dict[str, Any]:
    """`NAME=VALUE,...` → the model's policy options (true/false as booleans)."""
    opts: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--model-opts: '{item}': expected NAME=VALUE")
        opts[key] = {"true": True, "false": False}.get(value.lower(), value)
    return opts


def _fmt(x: float, spec: str) -> str:
    return "—" if x != x else format(x, spec)


def print_sweep(sweep: list[tuple[int, int, dict[str, dict[str, Any]]]]) -> None:
    labels = list(sweep[0][2])
    print("\n### all runs: hit / TTFT p50 (s) / preemptions\n")
    print("| sessions | seed | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for sessions, seed, runs in sweep:
        cells = []
        for lab in labels:
            s = runs[lab]["summary"]
            cells.append(
                f"{shown(s['hit_rate'], '.3f')} / {shown(s['ttft_p50_s'], '.1f')} / "
                f"{s['preemptions']}"
            )
        print(f"| {sessions} | {seed} | " + " | ".join(cells) + " |")


def print_run(
    sessions: int, seed: int, runs: dict[str, dict[str, Any]], series: bool = True
) -> None:
    print(f"\n### {sessions} sessions, seed {seed}\n")
    print(
        "| engine | hit | KV hit | TTFT p50 (s) | E2E mean (s) | preemptions | requests "
        "| wall (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, r in runs.items():
        s = r["summary"]
        print(
            f"| {label} | {shown(s['hit_rate'], '.3f')} | {_fmt(s['kv_hit_rate'], '.3f')} | "
            f"{shown(s.get('ttft_p50_s', float('nan')), '.1f')} | "
            f"{shown(s.get('latency_mean_s', float('nan')), '.1f')} | {s['preemptions']} | "
            f"{s['requests']} | {s['wall_seconds']:.1f} |"
        )
    if not series:
        return
    labels = list(runs)
    print(
        "\nper minute: hit and KV hit (of the requests admitted) / running / waiting / "
        "blocks held / preemptions / ms per real step / Mamba state blocks evicted and their "
        "mean seconds in the free queue (the oracle's)"
    )
    head = " | ".join(f"{lab}: hit kv run wait held pre ms ev age" for lab in labels)
    print(f"|  t (s) | {head} |")
    print("|---|" + "---|" * len(labels))
    by_minute = [{int(m["t"]): m for m in runs[lab]["minutes"]} for lab in labels]
    for t in sorted(set().union(*by_minute)):
        cells = []
        for ser in by_minute:
            m = ser.get(t)
            if m is None:
                cells.append("—")
                continue
            cells.append(
                f"{_fmt(m['hit'], '.2f')} {_fmt(m['kv_hit'], '.2f')} {m['running']:.1f} "
                f"{m['waiting']:.1f} "
                f"{m['held']:.0f} {m['preempted']} {m['ms_per_real_step']:.0f} "
                f"{_fmt(m['state_evicted'], '.0f')} {_fmt(m['state_age_s'], '.0f')}"
            )
        print(f"| {t:5d} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default=None, help="trace file (default: the bundled sample)")
    ap.add_argument("--sessions", default="48", help="comma-separated session counts")
    ap.add_argument("--seeds", default="0,1", help="comma-separated seeds")
    ap.add_argument("--subagents", default="inline", choices=("inline", "concurrent", "skip"))
    ap.add_argument("--duration", type=float, default=None, help="seconds of model time")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--python", default=None, help="interpreter with vLLM (default: .venv-vllm)")
    ap.add_argument("--no-model", action="store_true", help="run only the oracle")
    ap.add_argument(
        "--model-opts",
        action="append",
        default=[],
        help="also run our model with these policy options and rule switches, "
        "NAME=VALUE,... (experiment; repeatable), e.g. "
        "prefill_state_stamp=write,pin_resumed_state=false",
    )
    ap.add_argument("--no-series", action="store_true", help="skip the per-minute series")
    ap.add_argument(
        "--capacity", type=int, default=None, help="cache blocks (experiment; default 2,531)"
    )
    ap.add_argument(
        "--retention",
        default="0",
        help="the oracle's prefix_cache_retention_interval: 0 as a server resolves it, "
        "'none' keeps every state (experiment)",
    )
    ap.add_argument("--json", default=None, help="write every run's summary and series here")
    args = ap.parse_args(argv)
    try:
        profile = load_profile(args.model)
    except ProfileError as e:
        raise SystemExit(f"--model: {e}") from None
    if args.json and not Path(args.json).parent.is_dir():
        raise SystemExit(f"--json: the folder of {args.json} does not exist")
    counts = _ints(args.sessions, "--sessions")
    if min(counts) <= 0:
        raise SystemExit(f"--sessions: must be positive, got {args.sessions}")
    seeds = _ints(args.seeds, "--seeds")
    variants: dict[str, dict[str, Any]] = {} if args.no_model else {"": {}}
    for text in args.model_opts:
        opts = parse_opts(text)
        from replay.sim.cache.policies import make_policy

        try:
            make_policy("vllm", profile, **opts)
        except ValueError as e:
            raise SystemExit(f"--model-opts: {e}") from None
        variants[text] = opts
    if args.capacity is not None and args.capacity <= 0:
        raise SystemExit(f"--capacity: must be positive, got {args.capacity}")
    retention: int | None
    if args.retention.lower() == "none":
        retention = None
    else:
        try:
            retention = int(args.retention)
        except ValueError:
            raise SystemExit(
                f"--retention: expected an integer or 'none', got '{args.retention}'"
            ) from None
    path = Path(args.trace) if args.trace else sample_path()
    if not path.is_file():
        raise SystemExit(f"--trace: {path} does not exist")
    trace = load_trace(path)
    scale = resolve_token_scale(trace, None)
    extra: dict[str, Any] = {}
    if args.duration is not None:
        if not args.duration > 0:
            raise SystemExit(f"--duration: must be positive, got {args.duration:g}")
        # the window: the last two thirds, as the default run's minutes 15-45 of 45
        extra = {"duration_s": args.duration, "window": (args.duration / 3, args.duration)}
    out: dict[str, Any] = {"trace": str(path), "token_scale": scale, "runs": []}
    sweep: list[tuple[int, int, dict[str, dict[str, Any]]]] = []
    for sessions, seed in ((n, s) for n in counts for s in seeds):
        cfg = SimConfig(
            policy="vllm",
            sessions=sessions,
            seed=seed,
            model=args.model,
            timing="engine",
            subagents=args.subagents,
            warmup_s=TIMED_WARMUP_S,
            token_scale=scale,
            capacity_blocks=args.capacity,
            **extra,
        )
        runs: dict[str, dict[str, Any]] = {}
        try:
            runs["vLLM scheduler (oracle)"] = replay(
                trace, cfg, oracle=True, python=args.python, retention=retention
            )
        except NativeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        for text, opts in variants.items():
            label = "our engine model (vllm" + (f", {text})" if text else ")")
            runs[label] = replay(trace, replace(cfg, policy_opts=opts), oracle=False)
        print_run(sessions, seed, runs, series=not args.no_series)
        sweep.append((sessions, seed, runs))
        out["runs"].append(
            {
                "sessions": sessions,
                "seed": seed,
                **{k: {**v, "records": None} for k, v in runs.items()},
            }
        )
    if len(sweep) > 1:
        print_sweep(sweep)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
