"""Experiment: the tight held-out case of issue 34 (point 2), our `sglang` against SGLang
0.5.22's own radix cache (`sglang-native`) request by request, one rule changed at a time
(docs/native-policies.md "The tight held-out case (issue 34)").

    .venv/bin/python experiments/sglang_tight_residue.py --native-run RUN_DIR
    .venv/bin/python experiments/sglang_tight_residue.py --timing trace --native-run RUN_DIR

The case: the held-out full-size synthesized corpus (`.corpus/synth-full-seed11.jsonl.gz`,
`replay traces synth --seed 11`; written on first use, about 1 minute), 8 sessions, 300
blocks, 30 minutes (window 10-30), seed 0 (`--seed`). SGLang's cache (page 1) takes minutes, so the
native side is read from a run directory of

    replay simulate --trace .corpus/synth-full-seed11.jsonl.gz --policies sglang-native \\
        --sessions 8 --capacity-blocks 300 --duration-min 30 --timing T --out OUT

(`--native-run OUT/sglang-native-s8-seed0`, same timing); without it, it is run here.

Printed: per variant, the window's hit rate, cached tokens (all requests) beside SGLang's,
the requests that differ and the first divergence (the first request, by SGLang's send time,
whose cached tokens or first-token time differ: under engine timing one admission at another
time moves every later request); then the first `--diff` differing requests of the shipped model
with what each side had. The variants change one thing in-process (no package edit):
- "KV in 256-token blocks": the profile's block is 256 tokens (the state grid G) instead
  of 4,352, with blocks, state size and capacity scaled to the same memory. Every state then
  lies on a block edge and a running request's reservation rounds up to 256 tokens, so the
  "KV counted in blocks" residue is (nearly) gone.
- "KV allocated per step" (engine timing only): the engine allocates a request's KV as its
  chunks and decode steps run, as SGLang does, not all at admission (`SimCache.can_grow`
  patched true, as experiments/sglang_demo_pressure.py's "per-step").
- "KV pool × 1.02": the pools' KV tokens 2% larger (what the blocks' rounding costs, docs).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from replay.profiles import load_profile
from replay.records import RequestRecord
from replay.sim.engine.cache import SimCache
from replay.sim.native.sglang_cache import pool_sizes
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.synth import SynthConfig, write_synth
from replay.workload import TIMED_WARMUP_S

HELD_OUT = Path(".corpus") / "synth-full-seed11.jsonl.gz"
KEY = ["session", "trajectory", "agent", "turn", "attempt"]
FINE = 256  # SGLang's state grid G for GLM-5.3-Flash (docs/native-policies.md, inputs table)


def _frame(records: list[RequestRecord]) -> pd.DataFrame:
    rows = [asdict(r) for r in records]
    return pd.DataFrame(rows)


def _ok(d: pd.DataFrame) -> pd.DataFrame:
    d = d[(d.status == "ok") & (~d.priming.astype(bool))].copy()
    d["cached_tokens"] = d.cached_tokens.fillna(0)
    return d


def _fine_profile(model: str, out: Path) -> tuple[str, int]:
    """A copy of the profile with 256-token blocks over the same memory; returns its path and
    the scale of a block count."""
    p = load_profile(model)
    k = p.block_tokens // FINE
    if p.block_tokens % FINE:
        raise SystemExit(f"block of {p.block_tokens} tokens is not a multiple of {FINE}")
    data = p.model_dump()
    data.update(
        block_tokens=FINE,
        blocks_per_engine=p.blocks_per_engine * k,
        checkpoint_blocks=p.checkpoint_blocks * k,
    )
    path = out / "fine.yaml"
    path.write_text(yaml.safe_dump({k2: v for k2, v in data.items() if v is not None}))
    return str(path), k


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trace", help=f"a trace file (default: {HELD_OUT})")
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--blocks", type=int, default=300)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--timing", choices=["engine", "trace"], default="engine")
    ap.add_argument("--seed", type=int, default=0, help="workload seed (0)")
    ap.add_argument("--native-run", help="a run directory of sglang-native (same case)")
    ap.add_argument("--diff", type=int, default=12, help="differing requests to list")
    args = ap.parse_args(argv)
    for flag, value in (("--sessions", args.sessions), ("--blocks", args.blocks)):
        if value < 1:
            print(f"{flag} {value}: must be at least 1", file=sys.stderr)
            return 2
    if args.minutes <= 0:
        print(f"--minutes {args.minutes:g}: must be positive", file=sys.stderr)
        return 2
    if args.native_run and not (Path(args.native_run) / "requests.parquet").exists():
        print(
            f"--native-run {args.native_run}: no requests.parquet there; give a run directory "
            "of `replay simulate --policies sglang-native` (e.g. OUT/sglang-native-s8-seed0)",
            file=sys.stderr,
        )
        return 2
    bad = _mismatch(Path(args.native_run), args) if args.native_run else ""
    if bad:
        print(f"--native-run {args.native_run}: {bad}", file=sys.stderr)
        return 2
    path = Path(args.trace) if args.trace else HELD_OUT
    if args.trace is None and not path.exists():
        print(f"writing {path} (full-size synthesized corpus, seed 11)", flush=True)
        path.parent.mkdir(exist_ok=True)
        write_synth(path, SynthConfig(seed=11))
    if not path.exists():
        print(f"--trace {path}: no such file", file=sys.stderr)
        return 2
    trace = load_trace(path)
    d = args.minutes * 60.0
    warmup = TIMED_WARMUP_S if args.timing == "engine" else 0.0  # as `replay simulate`
    base = dict(
        sessions=args.sessions,
        timing=args.timing,
        duration_s=d,
        window=(d / 3, d),
        warmup_s=warmup,
        seed=args.seed,
    )

    def run(policy: str, **kw: Any) -> tuple[float, pd.DataFrame]:
        cfg = SimConfig(policy=policy, **{**base, "capacity_blocks": args.blocks, **kw})
        res = simulate(trace, cfg)
        return res.summary["hit_rate"], _ok(_frame(res.records))

    if args.native_run:
        run_dir = Path(args.native_run)
        native = _ok(pd.read_parquet(run_dir / "requests.parquet"))
        summary = json.loads((run_dir / "summary.json").read_text())
        native_hit = summary["engines"]["sglang-native"]["hit_rate"]
    else:
        native_hit, native = run("sglang-native")
    total = native.cached_tokens.sum()
    print(
        f"{path}, {args.sessions} sessions, {args.blocks} blocks, {args.minutes:g} min, "
        f"{args.timing} timing, seed {args.seed}"
    )
    print()
    print(
        "| variant | hit rate (window) | cached tokens, of SGLang's | requests that differ "
        "| first divergence |"
    )
    print("|---|---|---|---|---|")
    print(f"| sglang-native | {native_hit:.1%} | {total / 1e6:,.2f}M | – | – |")
    with tempfile.TemporaryDirectory() as tmp:
        fine, k = _fine_profile(SimConfig(policy="sglang", sessions=1).model, Path(tmp))
        p = load_profile(SimConfig(policy="sglang", sessions=1).model)
        kv, slots = pool_sizes(args.blocks, p.block_tokens, p.checkpoint_blocks, 0.9, None)
        variants: dict[str, dict[str, Any]] = {
            "sglang (shipped)": {},
            f"KV in {FINE}-token blocks": {"model": fine, "capacity_blocks": args.blocks * k},
            "KV allocated per step": {"_per_step": True},
            "KV pool × 1.02": {
                "policy_opts": {"kv_tokens": int(kv * 1.02), "state_slots": slots},
                "capacity_blocks": None,
            },
        }
        shipped: pd.DataFrame | None = None
        for label, kw in variants.items():
            per_step = kw.pop("_per_step", False)
            if per_step and args.timing != "engine":
                continue  # the allocation rule belongs to the engine's clock
            old_grow = SimCache.can_grow
            if per_step:  # as experiments/sglang_demo_pressure.py's "per-step"
                SimCache.can_grow = property(lambda _: True)  # type: ignore[method-assign,assignment]
            try:
                hit, ours = run("sglang", **kw)
            finally:
                SimCache.can_grow = old_grow  # type: ignore[method-assign]
            m = ours.merge(native, on=KEY, suffixes=("", "_n"))
            differ = int((m.cached_tokens != m.cached_tokens_n).sum())
            ratio = ours.cached_tokens.sum() / total if total else 0.0
            print(
                f"| {label} | {hit:.1%} | {ratio:.3f}× | {differ} of {len(native):,} | "
                f"{_first_divergence(m)} |"
            )
            if shipped is None:
                shipped = m
    assert shipped is not None
    _print_diff(shipped, args.diff)
    return 0


def _mismatch(run_dir: Path, args: argparse.Namespace) -> str:
    """What of the native run's manifest differs from this case ('' when nothing)."""
    manifest = run_dir / "manifest.json"
    cfg = json.loads(manifest.read_text()).get("config", {}) if manifest.exists() else {}
    want = {
        "policy": "sglang-native",
        "sessions": args.sessions,
        "capacity_blocks": args.blocks,
        "duration_s": args.minutes * 60.0,
        "timing": args.timing,
        "seed": args.seed,
    }
    for key, value in want.items():
        if cfg.get(key) != value:
            return (
                f"its {key} is {cfg.get(key)!r}, this case's {value!r}: rerun it or pass the flags"
            )
    return ""


def _first_divergence(m: pd.DataFrame) -> str:
    """The first request, by SGLang's send time, whose cached tokens or first-token time
    (more than 1 ms apart) differ: 'cached' or 'timing' at SGLang's send second."""
    cached = m.cached_tokens != m.cached_tokens_n
    timing = (m.first_token_s - m.first_token_s_n).abs() > 1e-3
    d = m[cached | timing].sort_values("sent_s_n")
    if d.empty:
        return "none"
    r = d.iloc[0]
    what = "cached" if r.cached_tokens != r.cached_tokens_n else "timing"
    return f"{what}, {r.sent_s_n:.0f} s"


def _print_diff(m: pd.DataFrame, n: int) -> None:
    d = m[m.cached_tokens != m.cached_tokens_n].sort_values("sent_s_n").head(n)
    print()
    print("First differing requests (shipped model against SGLang's code), by SGLang's send time:")
    print()
    print(
        "| sent s (ours / SGLang) | session | trajectory | turn | prompt "
        "| cached, ours | cached, SGLang |"
    )
    print("|---|---|---|---|---|---|---|")
    rows: list[dict[Any, Any]] = d.to_dict("records")
    for r in rows:
        print(
            f"| {r['sent_s']:.1f} / {r['sent_s_n']:.1f} | {r['session']} | {r['trajectory']} "
            f"| {r['turn']} | {int(r['prompt_tokens']):,} | {int(r['cached_tokens']):,} "
            f"| {int(r['cached_tokens_n']):,} |"
        )


if __name__ == "__main__":
    sys.exit(main())
