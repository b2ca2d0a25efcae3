"""The run directory's writes that must survive a kill and a full disk.

- The journal (`requests.jsonl`) only ever holds whole lines: `append_whole` writes a batch
  in one unbuffered write and, when it fails part-way, cuts the file back to where it was;
  `cut_torn_tail` removes the fragment a kill left mid-write (before a resume appends), and
  `torn_tail_bytes` lets readers count the one they skip.
- `write_atomic` writes a file through `<name>.tmp` and `os.replace`, and removes the
  temporary file when the write fails. A full disk (ENOSPC, or a quota: EDQUOT) is a
  `DiskFullError` naming the path and the free space left, never a bare OSError.
- `write_in_place` is the last resort for the final manifest on a full disk: it overwrites
  the existing file's own blocks instead of allocating a temporary one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from replay.rundir_lock import RunDirError

_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


class DiskFullError(RunDirError):
    """A write of the run directory found no space; the message names the path and the
    bytes free."""


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in _FULL


def disk_full_error(path: Path) -> DiskFullError:
    try:
        free = f"{shutil.disk_usage(path.parent).free:,} bytes free"
    except OSError:
        free = "free space unknown"
    return DiskFullError(
        f"{path}: no space left on the device ({free} in {path.parent}); the records written "
        "so far are kept: free some space (or copy the run directory to a larger disk), then "
        f"continue with: replay run --resume {path.parent}"
    )


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` then `os.replace(tmp, path)`; the temporary file never outlives a failure."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if is_disk_full(e):
            raise disk_full_error(path) from None
        raise


def write_in_place(path: Path, data: bytes) -> None:
    """Overwrite `path` with `data` in its own blocks (no temporary file)."""
    try:
        with open(path, "r+b") as f:
            f.write(data)
            f.truncate(len(data))
    except OSError as e:
        if is_disk_full(e):
            raise disk_full_error(path) from None
        raise


def append_whole(fd: int, path: Path, data: bytes) -> None:
    """Append `data` (whole lines) to the journal open as `fd`; on failure the file is cut
    back to its length before, so it never ends in part of a line."""
    start = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as e:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        if is_disk_full(e):
            raise disk_full_error(path) from None
        raise


def torn_tail_bytes(path: Path) -> int:
    """The bytes after the journal's last newline: a line a kill left half-written (0: none)."""
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb") as f:
        step, pos = 65536, size
        while pos > 0:
            start = max(0, pos - step)
            f.seek(start)
            chunk = f.read(pos - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                return size - (start + nl + 1)
            pos = start
    return size


def cut_torn_tail(path: Path) -> int:
    """Remove a torn last line from the journal; the bytes removed (0: it ended whole)."""
    torn = torn_tail_bytes(path)
    if torn:
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size - torn)
    return torn


__all__ = [
    "DiskFullError",
    "append_whole",
    "cut_torn_tail",
    "disk_full_error",
    "is_disk_full",
    "torn_tail_bytes",
    "write_atomic",
    "write_in_place",
]
