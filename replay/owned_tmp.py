"""Temporary folders that name the process that made them, so one left by a SIGKILLed process
is removed by the next process that makes one of the same kind (issue 36).

A process killed with SIGKILL runs no cleanup: `replay run`'s emulator logs folder
(`replay-emulators-*` in the temp directory) used to stay forever. `owned_tempdir` writes an
`OWNER` file into the folder it makes (the pid and, on Linux, the process's start time, so a
reused pid is not taken for the owner); `remove_orphans` removes every folder of a prefix whose
owner is no longer running. A folder with no readable owner file (being made, or made by an
older version) is left alone, as is one whose owner runs: another run's folder is never
touched. A folder may also list processes its owner started that do not die with it
(`list_processes`: `replay run --ray local`'s Ray agents, which outlive a SIGKILLed run by about
a minute); `remove_orphans` kills those still running (the same pid and start time) first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path

OWNER = ".replay-owner"
PROCESSES = ".replay-processes"


@dataclass(frozen=True)
class Orphan:
    """A removed folder and the pid that had made it."""

    path: Path
    pid: int
    killed: int = 0  # the processes it listed that were still running, killed


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


def _stamp(pid: int) -> str:
    start = _start_time(pid)
    return f"{pid} {'-' if start is None else start}"


def _write_whole(path: Path, text: str) -> None:
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.replace(path)


def owned_tempdir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A `TemporaryDirectory` holding the owner file (written whole: a temporary name, then
    renamed, so `remove_orphans` never reads half of one)."""
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    with contextlib.suppress(OSError):  # no owner file: the folder is only never reclaimed
        _write_whole(Path(tmp.name) / OWNER, f"{_stamp(os.getpid())}\n")
    return tmp


def list_processes(folder: Path, pids: set[int]) -> None:
    """Write down, in a folder `owned_tempdir` made, processes to stop should its owner be
    killed: each pid with its start time (a reused pid is never taken for one of them)."""
    with contextlib.suppress(OSError):  # unlisted: they only outlive a SIGKILL
        _write_whole(folder / PROCESSES, "".join(f"{_stamp(p)}\n" for p in sorted(pids)))


def _kill_listed(folder: Path) -> int:
    killed = 0
    try:
        lines = (folder / PROCESSES).read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        fields = line.split()
        try:
            pid = int(fields[0])
            start = int(fields[1]) if len(fields) > 1 and fields[1] != "-" else None
        except (ValueError, IndexError):
            continue
        if pid <= 1 or pid == os.getpid() or start is None or not _running(pid, start):
            continue  # without a start time a pid could be anyone's now
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


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
            killed = _kill_listed(folder)
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(Orphan(folder, owner[0], killed))
    return removed


def describe(removed: list[Orphan], what: str) -> str:
    """One line naming what was removed, e.g. `removed 1 emulator logs folder left by a killed
    run (pid 4242): /tmp/replay-emulators-x1y2`."""
    n = len(removed)
    pids = ", ".join(str(o.pid) for o in removed)
    paths = ", ".join(str(o.path) for o in removed)
    left = "a killed run" if n == 1 else "killed runs"
    line = f"removed {n} {what} folder{'s' if n != 1 else ''} left by {left} (pid {pids}): {paths}"
    if killed := sum(o.killed for o in removed):
        line += f"; stopped {killed} process{'es' if killed != 1 else ''} it had started"
    return line


__all__ = [
    "OWNER",
    "PROCESSES",
    "Orphan",
    "describe",
    "list_processes",
    "owned_tempdir",
    "remove_orphans",
]
