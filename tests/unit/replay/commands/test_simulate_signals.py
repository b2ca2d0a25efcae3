"""`replay simulate` stops on SIGINT and SIGTERM within a second or two, however long the
simulation would go on (its compiled loops never run Python's signal handlers: the sweep runs
in a child the command kills), and leaves the unfinished runs' manifests `interrupted`, with
no simulation process behind (issue 24)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.long_trace import write_long_trace

ROOT = Path(__file__).resolve().parents[4]


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out |= {int(c) for c in (task / "children").read_text().split()}
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_simulate_stops_at_once_and_marks_runs_interrupted(sig: int, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    log = tmp_path / "log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "replay", "simulate", "--trace", str(write_long_trace(tmp_path / "t.jsonl")),
             "--policies", "vllm,flashstate", "--sessions", "50", "--duration-min", "300",
             "--token-scale", "1", "--out", str(out)],
            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200"),
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while not _children(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    kids = _children(proc.pid)
    assert kids, log.read_text()
    time.sleep(1.0)  # the child is simulating
    assert proc.poll() is None, log.read_text()
    t = time.monotonic()
    proc.send_signal(sig)
    code = proc.wait(timeout=10)
    took = time.monotonic() - t
    text = " ".join(log.read_text().split())
    assert code == 130 and took < 3.0, (code, took, text)
    assert f"stopped by {signal.Signals(sig).name}: of 2 runs none finished" in text
    assert "Traceback" not in text
    for run in ("vllm-s50-seed0", "flashstate-s50-seed0"):
        man = json.loads((out / run / "manifest.json").read_text())
        assert man["status"] == "interrupted" and "stopped by" in man["notes"][0]
        assert man["spec"]["engines"][0]["policy"] == run.split("-")[0]  # its point's spec
    time.sleep(0.5)
    assert not any(Path(f"/proc/{k}").exists() for k in kids)
