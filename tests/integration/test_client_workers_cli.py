"""`replay run --workers 4` as a user runs it (issue 26), against its own emulator: one worker
is SIGKILLed mid-run; the run restarts it, ends `completed`, and its journal holds every line
the workers wrote exactly once (each worker's `seq` runs 0..n without a gap or a repeat, and
every line is in requests.parquet); no worker or emulator outlives the run (~1 min)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from replay.rundir import read_journal, read_manifest, read_requests

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                kids = {int(c) for c in (task / "children").read_text().split()}
                todo += list(kids - out)
                out |= kids
    return out


def _cmd(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_four_workers_one_killed_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    out, log = tmp_path / "run", tmp_path / "log.txt"
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    args = ["--engines", "vllm", "--sessions", "8", "--duration-min", "2", "--window", "0-2",
            "--workers", "4", "--out", str(out), "--no-panel"]  # fmt: skip
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "replay", "run", *args], stdout=fh, stderr=subprocess.STDOUT,
            env=env, cwd=ROOT,
        )  # fmt: skip
    try:
        part = out / "parts" / "w2.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (part.exists() and part.stat().st_size):
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        assert part.exists(), log.read_text()[-3000:]
        everything = _descendants(proc.pid)
        workers = [p for p in everything if b"spawn_main" in _cmd(p)]
        assert len(workers) == 4, [_cmd(p) for p in everything]
        os.kill(max(workers), signal.SIGKILL)
        assert proc.wait(240) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    seqs: dict[int, list[int]] = defaultdict(list)
    journal = read_journal(out)
    for row in journal:
        seqs[row["worker"]].append(row["seq"])
    assert sorted(seqs) == [0, 1, 2, 3]
    for w, got in seqs.items():
        assert sorted(got) == list(range(len(got))), f"worker {w}: a line lost or repeated"
    assert len(read_requests(out)) == len(journal)
    man = read_manifest(out)
    assert man.status == "completed" and any("started again" in n for n in man.notes)
    assert not (out / "parts").exists()  # merged, then removed
    time.sleep(1.0)
    left = [p for p in everything | _descendants(proc.pid) if _alive(p)]
    assert not left, [_cmd(p) for p in left]
