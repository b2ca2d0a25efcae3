"""The embedded default's panel beside the demo's, with ratios.

    python scripts/bench_default.py                 # runs `python -m replay run` (the default)
    python scripts/bench_default.py --run-dir DIR   # an existing run of it
    python scripts/bench_default.py --sim           # `replay simulate --timing engine` instead
                                                    # (same engine model, virtual clock, seconds)
    python scripts/bench_default.py --sim --capacity-blocks 5062 --token-scale 11.4
                                                    # what-ifs (docs/embedded-default.md)
    python scripts/bench_default.py --trace ../shared/traces/kvct-dev.jsonl.gz [--sim]
                                                    # the same panel on another corpus

The demo's figures: the seed document's panel (48 Claude Code agents on GLM-5.3-Flash, two
B200s per engine, minutes 15-45 of a 45-minute replay). Output tokens per minute are per
engine, TTFT and end-to-end latency in modelled seconds. Prints figures and ratios; asserts
nothing (speed and fidelity targets are read here, not in timed tests).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENGINES = ("flashstate", "vllm", "sglang")
# metric: (label, demo values per engine) — seed document, "The post: 2×, 3.7×, 2.5×".
DEMO: dict[str, tuple[str, tuple[float | None, ...]]] = {
    "output_tokens_per_min": ("output tok/min (engine)", (61.7e3, 22.0e3, 15.4e3)),
    "hit_rate": ("cache hit rate", (0.87, 0.30, 0.06)),
    "ttft_p50": ("TTFT p50 (s)", (0.2, 3.3, 56.3)),
    "ttft_p90": ("TTFT p90 (s)", (2.1, 24.5, 69.3)),
    "e2e_p50": ("E2E p50 (s)", (12.4, 46.1, None)),
    "e2e_mean": ("E2E mean (s)", (27.8, 88.6, 129.6)),
    "trajectories_finished": ("agents finished", (20, 7, 8)),
    "prefill_tokens_per_min_per_gpu": ("prefill tok/min/GPU", (4.74e6, 1.54e6, 1.29e6)),
}


def live(run_dir: Path | None, trace: str | None = None) -> tuple[dict[str, dict[str, Any]], str]:
    if run_dir is None:
        run_dir = Path(tempfile.mkdtemp(prefix="bench-default-")) / "run"
        cmd = [sys.executable, "-m", "replay", "run", "--engines", ",".join(ENGINES)]
        cmd += ["--out", str(run_dir), "--no-panel"]
        cmd += ["--trace", trace] if trace else []
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        on = f" on {trace}" if trace else ""
        note = f"embedded default{on}, {time.perf_counter() - t0:.0f} s wall"
    else:
        note = f"run {run_dir}"
    summary = json.loads((run_dir / "summary.json").read_text())
    from replay.rundir import read_manifest

    manifest = read_manifest(run_dir)
    models = {e.name: e.engine_model for e in manifest.engines}
    print("engine model per engine (manifest):")
    for name, model in models.items():
        print(f"  {name}: {model}")
    return summary["engines"], note


def simulated(
    blocks: int | None = None,
    scale: float | None = None,
    sessions: int | None = None,
    src: str | None = None,
) -> tuple[dict[str, dict[str, Any]], str]:
    from replay.emulator.defaults import load_default_run, sample_token_scale
    from replay.sim.runner import SimConfig, simulate
    from replay.traces import load_trace, sample_path
    from replay.traces.scale import declared_scale

    d = load_default_run()
    trace = load_trace(src or sample_path())
    own = (declared_scale(trace) or 1.0) if src else sample_token_scale()
    out: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()
    for e in ENGINES:
        cfg = SimConfig(
            policy=e,
            sessions=sessions or d.sessions,
            seed=d.seed,
            timing="engine",
            duration_s=d.duration_min * 60,
            window=(d.window[0] * 60, d.window[1] * 60),
            token_scale=scale or own,
            warmup_s=d.warmup_s,
            capacity_blocks=blocks or d.blocks,
        )
        s = simulate(trace, cfg).summary
        out[e] = {
            "output_tokens_per_min": s["output_tokens_per_min"],
            "hit_rate": s["hit_rate"],
            "ttft_p50": s["ttft_p50_s"],
            "ttft_p90": s["ttft_p90_s"],
            "e2e_p50": s["latency_p50_s"],
            "e2e_mean": s["latency_mean_s"],
            "prefill_tokens_per_min_per_gpu": s["prompt_tokens_per_min_per_gpu"],
            "working_set": s.get("working_set_ratio"),
        }
    on = f"{src}, " if src else ""
    what = f"{on}blocks {blocks or 'default'}, token scale {scale or own}"
    return out, f"replay simulate --timing engine ({what}), {time.perf_counter() - t0:.0f} s wall"


def fmt(v: float | None, key: str) -> str:
    if v is None:
        return "-"
    if key == "hit_rate":
        return f"{v:.1%}"
    if "tokens" in key:
        return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}K"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", type=Path, default=None)
    ap.add_argument("--sim", action="store_true")
    ap.add_argument("--capacity-blocks", type=int, default=None, help="with --sim: what-if")
    ap.add_argument("--token-scale", type=float, default=None, help="with --sim: what-if")
    ap.add_argument("--sessions", type=int, default=None, help="with --sim: what-if")
    ap.add_argument("--trace", default=None, help="another corpus than the bundled sample")
    args = ap.parse_args()
    if args.sim:
        rows, note = simulated(args.capacity_blocks, args.token_scale, args.sessions, args.trace)
        ws = {e: r.get("working_set") for e, r in rows.items()}
        print("working set ÷ capacity per engine: " + ", ".join(f"{e} {v}" for e, v in ws.items()))
    else:
        rows, note = live(args.run_dir, args.trace)
    print(f"\n{note}; ours / demo (ratio)")
    print(f"{'':26}" + "".join(f"{e:>28}" for e in ENGINES))
    for key, (label, demo) in DEMO.items():
        cells = []
        for e, ref in zip(ENGINES, demo, strict=True):
            ours = rows.get(e, {}).get(key)
            ratio = f"{ours / ref:.2f}×" if ours is not None and ref else "-"
            cells.append(f"{fmt(ours, key)} / {fmt(ref, key)} ({ratio})")
        print(f"{label:26}" + "".join(f"{c:>28}" for c in cells))


if __name__ == "__main__":
    main()
