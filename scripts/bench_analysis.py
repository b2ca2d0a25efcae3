"""Benchmark: analyse a 100,000-request run and write every table (target: under 10 s).

Builds a synthetic run directory (three engines, seeded), then times `load_run`, the whole
analysis (window metrics, time-bin errors, pricing, comparisons, paired deltas, roll-ups,
sweep) and writing all tables (CSV, Markdown, LaTeX) plus summary.json. Figures are
excluded from the target and timed separately with `--figures`.

    .venv/bin/python scripts/bench_analysis.py [--requests 100000] [--keep DIR] [--figures]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from analysis.report.build import write_summaries, write_tables
from analysis.report.content import analyze
from analysis.runs import load_run
from replay.records import REQUEST_SCHEMA
from replay.rundir import MANIFEST, REQUESTS, write_json_atomic, write_table_atomic
from replay.rundir_models import Manifest

ENGINES = (("flashstate", 0.85, 0.3), ("vllm", 0.45, 2.0), ("sglang", 0.25, 6.0))
TARGET_S = 10.0


def synth_run(run_dir: Path, requests: int, seed: int = 0, sessions: int = 48) -> Path:
    """A run directory of `requests` records split over the engines (seeded)."""
    rng = np.random.default_rng(seed)
    per = requests // len(ENGINES)
    cols: dict[str, list[np.ndarray]] = {name: [] for name in REQUEST_SCHEMA.names}
    for e_i, (engine, hit, ttft_scale) in enumerate(ENGINES):
        n = per + (requests - per * len(ENGINES) if e_i == 0 else 0)
        session = rng.integers(0, sessions, n)
        order = np.argsort(session, kind="stable")
        session = session[order]
        scheduled = np.sort(rng.uniform(0, 2700, n))
        traj_id = rng.integers(0, 400, n)
        turn = rng.integers(0, 120, n)
        prompt = rng.integers(2_000, 150_000, n)
        ideal = (prompt * rng.uniform(0.8, 1.0, n)).astype(np.int64)
        cached = np.minimum(ideal, (prompt * rng.beta(hit * 10, (1 - hit) * 10, n))).astype(
            np.int64
        )
        ttft = rng.lognormal(np.log(ttft_scale), 1.0, n)
        output = rng.integers(50, 2_000, n)
        first = scheduled + ttft
        done = first + output / rng.uniform(40, 80, n)
        status = np.where(rng.random(n) < 0.005, "error", "ok")
        simulated = engine == "flashstate"
        red = ideal - cached
        share = rng.dirichlet([2, 1, 1], n)
        values = {
            "engine": np.full(n, engine),
            "session": session,
            "trajectory": np.char.add("traj-", traj_id.astype(str)),
            "agent": np.where(rng.random(n) < 0.1, "sub-1", "main"),
            "turn": turn,
            "scheduled_s": scheduled,
            "sent_s": scheduled,
            "first_token_s": np.where(status == "ok", first, np.nan),
            "done_s": np.where(status == "ok", done, np.nan),
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "ideal_cached_tokens": ideal,
            "output_tokens": output,
            "expected_output_tokens": output,
            "finish_reason": np.full(n, "length"),
            "status": status,
            "error": np.where(status == "error", "HTTP 500", None),
            "resume_pos": cached if simulated else np.full(n, np.nan),
            "checkpoint_pos": np.full(n, np.nan),
            "resident_pos": np.full(n, np.nan),
            "placement_miss": (red * share[:, 0]) if simulated else np.full(n, np.nan),
            "dependency_miss": (red * share[:, 1]) if simulated else np.full(n, np.nan),
            "capacity_miss": (red * share[:, 2]) if simulated else np.full(n, np.nan),
            "tool_gap_s": np.minimum(rng.exponential(30, n), 300),
            "priming": rng.random(n) < 0.02,
            "attempt": np.zeros(n, dtype=np.int64),
            "trace_prompt_tokens": prompt,
            "trace_latency_s": done - scheduled,
            "extends_previous": np.where(turn > 0, True, None),
        }
        for name, arr in values.items():
            cols[name].append(arr)
    arrays = []
    for f in REQUEST_SCHEMA:
        data = np.concatenate(cols[f.name])
        if pa.types.is_integer(f.type) and data.dtype.kind == "f":
            arrays.append(
                pa.array(np.round(data), type=pa.float64(), from_pandas=True).cast(f.type)
            )
        else:
            arrays.append(pa.array(data, type=f.type, from_pandas=True))
    run_dir.mkdir(parents=True, exist_ok=True)
    write_table_atomic(run_dir / REQUESTS, pa.Table.from_arrays(arrays, schema=REQUEST_SCHEMA))
    manifest = Manifest.model_validate(
        {
            "run_id": run_dir.name,
            "status": "completed",
            "harness_version": "bench",
            "trace": {"path": "synthetic", "sha256": "0" * 64},
            "config": {"window": [900, 2700], "sessions": sessions, "seed": seed},
            "engines": [{"name": e, "gpus": 2, "gpu_type": "B200"} for e, _, _ in ENGINES],
        }
    )
    write_json_atomic(run_dir / MANIFEST, manifest.model_dump(mode="json", exclude_none=True))
    return run_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, default=None, help="build the run here and keep it")
    parser.add_argument("--figures", action="store_true", help="also time the figures (no static)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        t = time.perf_counter()
        run_dir = synth_run(base / "bench-run", args.requests)
        print(f"built a {args.requests:,}-request run in {time.perf_counter() - t:.2f} s")
        t0 = time.perf_counter()
        run = load_run(run_dir)
        t_load = time.perf_counter() - t0
        t = time.perf_counter()
        data = analyze([run])
        t_analyze = time.perf_counter() - t
        t = time.perf_counter()
        _, files = write_tables(data, base / "report", {"md", "tex", "html"})
        write_summaries(data, 60.0)
        t_tables = time.perf_counter() - t
        total = time.perf_counter() - t0
        print(f"load          {t_load:6.2f} s")
        print(f"analysis      {t_analyze:6.2f} s")
        print(f"tables+summary{t_tables:6.2f} s  ({len(files)} table files)")
        print(
            f"total         {total:6.2f} s  (target < {TARGET_S:.0f} s: {total / TARGET_S:.2f}× of it)"
        )
        print(f"throughput    {args.requests / total:,.0f} requests analysed per second")
        if args.figures:
            from analysis.report.figures import all_figures

            t = time.perf_counter()
            figs = all_figures(data)
            print(
                f"figures       {time.perf_counter() - t:6.2f} s  ({len(figs)} figures, not in target)"
            )
        return 0 if total < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
