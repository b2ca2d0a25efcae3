"""`replay simulate --workers 2` leaves no pool worker behind (issue 36, nothing left running):
stopped by SIGINT or SIGTERM, SIGKILLed, or ended by an exception, every process the sweep
started (its child and the two forked pool workers, ~330 MB each) is gone within 5 s. They
used to stay a minute or more, re-parented to init, still simulating."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replay.commands.sim_child import run_in_child
from replay.runspec.sweep import manifest_spec
from replay.sim.runner import SimConfig, SimResult
from replay.sim.sweep import results, run_sweep
from replay.traces.loader import load_trace
from tests.long_trace import write_long_trace
from tests.processes import descendants, kill_all, wait_for, wait_gone

ROOT = Path(__file__).resolve().parents[2]
GONE_S = 5.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_a_stopped_simulate_leaves_no_pool_worker(sig: int, tmp_path: Path) -> None:
    log = tmp_path / "log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "replay", "simulate", "--trace", str(write_long_trace(tmp_path / "t.jsonl")),
             "--policies", "vllm,flashstate", "--sessions", "50", "--duration-min", "300",
             "--token-scale", "1", "--workers", "2", "--out", str(tmp_path / "sim")],
            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200"),
        )  # fmt: skip
    kids: set[int] = set()
    try:
        # The sweep's child, its two pool workers and the command's keeper of their group.
        kids = wait_for(proc.pid, 4, 60)
        assert len(kids) == 4, log.read_text()
        time.sleep(1.0)  # both simulating
        assert proc.poll() is None, log.read_text()
        proc.send_signal(sig)
        code = proc.wait(timeout=10)
        assert code == (-signal.SIGKILL if sig == signal.SIGKILL else 130), log.read_text()
        left = wait_gone(kids, GONE_S)
        assert not left, f"still running {GONE_S} s after the command ended: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(kids)


def _configs() -> tuple[SimConfig, SimConfig]:
    """One run that ends in a moment and one that would take minutes."""
    quick = SimConfig(policy="vllm", sessions=1, duration_s=60.0, window=(0.0, 60.0))
    slow = SimConfig(policy="flashstate", sessions=50, duration_s=18000.0, window=(0.0, 18000.0))
    return quick, slow


def test_a_sweep_ended_by_an_exception_kills_its_pool(tmp_path: Path) -> None:
    """The sweep's consumer raises after the first result (as a failed write would): the pool
    is killed, not waited for until the other simulation ends."""
    trace = load_trace(write_long_trace(tmp_path / "t.jsonl"))
    before = descendants(os.getpid())
    gen = results(trace, list(_configs()), workers=2)
    kids: set[int] = set()
    try:
        next(gen)
        kids = descendants(os.getpid()) - before
        assert len(kids) == 2, kids
        t = time.monotonic()
        with pytest.raises(RuntimeError, match="a write failed"):
            gen.throw(RuntimeError("a write failed"))
        assert time.monotonic() - t < GONE_S
        left = wait_gone(kids, GONE_S)
        assert not left, f"pool workers still running: {left}"
    finally:
        gen.close()
        kill_all(kids)


def test_an_exception_in_the_command_kills_the_sweep_child_and_its_pool(tmp_path: Path) -> None:
    trace = load_trace(write_long_trace(tmp_path / "t.jsonl"))
    configs = list(_configs())
    out = tmp_path / "sim"
    before = descendants(os.getpid())
    seen: set[int] = set()

    def work(on_result: Callable[[SimResult], None]) -> list[dict[str, Any]]:
        return run_sweep(trace, configs, out, workers=2, on_result=on_result, spec_of=manifest_spec)

    def on_done(name: str, row: dict[str, Any]) -> None:
        seen.update(descendants(os.getpid()) - before)
        raise RuntimeError("the progress display failed")

    try:
        with pytest.raises(RuntimeError, match="the progress display failed"):
            run_in_child(work, configs, out, on_done, {})
        assert len(seen) == 4, seen  # the child, its two pool workers, the group's keeper
        left = wait_gone(seen, GONE_S)
        assert not left, f"still running after the command's exception: {left}"
    finally:
        kill_all(seen)
