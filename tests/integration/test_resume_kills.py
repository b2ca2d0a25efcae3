"""The random-kill property (issue 36): `replay run --workers 4` SIGKILLed at random moments
and resumed each time records every turn once. A handful of kills here (~1 min); the issue's
50 are `python scripts/probe_resume_kills.py --kills 50`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_random_kills_of_a_workers_run_then_resume_duplicate_no_turn(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "probe_resume_kills.py"), "--kills", "4",
         "--kills-per-run", "4", "--seed", "36", "--span-s", "6", "--dir", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=400,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "duplicates: 0" in out, out[-3000:]
