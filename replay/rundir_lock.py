"""The one-writer lock of a run directory, and the run directory's errors.

A run directory has one writer: `RunLock` holds an exclusive `flock` on `writer.lock` for the
run's life (the kernel releases it when the writer exits, however it exits) and writes the
holder's pid and start time into it, so a second `replay run`/`--resume` is refused with a
message naming the holder. A lock file that still names a writer but is not locked was left
by a writer that died: the next writer takes it over and says so. `replay.rundir` re-exports
all of it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

LOCK = "writer.lock"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class RunDirError(Exception):
    """A run directory that is missing, unreadable or malformed; the message names the file."""


class RunLockedError(RunDirError):
    """Another live process is writing the run directory."""


@dataclass
class _Held:
    """One lock this process holds: its descriptor, how many RunLocks share it, and the
    first acquire's stale note."""

    fd: int
    depth: int
    note: str | None


_HELD: dict[Path, _Held] = {}  # this process's locks, by the lock file's resolved path


def _still_ours(held: _Held, path: Path) -> bool:
    """False when the run directory was removed (and perhaps made again) since the lock was
    taken: the held descriptor then locks a file that is gone."""
    try:
        a, b = os.fstat(held.fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class RunLock:
    """The exclusive writer lock of one run directory (see the module docstring).

    `acquire()` creates the directory if needed; nested acquires in one process share the
    lock. `stale_note` says when a dead writer's lock was taken over.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK
        self.stale_note: str | None = None
        self._created_dir = False
        self._held: _Held | None = None

    def acquire(self) -> RunLock:
        key = self.path.resolve() if self.path.parent.exists() else self.path.absolute()
        held = _HELD.get(key)
        if held is not None and _still_ours(held, self.path):
            held.depth += 1
            self.stale_note, self._held = held.note, held
            return self
        if held is not None:  # its directory was removed: that lock guards nothing now
            del _HELD[key]
            os.close(held.fd)
        self._created_dir = not self.run_dir.exists()
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise RunDirError(f"{self.run_dir}: cannot write the run directory ({e})") from e
        for attempt in range(5):  # a reader probing the lock holds it for a moment
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 4:
                    holder = _read_holder(fd)
                    os.close(fd)
                    raise RunLockedError(_locked_message(self.run_dir, holder)) from None
                time.sleep(0.05)
        previous = _read_holder(fd)
        if previous:
            self.stale_note = (
                f"took over the lock of a writer that died without releasing it (pid "
                f"{previous.get('pid', '?')}, started {previous.get('start', '?')})"
            )
        info = {"pid": os.getpid(), "host": socket.gethostname(), "start": utc_now()}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, orjson.dumps(info) + b"\n", 0)
            os.fsync(fd)
        except OSError as e:  # a full disk: leave no lock (nor a folder this call made)
            self._undo(fd, previous)
            raise RunDirError(
                f"{self.run_dir}: cannot write the run directory ({e.strerror or e}); free "
                "some space or choose another folder"
            ) from None
        self._held = _HELD[self.path.resolve()] = _Held(fd, 1, self.stale_note)
        return self

    def _undo(self, fd: int, previous: dict[str, Any]) -> None:
        """Take back a lock that could not be written: the file goes when this call made it
        (an earlier writer's stays, for the next to take over), and so does the folder."""
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        if previous:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        if self._created_dir:
            with contextlib.suppress(OSError):
                self.run_dir.rmdir()

    def release(self) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        held.depth -= 1
        if held.depth > 0:
            return
        key = next((k for k, v in _HELD.items() if v is held), None)
        if key is None:
            return  # dropped when its directory was removed (see acquire); fd closed there
        del _HELD[key]
        with contextlib.suppress(OSError):
            os.ftruncate(held.fd, 0)  # an empty lock file: the writer ended cleanly
        fcntl.flock(held.fd, fcntl.LOCK_UN)
        os.close(held.fd)
        if not self.run_dir.exists():
            return
        if self._created_dir and [p.name for p in self.run_dir.iterdir()] == [LOCK]:
            # Nothing was written (a failed preflight): leave no empty run directory behind.
            self.path.unlink(missing_ok=True)
            self.run_dir.rmdir()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        data = orjson.loads(os.pread(fd, 4096, 0) or b"{}")
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _locked_message(run_dir: Path, holder: dict[str, Any]) -> str:
    pid = holder.get("pid", "?")
    host = holder.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return (
        f"{run_dir} is being written by another replay process (pid {pid}{where}, started "
        f"{holder.get('start', '?')}); a run directory has one writer. Wait for that run to "
        f"end (or stop it: kill {pid}), then --resume it, or choose another --out"
    )


def lock_holder(run_dir: Path) -> dict[str, Any] | None:
    """The live writer's {pid, host, start}, or None when no process holds the lock."""
    path = Path(run_dir) / LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if (held := _HELD.get(path.resolve())) is not None and _still_ours(held, path):
            return _read_holder(fd) or {"pid": os.getpid()}
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or {"pid": "?"}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


__all__ = ["LOCK", "RunDirError", "RunLock", "RunLockedError", "lock_holder", "utc_now"]
