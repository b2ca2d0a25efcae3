"""Temporary folders that name the process that made them, so one left by a SIGKILLed process
is removed by the next process that makes one of the same kind (issue 36).

A process killed with SIGKILL runs no cleanup: `replay run`'s emulator logs folder
(`replay-emulators-*` in the temp directory) used to stay forever. `owned_tempdir` writes an
`OWNER` file into the folder it makes (the pid and, on Linux, the process's start time, so a
reused pid is not taken for the owner); `remove_orphans` removes every folder of a prefix whose
owner is no longer running. A folder with no readable owner file (being made, or made by an
older version) is left alone, as is one whose owner runs: another run's folder is never
touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

OWNER = ".replay-owner"


@dataclass(frozen=True)
class Orphan:
    """A removed folder and the pid that had made it."""

    path: Path
    pid: int


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc, Linux); None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _running(pid: int, start: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    if start is None:
        return True
    now = _start_time(pid)
    return now is None or now == start  # a different start time: the pid was reused


def _owner(folder: Path) -> tuple[int, int | None] | None:
    try:
        fields = (folder / OWNER).read_text().split()
        pid = int(fields[0])
        start = int(fields[1]) if len(fields) > 1 and fields[1] != "-" else None
    except (OSError, ValueError, IndexError):
        return None
    return (pid, start) if pid > 0 else None


def owned_tempdir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A `TemporaryDirectory` holding the owner file (written whole: a temporary name, then
    renamed, so `remove_orphans` never reads half of one)."""
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    pid = os.getpid()
    start = _start_time(pid)
    part = Path(tmp.name) / f"{OWNER}.part"
    with contextlib.suppress(OSError):  # no owner file: the folder is only never reclaimed
        part.write_text(f"{pid} {'-' if start is None else start}\n")
        part.replace(Path(tmp.name) / OWNER)
    return tmp


def remove_orphans(prefix: str, root: Path | None = None) -> list[Orphan]:
    """Remove every `prefix*` folder under `root` (the temp directory) whose owner file names a
    process that is no longer running; the folders removed."""
    base = Path(tempfile.gettempdir()) if root is None else root
    removed: list[Orphan] = []
    with contextlib.suppress(OSError):
        for folder in sorted(base.glob(f"{prefix}*")):
            owner = _owner(folder)
            if owner is None or owner[0] == os.getpid() or _running(*owner):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(Orphan(folder, owner[0]))
    return removed


def describe(removed: list[Orphan], what: str) -> str:
    """One line naming what was removed, e.g. `removed 1 emulator logs folder left by a killed
    run (pid 4242): /tmp/replay-emulators-x1y2`."""
    n = len(removed)
    pids = ", ".join(str(o.pid) for o in removed)
    paths = ", ".join(str(o.path) for o in removed)
    left = "a killed run" if n == 1 else "killed runs"
    return f"removed {n} {what} folder{'s' if n != 1 else ''} left by {left} (pid {pids}): {paths}"


__all__ = ["OWNER", "Orphan", "describe", "owned_tempdir", "remove_orphans"]
