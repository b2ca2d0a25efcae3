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


def test_an_engine_that_crashes_ends_the_run_with_its_last_error_and_what_it_had(
    tmp_path: Path,
) -> None:
    """A real emulator process that crashes hard mid-run (`--crash-after`, os._exit with its
    exception line on stderr, as a dying engine writes it), given to the run with
    `--engine-log`: the run ends ~30 s after the crash, not at its 3 wall minutes, exit 1 and
    `interrupted` (resumable); the error line is in the manifest's event and in the output;
    the requests served before the crash are kept; the engine's process is gone."""
    from tests.serve_sim import serve_sim

    log = tmp_path / "engine.log"
    # Preflight's probes are requests too: the crash comes a few requests into the replay
    # (its clock 20× real time: 60 minutes of trace in 3 wall minutes).
    with serve_sim(["--engine", "vllm", "--crash-after", "12", "--time-scale", "20"], log) as url:
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "replay", "run", "--endpoint", f"vllm={url}",
             "--engine-log", f"vllm={log}", "--sessions", "4", "--duration-min", "60",
             "--window", "0-60", "--warmup-s", "0", "--no-panel", "--out", str(tmp_path / "r")],
            capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=170,
        )  # fmt: skip
        took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert took < 120, (took, out)
    assert "every engine had been down for 30 s" in out and "injected crash" in out, out
    man = read_manifest(tmp_path / "r")
    assert man.status == "interrupted"
    (down,) = [e for e in man.events if e.event == "engine_down"]
    assert down.end_s is None and down.engine_error is not None
    assert down.engine_error.startswith("RuntimeError: injected crash"), down
    df = read_requests(tmp_path / "r")
    assert (df.status == "ok").sum() >= 1, df.status.value_counts()
    assert not listening(url), "the crashed engine's port is still served"


def test_engine_log_names_the_flag_and_what_to_give(tmp_path: Path) -> None:
    for item, says in [
        ("vllm", "expected NAME=PATH"),
        (f"sglang={tmp_path}", "no engine 'sglang' in this run (its engines: vllm)"),
        (f"vllm={tmp_path / 'nope.log'}", "is not a file"),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "replay", "run", "--endpoint", "vllm=http://127.0.0.1:9",
             "--engine-log", item, "--no-panel", "--out", str(tmp_path / "r")],
            capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120,
        )  # fmt: skip
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "--engine-log" in out and says in out, out
        assert "Traceback" not in out
