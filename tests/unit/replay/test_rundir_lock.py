"""A run directory has one writer (issue 12): a second writer is refused with the holder's
pid and start time, a writer's death frees the lock (and the next writer says it took a
dead writer's lock over), a `running` run nobody writes reads `interrupted (stale)`, and a
damaged journal line is named by file and line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.rundir import (
    LOCK,
    RunDirError,
    RunLock,
    RunLockedError,
    RunWriter,
    lock_holder,
    read_journal,
    run_status,
    utc_now,
)
from replay.rundir_models import Manifest

HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from replay.rundir import RunLock\n"
    "RunLock(Path(sys.argv[1])).acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock of tmp_path/run."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def test_a_second_writer_is_refused_with_the_holders_pid_and_start(
    holder: subprocess.Popen[str], tmp_path: Path
) -> None:
    with pytest.raises(RunLockedError) as err:
        RunLock(tmp_path / "run").acquire()
    msg = str(err.value)
    assert f"pid {holder.pid}, started 20" in msg and "a run directory has one writer" in msg
    with pytest.raises(RunLockedError):
        RunWriter(tmp_path / "run", Manifest()).open(resume=True)
    assert lock_holder(tmp_path / "run")["pid"] == holder.pid  # type: ignore[index]


def test_a_dead_writers_lock_is_taken_over_and_said_so(
    holder: subprocess.Popen[str], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    (run / "manifest.json").write_text(json.dumps({"status": "running", "heartbeat": utc_now()}))
    assert run_status(run, Manifest(status="running", heartbeat=utc_now())) == "running"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(10)
    # Killed: the heartbeat is fresh, but nobody holds the lock any more.
    assert lock_holder(run) is None
    assert run_status(run, Manifest(status="running", heartbeat=utc_now())) == "interrupted (stale)"
    w = RunWriter(run, Manifest(command="test")).open(resume=True)
    assert f"pid {holder.pid}" in w.manifest.notes[0] and "died" in w.manifest.notes[0]
    w.close("completed")
    assert (run / LOCK).read_text() == ""  # a clean end leaves an empty lock file


def test_a_lock_is_released_on_close_and_nested_in_one_process(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with RunLock(run):
        w = RunWriter(run, Manifest()).open()  # the same process: shares the lock
        w.close()
        assert lock_holder(run) is not None  # still held by the outer lock
    assert lock_holder(run) is None
    RunWriter(run, Manifest(), parquet_interval_s=0).open(resume=True).close()


def test_a_failed_start_leaves_no_empty_run_directory(tmp_path: Path) -> None:
    with RunLock(tmp_path / "new"):
        assert (tmp_path / "new" / LOCK).exists()
    assert not (tmp_path / "new").exists()


def test_stale_by_heartbeat_when_there_is_no_lock_file(tmp_path: Path) -> None:
    old = Manifest(status="running", heartbeat="2020-01-01T00:00:00+00:00")
    assert run_status(tmp_path, old) == "interrupted (stale)"
    assert run_status(tmp_path, Manifest(status="running", heartbeat=utc_now())) == "running"
    assert run_status(tmp_path, Manifest(status="completed")) == "completed"


def test_a_damaged_journal_line_is_named(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "run", Manifest()).open()
    w.add({"engine": "vllm", "status": "ok", "prompt_tokens": 1})
    w.close()
    journal = tmp_path / "run" / "requests.jsonl"
    journal.write_bytes(journal.read_bytes() + b'{"engine": "vllm", "status": \n')
    with pytest.raises(RunDirError, match=r"requests\.jsonl: line 2 is not valid JSON .*line 2"):
        read_journal(tmp_path / "run")
