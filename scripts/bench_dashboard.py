"""Benchmark: how fast the dashboard shows its first page on a 100,000-request run.

Writes a synthetic run directory (three engines replaying the same sessions, written with
`replay.rundir.RunWriter`), then measures
  1. a cold load in-process (`analysis.runs.load_run` + the Replay panels' metrics),
  2. the Replay page's script in-process through Streamlit's AppTest, cold and warm cache,
  3. the real app: `replay dashboard`'s streamlit command started on the run folder and
     Chromium (Playwright, the system browser) timing `goto` until every engine panel shows,
     with a fresh server and browser (cold, median of 3), then in more tabs (warm).
The load average is printed too: on a shared machine the browser figures move with it.
Prints the figures and their ratio to the 3 s target. Needs /usr/bin/chromium for step 3
(skipped with a message otherwise).

The synthetic-run writer here is also what the dashboard tests use (through `runpy`), so
tests and benchmark exercise the same shape of data.

    .venv/bin/python scripts/bench_dashboard.py [--requests 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from replay.rundir import RunWriter
from replay.rundir_models import Manifest

ENGINES = ("flashstate", "vllm", "sglang")
# Per engine: typical hit rate, prefill speed (tokens/s of uncached prompt) and decode speed
# (tokens/s per request: recomputed prefill competes with decode) of the synthetic data,
# shaped like the FlashState demo's ordering. Illustrative, not measurements.
ENGINE_SHAPE = {
    "flashstate": (0.87, 20_000.0, 90.0),
    "vllm": (0.30, 8_000.0, 40.0),
    "sglang": (0.06, 6_000.0, 30.0),
}
TARGET_S = 3.0
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _session_plan(rng: np.random.Generator, duration_s: float) -> list[dict[str, Any]]:
    """One session slot's trajectories (engine-independent): turns, prompt sizes, gaps."""
    plan = []
    horizon = 0.0
    while horizon < duration_s:
        turns = int(rng.integers(4, 30))
        base = int(rng.integers(8_000, 30_000))
        growth = rng.integers(500, 4_000, size=turns).cumsum()
        plan.append(
            {
                "id": f"traj-{rng.integers(1 << 40):010x}",
                "prompts": base + growth,
                "outputs": rng.integers(50, 1_200, size=turns),
                "gaps": np.minimum(rng.exponential(4.0, size=turns), 300.0),
                "subagent_at": int(rng.integers(1, turns)) if rng.random() < 0.2 else -1,
            }
        )
        horizon += float(plan[-1]["gaps"].sum()) + turns * 8.0
    return plan


def _engine_rows(
    engine: str, slot: int, plan: list[dict[str, Any]], rng: np.random.Generator, duration_s: float
) -> list[dict[str, Any]]:
    hit, speed, decode = ENGINE_SHAPE.get(engine, (0.5, 10_000.0, 50.0))
    rows: list[dict[str, Any]] = []
    t = float(rng.uniform(0.0, 5.0))
    for k, traj in enumerate(plan):
        for i in range(len(traj["prompts"])):
            prompt = int(traj["prompts"][i])
            gap = 0.0 if i == 0 else float(traj["gaps"][i])
            scheduled = t + gap
            if scheduled >= duration_s:
                return rows
            ideal = int(prompt * 0.93) if i else 0
            cached = min(ideal, int(prompt * float(np.clip(rng.normal(hit, 0.05), 0, 1))))
            ttft = 0.05 + (prompt - cached) / speed + float(rng.exponential(0.1))
            out = int(traj["outputs"][i])
            done = scheduled + ttft + out / decode
            agent = "main"
            if i == traj["subagent_at"]:
                agent = f"sub-{i}"
            rows.append(
                {
                    "engine": engine,
                    "session": slot,
                    "trajectory": traj["id"],
                    "agent": agent,
                    "turn": i,
                    "scheduled_s": scheduled,
                    "sent_s": scheduled + 0.001,
                    "first_token_s": scheduled + ttft,
                    "done_s": done,
                    "prompt_tokens": prompt,
                    "cached_tokens": cached,
                    "ideal_cached_tokens": ideal,
                    "output_tokens": out,
                    "expected_output_tokens": out,
                    "finish_reason": "length",
                    "status": "ok",
                    "tool_gap_s": gap,
                    "priming": i == 0 and k == 0,  # a session's first request warms it
                    "attempt": 0,
                }
            )
            t = done
    return rows


def synthetic_rows(
    n_requests: int,
    engines: tuple[str, ...] = ENGINES,
    duration_s: float = 2700.0,
    seed: int = 0,
    sessions: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """About `n_requests` request rows (whole session slots, so a few more) and the number of
    session slots: every engine replays the same plan of trajectories per slot. With
    `sessions`, exactly that many slots instead (so one engine per run still makes the same
    workload as the others: the one-directory-per-policy layout of `replay simulate`)."""
    rows: list[dict[str, Any]] = []
    slot = 0
    while (len(rows) < n_requests) if sessions is None else (slot < sessions):
        plan = _session_plan(np.random.default_rng([seed, slot]), duration_s)
        for k, engine in enumerate(engines):
            rng = np.random.default_rng([seed, slot, k + 1])
            rows.extend(_engine_rows(engine, slot, plan, rng, duration_s))
        slot += 1
    return rows, slot


def write_synthetic_run(
    run_dir: Path,
    n_requests: int = 2_000,
    engines: tuple[str, ...] = ENGINES,
    duration_s: float = 2700.0,
    seed: int = 0,
    close: bool = True,
    sessions: int | None = None,
) -> Path:
    """A run directory shaped like a real one (manifest with engines, GPUs, window, sessions
    and trace; requests). `close=False` leaves it `running` (for the Live page)."""
    rows, slots = synthetic_rows(n_requests, engines, duration_s, seed, sessions)
    manifest = {
        "command": "scripts/bench_dashboard.py (synthetic)",
        "trace": {"path": "synthetic", "sha256": f"synthetic-plan-seed-{seed}"},
        "config": {
            "sessions": slots,
            "window": [duration_s / 3.0, duration_s],
            "seed": seed,
        },
        "engines": [
            {"name": e, "kind": "synthetic", "gpus": 2, "gpu_type": "B200"} for e in engines
        ],
    }
    writer = RunWriter(run_dir, Manifest.model_validate(manifest)).open()
    for row in rows:
        writer.add(row)
    writer.flush(force_parquet=True)
    if close:
        writer.close("completed")
    return run_dir


def _in_process(run_dir: Path) -> float:
    from analysis.runs import load_run
    from dashboards.timeline import counting_window, metrics_at, slider_end

    t0 = time.perf_counter()
    run = load_run(run_dir)
    start, stop = counting_window(run, measured_only=True)  # what the first page opens on
    metrics_at(run, slider_end(run, stop), start, stop)
    return time.perf_counter() - t0


def _replay_page(root: str) -> None:
    # Runs as a script inside AppTest: imports must be inside.
    from pathlib import Path

    from dashboards.views import replay

    replay.render(Path(root))


def _apptest(root: Path, repeats: int = 3) -> tuple[float, float]:
    """The Replay page's script run in-process (no browser): cold cache, then warm (median)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    st.cache_resource.clear()
    times = []
    for _ in range(repeats + 1):
        at = AppTest.from_function(_replay_page, args=(str(root),), default_timeout=120)
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        if at.exception:
            raise RuntimeError(f"the Replay page raised: {at.exception[0].message}")
    return times[0], statistics.median(times[1:])


def _wait_http(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"streamlit did not answer at {url} within {timeout_s:.0f} s")


def _time_pages(url: str, ready: list[str], repeats: int) -> list[float]:
    """Seconds from `goto` until every text in `ready` shows, once per fresh tab."""
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t0 = time.perf_counter()
            page.goto(url)
            for text in ready:
                page.get_by_text(text).first.wait_for(timeout=60_000)
            times.append(time.perf_counter() - t0)
            page.close()
        browser.close()
    return times


def _serve(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    from replay.commands.dashboard import app_script, free_port, streamlit_command

    port = free_port()
    proc = subprocess.Popen(
        streamlit_command(app_script(), root, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    _wait_http(url)
    return proc, url


def _browser(
    root: Path, engines: tuple[str, ...], repeats: int = 3
) -> tuple[float, float, float] | None:
    """(cold median, warm median, baseline median), in seconds until the Replay page shows
    every engine's panel. Cold: a freshly started server and browser each time (the first
    visit after `replay dashboard` starts); warm: more tabs on the last server. Baseline:
    the same app on an empty runs folder (Streamlit and the browser alone)."""
    if not Path(CHROMIUM).exists():
        print(f"browser step skipped: {CHROMIUM} not found (apt-get install -y chromium)")
        return None
    ready = [*engines, "User $/1M in"]
    with tempfile.TemporaryDirectory(prefix="bench-empty-") as empty:
        proc, url = _serve(Path(empty))
        try:
            baseline = _time_pages(url, ["No run directories under"], repeats + 1)[1:]
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    cold: list[float] = []
    warm: list[float] = []
    for i in range(repeats):
        proc, url = _serve(root)
        try:
            times = _time_pages(url, ready, 1 + (repeats if i == repeats - 1 else 0))
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        cold.append(times[0])
        warm.extend(times[1:])
    return statistics.median(cold), statistics.median(warm), statistics.median(baseline)


def _of(seconds: float) -> str:
    return f"{seconds / TARGET_S:.2f}× the {TARGET_S:.0f} s target"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument(
        "--keep", type=Path, help="write the run under this folder and keep it (reused next time)"
    )
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    try:
        run_dir = root / "bench-run"
        if (run_dir / "manifest.json").exists():
            print(f"reusing the run in {run_dir} (delete it to write a new one)")
        else:
            t0 = time.perf_counter()
            write_synthetic_run(run_dir, args.requests)
            print(f"synthetic run: {run_dir} ({time.perf_counter() - t0:.1f} s to write)")
        import pandas as pd

        n = len(pd.read_parquet(run_dir / "requests.parquet", columns=["engine"]))
        print(f"requests: {n:,}")
        print(f"load average (1 min) now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        cold = _in_process(run_dir)
        print(f"in-process load_run + panel metrics: {cold:.2f} s ({_of(cold)})")
        page_cold, page_warm = _apptest(root)
        print(f"Replay page script (AppTest), cold cache: {page_cold:.2f} s ({_of(page_cold)})")
        print(f"Replay page script (AppTest), warm cache: {page_warm:.2f} s ({_of(page_warm)})")
        shown = _browser(root, ENGINES)
        if shown is not None:
            first, again, base = shown
            print(
                f"first page in Chromium, fresh server and browser (median of 3): "
                f"{first:.2f} s ({_of(first)})"
            )
            print(f"first page in Chromium, warm cache (median of 3): {again:.2f} s ({_of(again)})")
            print(f"  baseline, same app on an empty runs folder (median of 3): {base:.2f} s")
        print(f"load average (1 min) now: {os.getloadavg()[0]:.1f}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
