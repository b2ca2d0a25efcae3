"""`replay run` with its own emulators under faults (issue 12), as real processes: a second
writer is refused while the run goes, SIGKILL of the harness leaves no emulator behind (none
listening), the killed run resumes without duplicating a record, and an emulator that dies
mid-run is restarted by the harness and recorded (`engine_down`, `emulator_restarts`)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest

from replay.rundir import read_journal, read_manifest, read_requests, run_status

ROOT = Path(__file__).resolve().parents[2]
KEY = ["engine", "session", "trajectory", "agent", "turn", "attempt", "priming", "scheduled_s"]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", COLUMNS="200")


def _replay(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "replay", "run", *args, "--no-panel"],
            stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT,
        )  # fmt: skip


def children(pid: int) -> set[int]:
    """Direct children of `pid`, from every thread (the supervisor thread restarts some)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone: it holds no port)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def listening(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((parts.hostname or "127.0.0.1", parts.port or 80)) == 0


def wait_for(cond: object, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.25)
    tail = log.read_text(errors="replace")[-3000:] if log else ""
    pytest.fail(f"timed out waiting for {what}\n{tail}")


def _records(run: Path) -> int:
    return len(read_journal(run)) if (run / "requests.jsonl").exists() else 0


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(10)


@pytest.mark.slow
def test_sigkill_leaves_no_emulator_and_a_second_writer_is_refused(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    run = tmp_path / "run"
    log = tmp_path / "run.log"
    # 20 trace minutes at the embedded time scale (30): about 40 s of wall time.
    args = ["--engines", "vllm,sglang", "--sessions", "4", "--duration-min", "20"]
    harness = _replay(*args, "--out", str(run), log=log)
    procs.append(harness)
    wait_for(lambda: _records(run) >= 10, 120, "the first records", log)
    kids = children(harness.pid)
    urls = [e.url for e in read_manifest(run).engines]
    assert len(kids) == 2 and all(listening(u) for u in urls)

    second = subprocess.run(
        [sys.executable, "-m", "replay", "run", "--resume", str(run), "--no-panel"],
        capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120,
    )  # fmt: skip
    text = " ".join((second.stdout + second.stderr).split())
    assert second.returncode == 2, text
    assert f"is being written by another replay process (pid {harness.pid}, started" in text

    os.kill(harness.pid, signal.SIGKILL)
    harness.wait(10)
    wait_for(lambda: not any(alive(k) for k in kids), 10, "the emulators to end")
    # A thread-group leader shows as a zombie while its other threads are still exiting, and
    # the listening socket closes only when the last of them is gone: wait for that too.
    wait_for(lambda: not any(listening(u) for u in urls), 10, "the emulators' ports to close")
    assert run_status(run, read_manifest(run)) == "interrupted (stale)"
    before = read_requests(run)
    assert not before.duplicated(KEY).any()

    resumed = _replay("--resume", str(run), log=tmp_path / "resume.log")
    procs.append(resumed)
    assert resumed.wait(180) in (0, 1), (tmp_path / "resume.log").read_text()[-3000:]
    man = read_manifest(run)
    assert man.status in ("completed", "degraded") and len(man.segments) == 2
    assert "died without releasing it" in " ".join(man.notes)
    after = read_requests(run)
    assert len(after) > len(before) and not after.duplicated(KEY).any()
    # Every journal row is in the rebuilt parquet file: nothing recorded was lost.
    assert len(after) == len(read_journal(run))


@pytest.mark.slow
def test_an_emulator_that_dies_is_restarted_and_recorded(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    run = tmp_path / "run"
    log = tmp_path / "run.log"
    harness = _replay(
        "--engines", "vllm", "--sessions", "4", "--duration-min", "12", "--out", str(run),
        log=log,
    )  # fmt: skip
    procs.append(harness)
    wait_for(lambda: _records(run) >= 5, 120, "the first records", log)
    (child,) = children(harness.pid)
    os.kill(child, signal.SIGKILL)
    assert harness.wait(180) in (0, 1), log.read_text()[-3000:]
    man = read_manifest(run)
    assert man.emulator_restarts == {"vllm": 1}
    downs = [e for e in man.events if e.event == "engine_down"]
    assert len(downs) == 1 and downs[0].engine == "vllm"
    assert downs[0].end_s is not None and downs[0].end_s > downs[0].start_s
    summary = orjson.loads((run / "summary.json").read_bytes())
    notes = " ".join(summary["notes"])
    assert "vllm: engine down from" in notes and "restarted it 1 time(s)" in notes
    assert man.status in ("completed", "degraded")
    # The restarted emulator (same port) ended with the run.
    assert not listening(man.engines[0].url)
