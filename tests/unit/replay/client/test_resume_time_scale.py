"""A live run against an emulator that announces `time_scale` 20 (`serve-sim --time-scale 20`)
is interrupted and resumed: the manifest's spec keeps the adopted scale, so `--resume` replays
in the engines' clock instead of refusing the run (issue 32, point 7)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replay.rundir import read_manifest, read_requests
from tests.serve_sim import serve_sim

pytestmark = pytest.mark.slow


def test_a_run_against_a_time_scaled_emulator_resumes(helpers: Any, tmp_path: Path) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=2, turns=6, gap=20.0)
    out = tmp_path / "run"
    with serve_sim(["--engine", "vllm", "--time-scale", "20"], tmp_path / "emu.log") as url:
        cmd = [sys.executable, "-m", "replay", "run", "--endpoint", f"vllm={url}", "--trace",
               str(trace), "--sessions", "2", "--duration-min", "6", "--window", "0-6",
               "--no-panel", "--out", str(out)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        journal = out / "requests.jsonl"
        while not journal.exists() or journal.stat().st_size == 0:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stdout + stderr
        man = read_manifest(out)
        assert man.status == "interrupted" and man.spec is not None
        assert man.spec["workload"]["time_scale"] == 20, man.spec["workload"]
        before = len(read_requests(out))
        resumed = subprocess.run(
            [sys.executable, "-m", "replay", "run", "--resume", str(out), "--no-panel"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    man = read_manifest(out)
    assert man.status in ("completed", "degraded"), man.status
    assert man.config.time_scale == 20 and man.config.clock_scale == 20
    assert len(read_requests(out)) > before
