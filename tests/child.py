"""Run a piece of the suite in a child Python under a wall-clock limit, so a hang fails the test
(naming what it was doing) instead of stalling the suite: compiled loops never run Python's
signal handlers, so an in-process timeout could not stop them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_child(
    code: str, args: list[str], limit_s: float, what: str
) -> subprocess.CompletedProcess[str]:
    """`python -c code *args` from the repository root. The child prints `start ...` lines as
    it goes; past `limit_s` the test fails with `what` and the last of them."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=limit_s,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        started = [ln for ln in out.splitlines() if ln.startswith("start")]
        pytest.fail(f"{what}: no end within {limit_s} s; last started: {started[-1:]}")
