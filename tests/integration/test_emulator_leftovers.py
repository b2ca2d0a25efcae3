"""A SIGKILLed `replay run` against emulated engines leaves nothing running, and the next run
removes the emulators' temp folder it left, saying so (issue 36, nothing left running).

The emulators end with the run by themselves (`replay.lifeline`: PR_SET_PDEATHSIG and a
watching thread); their logs folder (`replay-emulators-*`) used to stay in the temp
directory for good. It now names its owner (`replay.owned_tmp`), and the next run removes a
folder whose owner is dead. Each test points TMPDIR at its own folder, so no other run's
folder is looked at."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replay.owned_tmp import OWNER
from tests.processes import descendants, kill_all, name, wait_gone

ROOT = Path(__file__).resolve().parents[2]
GONE_S = 5.0
PREFIX = "replay-emulators-"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _run(tmp_path: Path, out: str, minutes: str) -> subprocess.Popen[bytes]:
    with (tmp_path / f"{out}.log").open("wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "replay", "run", "--engines", "flashstate,vllm",
             "--sessions", "2", "--duration-min", minutes, "--time-scale", "60", "--no-panel",
             "--out", str(tmp_path / out)],
            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", TMPDIR=str(tmp_path / "tmp")),
        )  # fmt: skip


def test_a_killed_run_leaves_no_emulator_and_the_next_run_removes_its_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "tmp").mkdir()
    proc = _run(tmp_path, "killed", "30")
    kids: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            kids = descendants(proc.pid)
            emulators = [k for k in kids if "replay.emulator" in name(k)]
            if len(emulators) == 2 and (tmp_path / "killed" / "manifest.json").exists():
                break  # both emulators serve and the run has begun
            time.sleep(0.2)
        else:
            pytest.fail((tmp_path / "killed.log").read_text())
        (folder,) = (tmp_path / "tmp").glob(f"{PREFIX}*")
        assert (folder / OWNER).read_text().split()[0] == str(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        left = wait_gone(kids, GONE_S)
        assert not left, f"still running {GONE_S} s after the run was SIGKILLed: {left}"
        assert folder.is_dir()  # nothing runs at a SIGKILL: the next run removes it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(kids)

    nxt = _run(tmp_path, "next", "1")
    try:
        assert nxt.wait(timeout=60) == 0, (tmp_path / "next.log").read_text()
    finally:
        if nxt.poll() is None:
            nxt.kill()
            nxt.wait()
    text = " ".join((tmp_path / "next.log").read_text().split())
    assert not folder.exists()
    assert f"removed 1 emulator logs folder left by a killed run (pid {proc.pid}): {folder}" in text
    assert not list((tmp_path / "tmp").glob(f"{PREFIX}*"))  # the next run's own, removed at its end
