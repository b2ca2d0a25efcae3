"""A journal that survives its tail and a full disk (issue 24): a torn last line is cut on
resume (and noted), readers skip and count it; a full disk ends the writer `failed` with a
message naming the path and the free space, no temporary file left, whole lines only."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from replay import rundir_journal
from replay.rundir import (
    JOURNAL,
    DiskFullError,
    RunWriter,
    read_journal,
    read_manifest,
    read_requests,
    torn_tail_bytes,
)
from replay.rundir_models import Manifest


def _row(i: int) -> dict[str, Any]:
    return {"engine": "a", "session": 0, "turn": i, "prompt_tokens": 10, "status": "ok",
            "scheduled_s": float(i), "error": None}  # fmt: skip


def _writer(run_dir: Path) -> RunWriter:
    return RunWriter(run_dir, Manifest.model_validate({"engines": [{"name": "a"}]}))


def _killed_run(run_dir: Path, rows: int = 5) -> None:
    w = _writer(run_dir).open()
    for i in range(rows):
        w.add(_row(i))
    w.flush(force_parquet=True)
    w._lock.release()  # the process "dies": no close()
    with (run_dir / JOURNAL).open("ab") as f:
        f.write(b'{"engine": "a", "sess')  # the torn line a kill leaves


def test_resume_cuts_the_torn_line_before_appending_and_notes_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _killed_run(run_dir)
    assert torn_tail_bytes(run_dir / JOURNAL) == len(b'{"engine": "a", "sess')
    assert len(read_journal(run_dir)) == 5  # readers skip it
    w = _writer(run_dir).open(resume=True)
    w.add(_row(5))
    w.close()
    lines = (run_dir / JOURNAL).read_bytes().splitlines()
    assert len(lines) == 6 and all(orjson.loads(x)["engine"] == "a" for x in lines)
    (run_dir / "requests.parquet").unlink()  # the journal alone is readable
    assert len(read_requests(run_dir)) == 6
    notes = read_manifest(run_dir).notes
    assert any("a torn last line (21 bytes, left by the kill) was cut" in n for n in notes)


def test_readers_count_a_torn_last_line(tmp_path: Path) -> None:
    from analysis.runs import load_run

    run_dir = tmp_path / "run"
    _killed_run(run_dir)
    notes = load_run(run_dir).notes
    assert any("its last line is torn (21 bytes" in n and "skipped, 1 line" in n for n in notes)


def _enospc_after(monkeypatch: pytest.MonkeyPatch, target: str, calls: int) -> None:
    """Make `os.write` (journal) or `Path.write_bytes` (json) fail with ENOSPC after `calls`
    (json: while requests.parquet takes the space)."""
    count = [0]
    if target == "journal":
        real = os.write

        def fake(fd: int, data: Any) -> int:
            count[0] += 1
            if count[0] > calls:
                real(fd, bytes(data)[:7])  # part of a line reaches the file first
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(fd, data)

        monkeypatch.setattr(rundir_journal.os, "write", fake)
    else:
        real_wb = Path.write_bytes

        def fake_wb(self: Path, data: Any) -> int:
            count[0] += 1  # full until the derived requests.parquet is removed
            full = (self.parent / "requests.parquet").exists()
            if count[0] > calls and self.name.endswith(".tmp") and full:
                real_wb(self, b"{")
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_wb(self, data)

        monkeypatch.setattr(Path, "write_bytes", fake_wb)


@pytest.mark.parametrize("target", ["journal", "manifest"])
def test_a_full_disk_ends_failed_naming_the_path_no_tmp_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    run_dir = tmp_path / "run"
    w = _writer(run_dir).open()
    w.add(_row(0))
    w.flush()
    _enospc_after(monkeypatch, target, 0)
    w.add(_row(1))
    w.flush()  # the journal fails here (kept, not raised)
    w.update_manifest(heartbeat_s=1.0)  # the manifest fails here
    assert w.disk_full is not None
    w.flush()  # later writes are skipped
    with pytest.raises(DiskFullError) as err:
        w.close("completed")
    monkeypatch.undo()
    name = JOURNAL if target == "journal" else "manifest.json"
    assert f"{run_dir / name}: no space left on the device (" in str(err.value)
    assert "bytes free in" in str(err.value) and "replay run --resume" in str(err.value)
    man = read_manifest(run_dir)
    assert man.status == "failed" and "no space left" in (man.error or "")
    assert not list(run_dir.glob("*.tmp"))
    data = (run_dir / JOURNAL).read_bytes()
    assert data.endswith(b"\n") and all(orjson.loads(x) for x in data.splitlines())


def test_a_real_full_tmpfs(small_tmpfs: Path) -> None:
    run_dir = small_tmpfs / "run"
    w = _writer(run_dir).open()
    with pytest.raises(DiskFullError, match="no space left on the device"):
        for i in range(100_000):
            w.add({**_row(i), "error": "x" * 200})
            if i % 100 == 0:
                w.flush(force_parquet=i % 1000 == 0)
                if w.disk_full is not None:
                    break
        w.close()
    assert read_manifest(run_dir).status == "failed"
    assert not list(run_dir.glob("*.tmp"))
    assert (run_dir / JOURNAL).read_bytes().endswith(b"\n")


def test_the_last_manifest_makes_room_by_dropping_the_derived_parquet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No temporary file fits while requests.parquet is there: the final manifest removes
    it (readers rebuild it from the journal) rather than half-overwrite manifest.json."""
    run_dir = tmp_path / "run"
    w = _writer(run_dir).open()
    for i in range(3):
        w.add(_row(i))
    w.flush(force_parquet=True)
    real_wb = Path.write_bytes

    def fake_wb(self: Path, data: Any) -> int:
        if self.name.endswith(".tmp") and (run_dir / "requests.parquet").exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_wb(self, data)

    monkeypatch.setattr(Path, "write_bytes", fake_wb)
    w.update_manifest(notes=["a longer manifest than before " * 20])
    assert w.disk_full is not None
    with pytest.raises(DiskFullError):
        w.close()
    monkeypatch.undo()
    assert read_manifest(run_dir).status == "failed"
    assert not (run_dir / "requests.parquet").exists()
    assert len(read_requests(run_dir)) == 3 and not list(run_dir.glob("*.tmp"))
