"""Temporary folders that name their owner (issue 36): a folder whose owner is dead, or whose
pid now belongs to a process started later, is removed; one whose owner runs, or with no
readable owner file, is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from replay.owned_tmp import (
    OWNER,
    PROCESSES,
    describe,
    list_processes,
    owned_tempdir,
    remove_orphans,
)

PREFIX = "replay-test-owned-"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _folder(root: Path, name: str, owner: str | None) -> Path:
    path = root / f"{PREFIX}{name}"
    path.mkdir()
    (path / "a.log").write_text("x")
    if owner is not None:
        (path / OWNER).write_text(owner)
    return path


def test_only_folders_of_dead_owners_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    gone = _folder(tmp_path, "dead", f"{dead} -\n")
    mine = _folder(tmp_path, "mine", f"{os.getpid()} -\n")
    parent = _folder(tmp_path, "live", f"{os.getppid()} -\n")
    unowned = _folder(tmp_path, "unowned", None)
    torn = _folder(tmp_path, "torn", "")
    other = tmp_path / "something-else"
    other.mkdir()
    (other / OWNER).write_text(f"{dead} -\n")
    removed = remove_orphans(PREFIX, tmp_path)
    assert [(o.path, o.pid) for o in removed] == [(gone, dead)]
    assert not gone.exists()
    assert all(p.is_dir() for p in (mine, parent, unowned, torn, other))
    assert describe(removed, "test") == (
        f"removed 1 test folder left by a killed run (pid {dead}): {gone}"
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="start times from /proc")
def test_a_reused_pid_is_not_taken_for_the_owner(tmp_path: Path) -> None:
    reused = _folder(tmp_path, "reused", f"{os.getppid()} 1\n")  # a live pid, started later
    assert [o.path for o in remove_orphans(PREFIX, tmp_path)] == [reused]


def test_owned_tempdir_names_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # re-read TMPDIR
    tmp = owned_tempdir(PREFIX)
    try:
        assert Path(tmp.name).parent == tmp_path
        assert (Path(tmp.name) / OWNER).read_text().split()[0] == str(os.getpid())
        assert remove_orphans(PREFIX) == []  # its owner runs
    finally:
        tmp.cleanup()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="start times from /proc")
def test_an_orphan_folder_stops_the_processes_it_lists_and_no_other(tmp_path: Path) -> None:
    """A killed owner's listed processes still running (the same start time) are killed
    before its folder goes; a listed pid now running with another start time is left."""
    listed = subprocess.Popen(["sleep", "60"])
    other = subprocess.Popen(["sleep", "60"])
    try:
        folder = _folder(tmp_path, "ray", f"{_dead_pid()} -\n")
        list_processes(folder, {listed.pid})
        stamp = (folder / PROCESSES).read_text()
        assert stamp.startswith(f"{listed.pid} ") and not stamp.rstrip().endswith("-")
        # `other` written down with a start time it does not have: a reused pid.
        (folder / PROCESSES).write_text(stamp + f"{other.pid} 1\n")
        (removed,) = remove_orphans(PREFIX, tmp_path)
        assert removed.killed == 1 and not folder.exists()
        assert listed.wait(timeout=5) == -9
        assert other.poll() is None
        assert describe([removed], "Ray cluster").endswith("; stopped 1 process it had started")
    finally:
        for p in (listed, other):
            p.kill()
            p.wait()
